"""The `pyhybrid` command's entry point, and the search daemon that makes a warm `pyhybrid search` answer at once.

Most of a search's wall time as a new process went to imports (psycopg, numpy) and loading the ONNX model, not to
the query (tools/cli_timing.py). `pyhybrid search` and `pyhybrid embed` therefore ask a daemon of the same user that
keeps all of that loaded: this module imports nothing but the standard library, sends the daemon the command line,
environment and working directory over a Unix socket, and prints what the command printed. With no daemon running
the command runs in-process as before and starts one for the next call, which leaves after PYHYBRID_DAEMON_IDLE
seconds (default 600) without a request. PYHYBRID_DAEMON=0 turns it off; =only fails rather than run in-process.

The socket lives in a directory only its user may enter ($XDG_RUNTIME_DIR/pyhybrid, else /tmp/pyhybrid-<uid>, mode
0700, refused when another user owns it or others may enter), and the daemon also checks each peer's uid
(SO_PEERCRED): it opens no port and serves no other user. Its name carries a digest of the interpreter and of the
package's files, so a changed install starts a new daemon rather than answering with the old code.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

DAEMON_COMMANDS = {"search", "embed"}
_GLOBAL_VALUE_FLAGS = {"--dsn", "--data-dir"}
_MAX_REQUEST = 16 * 1024 * 1024


def main() -> int:
    """The console script: a search or embed through the daemon where one answers, else the CLI in-process."""
    argv = sys.argv[1:]
    if (_subcommand(argv) in DAEMON_COMMANDS and os.environ.get("PYHYBRID_DAEMON", "1") != "0"
            and hasattr(socket, "SO_PEERCRED")):  # Linux: the peer's uid is checked
        where = socket_path()
        if where is not None:
            answer = _ask(where, argv)
            if answer is not None:
                sys.stdout.write(answer["out"])
                sys.stderr.write(answer["err"])
                sys.stdout.flush()
                sys.stderr.flush()
                return int(answer["code"])
            if os.environ.get("PYHYBRID_DAEMON") == "only":  # a check that the daemon answers (tests)
                print("pyhybrid: error: no search daemon answered (PYHYBRID_DAEMON=only)", file=sys.stderr)
                return 2
            _spawn(where)
    from .cli import main as cli_main

    return cli_main()


def _subcommand(argv: list[str]) -> str | None:
    """The subcommand of a command line whose global flags may come first (--dsn X, --data-dir=X)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _GLOBAL_VALUE_FLAGS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _private_dir() -> Path | None:
    """The user's own directory for the socket, created 0700; None where it is not safely ours."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "pyhybrid" if base else Path("/tmp") / f"pyhybrid-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
    except OSError:
        return None
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


def socket_path() -> Path | None:
    """Where this install's daemon listens: a name by the interpreter and the package files' sizes and times."""
    import hashlib

    where = _private_dir()
    if where is None:
        return None
    here = Path(__file__).resolve().parent
    h = hashlib.sha256(f"{sys.executable}\0{here}".encode())
    sql = here / "sql" if (here / "sql").is_dir() else here.parent / "sql"  # a wheel's, else a checkout's
    for f in sorted(here.rglob("*.py")) + sorted(sql.rglob("*.sql")):
        st = f.stat()
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    sock = where / f"search-{h.hexdigest()[:16]}.sock"
    # a Unix socket's path holds at most 107 bytes: past that the daemon could never bind, and each call would start
    # one that loads the model and dies; such a directory gets no daemon (the command runs in-process)
    return sock if len(os.fsencode(str(sock))) <= 107 else None


def _send(sock: socket.socket, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _receive(sock: socket.socket) -> dict[str, Any]:
    head = _exactly(sock, 4)
    (size,) = struct.unpack("!I", head)
    if size > _MAX_REQUEST:
        raise ValueError(f"a message of {size} bytes")
    result: dict[str, Any] = json.loads(_exactly(sock, size))
    return result


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("the other end closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _ask(where: Path, argv: list[str]) -> dict[str, Any] | None:
    """The daemon's answer to argv (out, err, code), or None where no daemon answers (then the caller runs it)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect(str(where))
            sock.settimeout(None)  # a search may take its time: the server's statement_timeout bounds it
            _send(sock, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()})
            return _receive(sock)
    except (OSError, ValueError):
        return None


def _spawn(where: Path) -> None:
    """Start the daemon for where, detached (it outlives this command); a second one started at once leaves."""
    import subprocess

    try:
        subprocess.Popen([sys.executable, "-m", "pyhybrid._launch", str(where)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         close_fds=True)
    except OSError:
        pass


def serve(where: Path, idle: float) -> None:
    """The daemon: answer requests on where, one at a time, until idle seconds pass without one."""
    import fcntl

    lock = open(where.with_suffix(".lock"), "a")  # held for the daemon's life: one daemon a socket
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return
    from . import cli
    from .embed import default_embedder

    default_embedder()  # the model, loaded before the first request
    where.unlink(missing_ok=True)  # a socket a daemon that died left behind
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        old = os.umask(0o177)
        try:
            server.bind(str(where))
        finally:
            os.umask(old)
        server.listen(8)
        server.settimeout(idle)
        try:
            while True:
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    break
                with conn:
                    _answer(conn, cli)
        finally:
            where.unlink(missing_ok=True)


def _answer(conn: socket.socket, cli: Any) -> None:
    """Run one command line as the CLI would in the caller's environment and directory; send what it printed."""
    import contextlib
    import io
    import warnings

    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    if uid != os.getuid():
        return
    try:
        request = _receive(conn)
    except (OSError, ValueError):
        return
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        # warnings.catch_warnings: filters as a new process has them, and a warning shown once per place in a process
        # is shown again (entering it clears what earlier requests showed)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            try:
                code = cli.main([str(a) for a in request["argv"]])
            except SystemExit as exc:  # argparse: a bad flag (2), --help (0)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
                if not isinstance(exc.code, (int, type(None))):
                    print(exc.code, file=sys.stderr)
            except BaseException as exc:  # noqa: BLE001 - a bug: the caller sees it, the daemon goes on
                print(f"pyhybrid: error: the search daemon failed: {type(exc).__name__}: {exc} (PYHYBRID_DAEMON=0 "
                      "runs it in-process)", file=sys.stderr)
                code = 2
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    with contextlib.suppress(OSError):
        _send(conn, {"out": out.getvalue(), "err": err.getvalue(), "code": code})


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(os.environ.get("PYHYBRID_DAEMON_IDLE", "600")))
