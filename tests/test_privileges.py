"""The effective privileges after install, compared with a golden file: nothing forgotten, nothing over-granted.

Set PYHYBRID_UPDATE_GOLDEN=1 to rewrite tests/golden/privileges.txt after a deliberate change (the test then
fails, always: review the diff, it is the security surface, and run it again without the variable).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo

GOLDEN = Path(__file__).resolve().parent / "golden" / "privileges.txt"

# every grant on pyhybrid's objects to a role other than the object's owner (PUBLIC included), and for
# the extensions' objects a count of what PUBLIC may use plus any grant to pyhybrid's roles
PRIVILEGES_SQL = """
WITH ours AS (
    SELECT 'function' AS kind, p.oid::regprocedure::text AS name, coalesce(p.proacl, acldefault('f', p.proowner)) AS acl,
           p.proowner AS owner
    FROM pg_proc p
    WHERE p.pronamespace = 'hybrid'::regnamespace OR (p.pronamespace = 'public'::regnamespace AND p.proname = 'hybrid_retrieve')
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' ELSE 'table' END, c.oid::regclass::text,
           coalesce(c.relacl, acldefault((CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", c.relowner)), c.relowner
    FROM pg_class c
    WHERE c.relnamespace IN ('hybrid'::regnamespace, 'hybrid_graph'::regnamespace) AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
    UNION ALL
    SELECT 'type', t.oid::regtype::text, coalesce(t.typacl, acldefault('T', t.typowner)), t.typowner
    FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
    WHERE t.typnamespace = 'hybrid'::regnamespace AND c.relkind = 'c'
    UNION ALL
    SELECT 'schema', n.nspname::text, coalesce(n.nspacl, acldefault('n', n.nspowner)), n.nspowner
    FROM pg_namespace n WHERE n.nspname IN ('hybrid', 'hybrid_graph', 'ag_catalog', 'public')
), extension_objects AS (
    SELECT e.extname, 'function' AS kind, p.oid::regprocedure::text AS name,
           coalesce(p.proacl, acldefault('f', p.proowner)) AS acl
    FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid JOIN pg_proc p ON p.oid = d.objid
    WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    UNION ALL
    SELECT e.extname, 'table', c.oid::regclass::text, coalesce(c.relacl, acldefault('r', c.relowner))
    FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid JOIN pg_class c ON c.oid = d.objid
    WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND c.relkind IN ('r', 'p', 'v', 'S')
), grants AS (
    SELECT o.kind, o.name, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END AS grantee,
           a.privilege_type
    FROM ours o, aclexplode(o.acl) a
    WHERE a.grantee <> o.owner
)
SELECT format('%s %s: %s %s', kind, name, grantee, privilege_type) FROM grants
UNION ALL
SELECT format('extension %s: PUBLIC may %s %s of its %ss', extname, privilege_type, count(*), kind)
FROM (SELECT x.extname, x.kind, x.name, a.privilege_type FROM extension_objects x, aclexplode(x.acl) a
      WHERE a.grantee = 0) s
GROUP BY extname, kind, privilege_type
UNION ALL
SELECT format('extension %s %s %s: %s %s', x.extname, x.kind, x.name, pg_get_userbyid(a.grantee), a.privilege_type)
FROM extension_objects x, aclexplode(x.acl) a
WHERE pg_get_userbyid(a.grantee) IN ('hybrid_user', 'hybrid_app', 'hybrid_definer')
ORDER BY 1
"""


@pytest.mark.usefixtures("require_age", "require_bm25")
def test_effective_privileges_match_the_golden_file(admin_dsn: str, template_db: str) -> None:
    with psycopg.connect(conninfo.make_conninfo(admin_dsn, dbname=template_db)) as c:
        lines = [r[0] for r in c.execute(PRIVILEGES_SQL).fetchall()]  # type: ignore[arg-type]
    text = "\n".join(lines) + "\n"
    expected = GOLDEN.read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "installed"))
    if os.environ.get("PYHYBRID_UPDATE_GOLDEN"):
        # a rewrite is never a pass: with the variable set (in CI too) the test fails, so only a run without it,
        # after the new file is reviewed and committed, can pass
        GOLDEN.write_text(text, encoding="utf-8")
        pytest.fail(f"PYHYBRID_UPDATE_GOLDEN is set: {GOLDEN.name} rewritten; review it (git diff) and run again "
                    f"without the variable. The change:\n{diff or '(none)'}")
    assert text == expected, f"privileges differ from {GOLDEN.name} (PYHYBRID_UPDATE_GOLDEN=1 rewrites it):\n{diff}"


def test_no_function_of_the_schema_is_executable_by_public(admin_dsn: str, template_db: str) -> None:
    with psycopg.connect(conninfo.make_conninfo(admin_dsn, dbname=template_db)) as c:
        open_to_all = c.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a "
            "WHERE (p.pronamespace = 'hybrid'::regnamespace OR p.oid = 'public.hybrid_retrieve'::regproc) "
            "AND a.grantee = 0").fetchall()
    assert open_to_all == []
