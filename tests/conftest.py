"""Test fixtures: one real PostgreSQL per session, a fresh database per test, non-superuser roles."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest
from psycopg import conninfo

from pyhybrid import migrate
from pyhybrid._paths import sql_dir
from pyhybrid.server import start_embedded

# the CLI's search daemon (pyhybrid._launch) stays off in tests that run the binary; tests/test_cli_binary.py turns it
# on where it tests it, in a private directory of its own
os.environ["PYHYBRID_DAEMON"] = "0"

ROLES = {
    "pyh_app": "app",        # trusted application role: acts for any tenant
    "pyh_acme": "acme",      # tenant login role bound to acme (may claim ACL label "quality")
    "pyh_acme_writer": "acme",  # tenant login role bound to acme with every label: it may write
    "pyh_globex": "globex",  # tenant login role bound to globex
    "pyh_nobody": None,      # a hybrid user bound to no tenant
}


@pytest.fixture(scope="session")
def admin_dsn() -> Iterator[str]:
    """A superuser DSN: $PYHYBRID_TEST_DSN, the docker/ image (PYHYBRID_TEST_SERVER=docker, see
    tests/servers.py), else an embedded server in a temporary data dir."""
    from tests.servers import docker_server, server_choice

    choice = server_choice(os.environ)
    if choice == "dsn":
        yield os.environ["PYHYBRID_TEST_DSN"]
        return
    if choice == "docker":
        with docker_server(Path(__file__).resolve().parent.parent) as dsn:
            yield dsn
        return
    with embedded_server_in_temp_dir() as dsn:
        yield dsn


def _server_parent() -> str | None:
    """Where a test server keeps its data: /dev/shm when it has 8 GB free, else the system's temporary directory.
    Each `db` fixture creates a database of ~1,300 files and drops it: on ext4, after thousands of those, creating
    files spent the backend's time in the kernel's inode allocator (recently_deleted, perf); 150 tests of an empty
    `db` took 19 s with the server in memory against 71 to 83 s on disk."""
    try:
        if shutil.disk_usage("/dev/shm").free >= 8 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return None


@contextmanager
def embedded_server_in_temp_dir(prefix: str = "pyhybrid-test-") -> Iterator[str]:
    """An embedded server in a new temporary directory (_server_parent); stopped, and the directory removed, at the
    end."""
    from pyhybrid.server import stop_embedded

    parent = Path(tempfile.mkdtemp(prefix=prefix, dir=_server_parent()))
    data_dir = parent / "pgdata"
    try:
        yield start_embedded(data_dir)
    finally:
        try:
            stop_embedded(data_dir)
        finally:
            shutil.rmtree(parent, ignore_errors=True)


def _with(dsn: str, **kw: Any) -> str:
    return conninfo.make_conninfo(dsn, **kw)


@pytest.fixture(scope="session")
def extensions(admin_dsn: str) -> set[str]:
    with psycopg.connect(admin_dsn) as c:
        return {r[0] for r in c.execute("SELECT name FROM pg_available_extensions").fetchall()}


# PYHYBRID_TEST_PG_TEXTSEARCH=off: test databases are installed as `pyhybrid migrate --no-pg-textsearch` does, so that
# BM25 comes from the SQL scorer alone (tests/test_no_pg_textsearch.py runs the retrieval and tenancy tests so)
WITHOUT_PG_TEXTSEARCH = os.environ.get("PYHYBRID_TEST_PG_TEXTSEARCH") == "off"


@pytest.fixture(scope="session")
def template_db(admin_dsn: str) -> Iterator[str]:
    """A migrated database with tenants acme and globex and the test roles, used as a template."""
    name = f"pyh_tpl_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
        for role in ROLES:
            c.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)
            )
            if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                c.execute(f'CREATE ROLE "{role}" LOGIN PASSWORD \'{role}\'')
    dsn = _with(admin_dsn, dbname=name)
    migrate.upgrade(dsn, pg_textsearch=False if WITHOUT_PG_TEXTSEARCH else None)
    with psycopg.connect(dsn, autocommit=True) as c:
        # acme and globex each have a partition of their own (the tests of per-partition indexes, locks and health use
        # them); a tenant a test creates without a placement is pooled, the install's default (tests/test_pools.py)
        c.execute("SELECT hybrid.create_tenant('acme', NULL, 'dedicated'), hybrid.create_tenant('globex', NULL, 'dedicated')")
        c.execute("SELECT hybrid.grant_app('pyh_app')")
        c.execute("SELECT hybrid.grant_tenant('pyh_acme', 'acme', ARRAY['quality'])")
        c.execute("SELECT hybrid.grant_tenant('pyh_acme_writer', 'acme', ARRAY['*'])")
        c.execute("SELECT hybrid.grant_tenant('pyh_globex', 'globex')")
        c.execute("GRANT hybrid_user TO pyh_nobody")
    yield name
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Db:
    """A fresh database for one test."""

    name: str
    admin: str

    def dsn(self, role: str | None = None) -> str:
        """DSN of this database as role (default: the superuser)."""
        if role is None:
            return self.admin
        return _with(self.admin, user=role, password=role)


@contextmanager
def fresh_db(admin_dsn: str, template_db: str) -> Iterator[Db]:
    """A database cloned from the migrated template, dropped afterwards."""
    name = f"pyh_t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    dsn = _with(admin_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as c:
        # pg_textsearch keys its shared index state on the index OID alone, and a template clone
        # copies OIDs: two clones would share one BM25 state (timescale/pg_textsearch#464).
        # Recreating the index gives this database's a fresh OID.
        if c.execute("SELECT to_regclass('hybrid.chunk_content_bm25')").fetchone() != (None,):
            c.execute("DROP INDEX hybrid.chunk_content_bm25")
            c.execute((sql_dir() / "optional" / "bm25_index.sql").read_text())
            c.execute("SELECT hybrid._bm25_sentinel_reset(fresh => true)")
    try:
        yield Db(name=name, admin=dsn)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def demo_template(admin_dsn: str, template_db: str) -> Iterator[str]:
    """A database holding the demo (pyhybrid.demo.load_demo: both tenants' chunks, edges and abstention floors),
    loaded once a session: the tests that read the demo clone it (fresh_db) rather than embed and load it again."""
    from pyhybrid.demo import load_demo

    with fresh_db(admin_dsn, template_db) as d:
        load_demo(d.dsn(), d.dsn("pyh_app"), quiet=True)
        yield d.name


@pytest.fixture(scope="module")
def demo_db(admin_dsn: str, demo_template: str) -> Iterator[Db]:
    """A clone of demo_template for the tests of a module that only read the demo."""
    with fresh_db(admin_dsn, demo_template) as d:
        yield d


@pytest.fixture()
def empty_db(admin_dsn: str) -> Iterator[str]:
    """An empty database (nothing migrated), dropped afterwards: its DSN."""
    name = f"pyh_e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield _with(admin_dsn, dbname=name)
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture()
def db(admin_dsn: str, template_db: str) -> Iterator[Db]:
    with fresh_db(admin_dsn, template_db) as d:
        yield d


@pytest.fixture()
def db2(admin_dsn: str, template_db: str) -> Iterator[Db]:
    """A second fresh database (another "server" for tenant moves)."""
    with fresh_db(admin_dsn, template_db) as d:
        yield d


@pytest.fixture()
def require_age(extensions: set[str]) -> None:
    """AGE is part of CI's server: its absence is a failure, not a skip."""
    assert "age" in extensions, "Apache AGE is not available on the test server (CI's server has it)"


@pytest.fixture()
def require_bm25(extensions: set[str]) -> None:
    """pg_textsearch is part of CI's server: its absence is a failure, not a skip (except in the run that installs
    without it on purpose: tests/test_no_pg_textsearch.py)."""
    if WITHOUT_PG_TEXTSEARCH:
        pytest.skip("this run installs without pg_textsearch's index (PYHYBRID_TEST_PG_TEXTSEARCH=off)")
    assert "pg_textsearch" in extensions, "pg_textsearch is not available on the test server (CI's server has it)"


class Api:
    """Runs the same test case through the sync or the async client (one case, two I/O layers)."""

    def __init__(self, mode: str, dsn: str) -> None:
        self.mode = mode
        self.dsn = dsn
        self._loop: asyncio.AbstractEventLoop | None = None
        if mode == "sync":
            from pyhybrid import HybridClient

            self._client: Any = HybridClient(dsn)
        else:
            from pyhybrid import AsyncHybridClient

            self._loop = asyncio.new_event_loop()
            self._client = self._loop.run_until_complete(AsyncHybridClient(dsn).open())

    def _run(self, coro: Any) -> Any:
        assert self._loop is not None
        return self._loop.run_until_complete(coro)

    def call(self, tenant: str, method: str, *args: Any, acl_labels: list[str] | None = None, **kw: Any) -> Any:
        """client.tenant(tenant, acl_labels) then session.method(*args, **kw), in one transaction."""
        if self.mode == "sync":
            with self._client.tenant(tenant, acl_labels) as t:
                return getattr(t, method)(*args, **kw)

        async def go() -> Any:
            async with self._client.tenant(tenant, acl_labels) as t:
                return await getattr(t, method)(*args, **kw)

        return self._run(go())

    def retrieve(self, tenant: str, **kw: Any) -> Any:
        acl = kw.pop("acl_labels", None)
        return self.call(tenant, "retrieve", acl_labels=acl, **kw)

    def ingest(self, tenant: str, chunks: Any, corpus_id: str = "default") -> Any:
        # lexical- and graph-only chunks are the tests' own choice here
        return self.call(tenant, "ingest", chunks, corpus_id=corpus_id, allow_missing_embeddings=True)

    def add_edges(self, tenant: str, edges: Any) -> Any:
        return self.call(tenant, "add_edges", edges)

    def close(self) -> None:
        if self.mode == "sync":
            self._client.close()
        else:
            self._run(self._client.close())
            assert self._loop is not None
            self._loop.close()


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest, db: Db) -> Iterator[Api]:
    """The app role's client, sync or async: every test using it runs through both."""
    a = Api(request.param, db.dsn("pyh_app"))
    yield a
    a.close()


@pytest.fixture(scope="module")
def template_dsn_conn(admin_dsn: str, template_db: str):  # type: ignore[no-untyped-def]
    """A connection to a clone of the template kept for the module (a connection to the template
    itself would stop other tests from cloning it)."""
    import uuid

    from psycopg import conninfo

    name = f"pyh_rrf_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    with psycopg.connect(conninfo.make_conninfo(admin_dsn, dbname=name), autocommit=True) as c:
        yield c
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
