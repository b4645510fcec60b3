"""Bad input to the public SQL surface gets one clear line: 22023 naming the parameter and its rule, a short echo of
what was sent, and nothing written. Each case here once got a bare error from deeper down, or none (issue 48)."""

from __future__ import annotations

import psycopg
import pytest

from pyhybrid import HybridClient, InvalidParameterError
from pyhybrid.fusion import fuse_scores
from tests.conftest import Db
from tests.helpers import chunks


def _acme(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        t.ingest(chunks("a", 4, seed=8))
        t.add_edges([{"src": "a-0", "dst": "a-1", "rel": "MENTIONS"}])


def _answer(db: Db, role: str, sql: str, *args: object) -> tuple[str | None, str]:
    with psycopg.connect(db.dsn(role), autocommit=True) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        try:
            conn.execute(sql, args or None)
        except psycopg.Error as e:
            return e.sqlstate, str(e.diag.message_primary)
    return None, ""


def _live_chunks(db: Db) -> int:
    with psycopg.connect(db.dsn()) as admin:
        return admin.execute("SELECT count(*) FROM hybrid.chunk WHERE NOT superseded").fetchone()[0]


MEGABYTE_TEXT = "word " * 200_000


@pytest.mark.parametrize("sql", [
    "SELECT hybrid.lexical_strength(%s, ARRAY['a-0'])",
    "SELECT * FROM hybrid.search_lexical(%s)",
    "SELECT * FROM hybrid_retrieve(query_text => %s)",
])
def test_a_megabyte_query_text_is_refused_by_name_in_every_function_that_takes_one(db: Db, sql: str) -> None:
    # once: lexical_strength raised 54000 "string is too long for tsvector", naming nothing
    _acme(db)
    assert _answer(db, "pyh_acme", sql, MEGABYTE_TEXT) == (
        "22023", "query_text must be at most 20000 characters, got 1000000")


@pytest.mark.parametrize("fusion", ["convex", "blend", "dbsf"])
def test_fuse_refuses_scores_too_large_to_add_up_by_name(db: Db, fusion: str) -> None:
    # once: scores of 1e308 raised a bare 22003 "value out of range: overflow"
    sql = "SELECT * FROM hybrid.fuse('[[\"a\", \"b\"], [\"b\"]]', fusion => %s, scores => %s)"
    assert _answer(db, "pyh_acme", sql, fusion, "[[1, 1e308], [-1e308]]") == (
        "22023", "scores[1][2] must be a finite number between -1e12 and 1e12, got 1e+308")
    assert _answer(db, "pyh_acme", sql, fusion, "[[1, 2], [1e400]]") == (
        "22023", "scores[2][1] must be a finite number between -1e12 and 1e12, got a number beyond float8's range")
    with pytest.raises(InvalidParameterError,
                       match=r"^scores\[1\]\[2\] must be a finite number between -1e12 and 1e12, got 1e\+308$"):
        fuse_scores([["a", "b"], ["b"]], fusion=fusion, scores=[[1.0, 1e308], [-1e308]])


def test_fuse_takes_scores_up_to_the_bound_and_sums_them(db: Db) -> None:
    sql = "SELECT id, score FROM hybrid.fuse('[[\"a\"], [\"a\"]]', ARRAY[1e6, 1e6], 'blend', scores => '[[1e12], [1e12]]')"
    with psycopg.connect(db.dsn("pyh_acme")) as conn:
        assert conn.execute(sql).fetchall() == [("a", 2e18)]
    assert fuse_scores([["a"], ["a"]], [1e6, 1e6], "blend", scores=[[1e12], [1e12]]) == [("a", 2e18, [1, 1])]


@pytest.mark.usefixtures("require_age")
def test_edge_type_label_of_a_megabyte_name_echoes_a_short_prefix(db: Db) -> None:
    # once: the error echoed the whole argument, about 1 MB
    _acme(db)
    state, message = _answer(db, "pyh_acme", "SELECT hybrid.edge_type_label(%s)", "X" * 1_000_000)
    assert (state, message) == ("22023", "rel 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX'... (1000000 characters) is not an "
                                         "edge type of this tenant")
    # a name nobody uses, at a readable length, is still shown whole, as a type of another tenant would be
    assert _answer(db, "pyh_acme", "SELECT hybrid.edge_type_label('NOBODY_USES_THIS')") == (
        "22023", "rel 'NOBODY_USES_THIS' is not an edge type of this tenant")


@pytest.mark.parametrize("sql", [
    "SELECT * FROM hybrid.search_graph(ARRAY['a-0'], top_k => %s)",
    "SELECT * FROM hybrid.search_lexical('pumps', top_k => %s)",
    "SELECT * FROM hybrid.search_dense((SELECT embedding FROM (VALUES (array_fill(0.5, ARRAY[384])::vector)) v(embedding)), top_k => %s)",
])
@pytest.mark.parametrize("top_k", [-1, 0, 10001])
def test_a_branch_function_names_a_top_k_out_of_range(db: Db, sql: str, top_k: int) -> None:
    # once: search_graph(top_k => -1) raised 2201W "LIMIT must not be negative", naming no parameter
    _acme(db)
    assert _answer(db, "pyh_acme", sql, top_k) == ("22023", f"top_k must be between 1 and 10000, got {top_k}")


@pytest.mark.parametrize("args, message", [
    ("ARRAY['a-0'], ARRAY['NaN']::float8[]", "scores[1] must be a finite number between -1e12 and 1e12, got NaN"),
    ("ARRAY['a-0', 'a-1'], ARRAY[1, 'Infinity']::float8[]",
     "scores[2] must be a finite number between -1e12 and 1e12, got Infinity"),
    ("ARRAY['a-0'], ARRAY[1]::float8[], lists => '{\"dense\": {\"ids\": [\"a-0\"], \"values\": [\"NaN\"]}}'",
     'lists.dense: must be {"ids": [strings], "values": [numbers between -1e12 and 1e12]}, as many values as ids, '
     "at most 10000"),
])
def test_hydrate_refuses_a_score_that_is_not_a_finite_number(db: Db, args: str, message: str) -> None:
    # once: hydrate returned the row with its NaN score
    _acme(db)
    assert _answer(db, "pyh_acme", f"SELECT * FROM hybrid.hydrate({args})") == ("22023", message)


def test_prune_documents_with_a_null_dry_run_is_refused_and_prunes_nothing(db: Db) -> None:
    # once: a writer's dry_run => NULL ran as a real prune of every document of the corpus
    _acme(db)
    assert _answer(db, "pyh_app", "SELECT * FROM hybrid.prune_documents('default', ARRAY[]::text[], dry_run => NULL)") == (
        "22023", "dry_run must be true or false, got NULL")
    assert _live_chunks(db) == 4
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        with pytest.raises(InvalidParameterError, match=r"^dry_run must be True or False, got None$"):
            t.prune_documents("default", [], dry_run=None)  # type: ignore[arg-type]
    assert _live_chunks(db) == 4


# Every boolean parameter of every public function, called with NULL by a writer of acme: a minimal valid call
# of each function, the flag set to NULL. The catalog says which (function, flag) pairs exist: a new function
# with a flag fails the coverage check below until it has a call here.
FLAG_CALLS = {
    "hybrid.retrieve": "SELECT * FROM hybrid.retrieve(query_text => 'pumps', {flag} => NULL)",
    "public.hybrid_retrieve": "SELECT * FROM hybrid_retrieve(query_text => 'pumps', {flag} => NULL)",
    "hybrid.explain_retrieve": "SELECT hybrid.explain_retrieve(query_text => 'pumps', {flag} => NULL)",
    "hybrid.retrieve_many": "SELECT * FROM hybrid.retrieve_many(query_texts => ARRAY['pumps'], {flag} => NULL)",
    "hybrid.hydrate": "SELECT * FROM hybrid.hydrate(ARRAY['a-0'], ARRAY[1.0]::float8[], {flag} => NULL)",
    "hybrid.prune_documents": "SELECT * FROM hybrid.prune_documents('default', ARRAY[]::text[], {flag} => NULL)",
    "hybrid.use_embedder": """SELECT hybrid.use_embedder('default', '{{"name": "m", "dim": 384}}', {flag} => NULL)""",
}
PUBLIC_FLAGS_SQL = """
SELECT p.pronamespace::regnamespace::text || '.' || p.proname, a.name
FROM pg_proc p, unnest(p.proargnames, p.proargtypes::oid[]) AS a(name, typ)
WHERE (p.pronamespace = 'hybrid'::regnamespace OR p.oid = 'public.hybrid_retrieve'::regproc)
  AND p.proname !~ '^_' AND has_function_privilege('hybrid_user', p.oid, 'EXECUTE') AND a.typ = 'boolean'::regtype
ORDER BY 1, 2
"""


def _public_flags(db: Db) -> list[tuple[str, str]]:
    with psycopg.connect(db.dsn()) as admin:
        return admin.execute(PUBLIC_FLAGS_SQL).fetchall()


def test_every_boolean_flag_of_the_public_functions_has_a_null_call_below(db: Db) -> None:
    flags = _public_flags(db)
    assert {f for f, _ in flags} == set(FLAG_CALLS)
    assert len(flags) == 16  # retrieve and its three derived twins x 3 flags, hydrate x 2, prune x 1, use_embedder x 1


def test_every_boolean_flag_of_every_public_function_refuses_null_and_writes_nothing(db: Db) -> None:
    _acme(db)
    answers = {(function, flag): _answer(db, "pyh_app", FLAG_CALLS[function].format(flag=flag))
               for function, flag in _public_flags(db)}
    assert answers == {key: ("22023", f"{key[1]} must be true or false, got NULL") for key in answers}
    assert _live_chunks(db) == 4
