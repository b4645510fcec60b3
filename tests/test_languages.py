"""A text-search language per tenant: its stemmer and stop words for BM25 (index and SQL scorer), ts_rank, term
coverage and abstention; an English tenant unchanged; a change rebuilds the tenant's lexical side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from pyhybrid import HybridClient, InvalidParameterError
from tests.conftest import Db
from tests.helpers import unit

# (language, the documents, a query word inflected otherwise than the document it should find, that document,
#  a query of stop words and one term, how many terms it has)
CASES = [
    ("german", ["Die Häuser am See sind alt und schön.", "Der Zug fährt morgen früh nach Berlin.",
                "Ein Kuchen braucht Mehl, Eier und Zucker."],
     "Haus", "doc0", "die und der mit Zucker", 1),
    ("french", ["Les chevaux du village sont anciens.", "Le train part demain matin pour Paris.",
                "Un gâteau demande de la farine et des œufs."],
     "cheval", "doc0", "le la et des farine", 1),
    ("spanish", ["Los árboles del pueblo son antiguos.", "El tren sale mañana temprano hacia Madrid.",
                 "Un pastel necesita harina y huevos."],
     "árbol", "doc0", "el la los y de harina", 1),
]
SCORERS = {"bm25 index": ("bm25", "index"), "bm25 sql": ("bm25", "sql"), "ts_rank": ("ts_rank", None)}


def _tenant(db: Db, tenant: str, language: str | None, texts: list[str], placement: str = "dedicated") -> None:
    with HybridClient(db.dsn()) as admin:
        admin.create_tenant(tenant, language=language, placement=placement)
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        t.ingest([{"chunk_id": f"{tenant}:doc{i}", "document_id": f"doc{i}", "content": text, "embedding": unit(i)}
                  for i, text in enumerate(texts)])


def _lexical(db: Db, tenant: str, query: str, scorer: str, extensions: set[str]) -> list[str]:
    method, mode = SCORERS[scorer]
    if mode == "index" and "pg_textsearch" not in extensions:
        pytest.fail("pg_textsearch is missing: CI's server has it")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        if mode:
            t.conn.execute("SELECT set_config('hybrid.bm25_scorer', %s, true)", (mode,))
        refs = t.retrieve(query_text=query, lexical=method, vector_weight=0, graph_weight=0, top_k=3)
        if mode:
            used = t.conn.execute("SELECT current_setting('hybrid.bm25_scores', true) AS s").fetchone()["s"] or ""
            assert ("SQL scorer" in used) == (mode == "sql"), used
    return [r.document_id for r in refs]


def _scores(db: Db, tenant: str, query: str, mode: str) -> list[float]:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        t.conn.execute("SELECT set_config('hybrid.bm25_scorer', %s, true)", (mode,))
        rows = t.conn.execute("SELECT chunk_id, value FROM hybrid.search_lexical(%s, 10)", (query,)).fetchall()
    return [r["value"] for r in sorted(rows, key=lambda r: r["chunk_id"])]


def _terms(db: Db, tenant: str, query: str) -> int:
    with psycopg.connect(db.dsn("pyh_app")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (tenant,))
        return int(conn.execute("SELECT (hybrid._term_match(%s, ARRAY['x']))[1]", (query,)).fetchone()[0])


@pytest.mark.parametrize("scorer", list(SCORERS))
@pytest.mark.parametrize("language, texts, query, expected, stop_query, terms", CASES, ids=[c[0] for c in CASES])
def test_an_inflected_query_word_finds_its_stem_and_stop_words_are_no_terms(
        db: Db, extensions: set[str], scorer: str, language: str, texts: list[str], query: str, expected: str,
        stop_query: str, terms: int) -> None:
    placement = "dedicated" if scorer == "bm25 index" else "pool"  # a pooled tenant has no index of its own
    _tenant(db, "t1", language, texts, placement)
    _tenant(db, "en", None, texts, placement)  # the same texts, English: the stem is not found
    assert _lexical(db, "t1", query, scorer, extensions)[:1] == [expected]
    assert expected not in _lexical(db, "en", query, scorer, extensions)
    assert _terms(db, "t1", stop_query) == terms
    assert _terms(db, "en", stop_query) > terms  # English keeps most of these words


def test_simple_neither_stems_nor_drops_stop_words(db: Db, extensions: set[str]) -> None:
    texts = ["The house by the lake is old.", "Kitap okumak güzeldir.", "Houses of the old town."]
    _tenant(db, "plain", "simple", texts)
    for scorer in SCORERS:
        assert _lexical(db, "plain", "house", scorer, extensions) == ["doc0"]  # "houses" is another word
        assert _lexical(db, "plain", "kitap", scorer, extensions) == ["doc1"]
    assert _terms(db, "plain", "the house of the") == 3  # the, house, of: simple drops no stop word
    _tenant(db, "en", None, texts)
    assert sorted(_lexical(db, "en", "house", "bm25 sql", extensions)) == ["doc0", "doc2"]  # english stems
    assert _terms(db, "en", "the house of the") == 1


def test_an_english_tenant_is_unchanged_beside_a_german_one(db: Db, extensions: set[str]) -> None:
    texts = ["The houses by the lake are old.", "The train leaves early tomorrow.", "A cake needs flour and eggs."]
    _tenant(db, "en", None, texts)
    before = {s: _lexical(db, "en", "house lake", s, extensions) for s in SCORERS}
    _tenant(db, "de", "german", CASES[0][1])
    with HybridClient(db.dsn()) as admin:
        assert admin.tenant_language("en") == "english" and admin.tenant_language("de") == "german"
    assert {s: _lexical(db, "en", "house lake", s, extensions) for s in SCORERS} == before == {
        s: ["doc0"] for s in SCORERS}
    with psycopg.connect(db.dsn()) as conn:
        rows = dict(conn.execute("SELECT t.tenant_id, pg_get_indexdef(hybrid._bm25_partition_index(t.tenant_key)::regclass) "
                                 "FROM hybrid.tenant t WHERE t.tenant_id IN ('en', 'de')").fetchall())
    if "pg_textsearch" in extensions:
        assert "text_config=english" in rows["en"] and "text_config=german" in rows["de"]


def test_changing_a_language_rebuilds_the_tenants_lexical_side(db: Db, extensions: set[str]) -> None:
    _tenant(db, "t1", None, CASES[0][1])  # German text in an English tenant
    assert "doc0" not in _lexical(db, "t1", "Haus", "bm25 sql", extensions)
    with HybridClient(db.dsn()) as admin:
        assert admin.set_tenant_language("t1", "german") == "german"
        assert admin.set_tenant_language("t1", "german") == "german"  # the same again: nothing to do
    for scorer in SCORERS:
        assert _lexical(db, "t1", "Haus", scorer, extensions)[:1] == ["doc0"]
    with psycopg.connect(db.dsn()) as conn:
        drift = conn.execute("SELECT count(*) FROM hybrid.bm25_stats_drift('t1')").fetchone()[0]
        assert drift == 0  # the BM25 statistics are the German lexemes'
    if "pg_textsearch" in extensions:  # the rebuilt index scores as the exact scorer does, from German statistics
        scores = {mode: _scores(db, "t1", "Häuser Zug Kuchen", mode) for mode in ("index", "sql")}
        assert len(scores["sql"]) == 3 and scores["index"] == pytest.approx(scores["sql"], rel=1e-5), scores
    # a new chunk is tokenized in German at once (the partition's generated column)
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("t1") as t:
        t.ingest([{"chunk_id": "t1:doc9", "document_id": "doc9", "content": "Die Gärten blühen.", "embedding": unit(9)}])
    assert _lexical(db, "t1", "Garten", "ts_rank", extensions) == ["doc9"]


def test_a_language_the_server_lacks_is_refused_naming_the_ones_it_has(db: Db) -> None:
    with HybridClient(db.dsn()) as admin:
        admin.create_tenant("t1", placement="dedicated")
        with pytest.raises(InvalidParameterError, match=r"language must be a text search configuration of this "
                                                        r"server \(one of .*german.*simple.*\), got 'klingon'"):
            admin.set_tenant_language("t1", "klingon")
        with pytest.raises(InvalidParameterError, match="tenant_id 'nobody' does not exist"):
            admin.set_tenant_language("nobody", "german")
        assert admin.tenant_language("t1") == "english"


def test_only_an_admin_sets_a_language(db: Db) -> None:
    with HybridClient(db.dsn()) as admin:
        admin.create_tenant("t1", placement="dedicated")
    for role in ("pyh_app", "pyh_acme"):
        with psycopg.connect(db.dsn(role)) as conn:
            with pytest.raises(psycopg.Error) as exc:
                conn.execute("SELECT hybrid.set_tenant_language('t1', 'german')")
            assert exc.value.sqlstate == "42501"
            conn.rollback()
            for fn in ("hybrid._swap_partition(1, 'german')", "hybrid._bm25_text_configs()", "hybrid._text_config(1)"):
                with pytest.raises(psycopg.Error) as exc:
                    conn.execute(f"SELECT {fn}")
                assert exc.value.sqlstate == "42501", fn
                conn.rollback()


def test_cli_creates_a_tenant_in_a_language_and_export_import_keeps_it(db: Db, db2: Db, tmp_path: Any,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from pyhybrid.cli import main

    assert main(["--dsn", db.dsn(), "tenant", "create", "de", "--language", "german"]) == 0
    assert main(["--dsn", db.dsn(), "tenant", "language", "de"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "german"
    (tmp_path / "haus.md").write_text("# Häuser\n\nDie Häuser am See sind alt.\n")
    assert main(["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "de", "--quiet"]) == 0
    assert main(["--dsn", db.dsn(), "tenant", "export", "de", str(tmp_path / "de.jsonl")]) == 0
    assert main(["--dsn", db2.dsn(), "tenant", "import", str(tmp_path / "de.jsonl")]) == 0
    capsys.readouterr()
    assert main(["--dsn", db2.dsn(), "tenant", "language", "de"]) == 0
    assert capsys.readouterr().out.strip() == "german"
    assert main(["--dsn", db2.dsn(), "search", "Haus", "--tenant", "de", "--vector-weight", "0", "--json"]) == 0
    assert '"document_id": "haus.md"' in capsys.readouterr().out
    assert main(["--dsn", db.dsn(), "tenant", "language", "de", "klingon"]) == 2
    assert "language must be a text search configuration" in capsys.readouterr().err


def test_a_bulk_load_and_a_late_pg_textsearch_keep_a_german_tenants_index_german(db: Db, extensions: set[str]) -> None:
    if "pg_textsearch" not in extensions:
        pytest.fail("pg_textsearch is missing: CI's server has it")
    _tenant(db, "de", "german", CASES[0][1])

    def config() -> str:
        with psycopg.connect(db.dsn()) as conn:
            return conn.execute("SELECT pg_get_indexdef(hybrid._bm25_partition_index(hybrid._tenant_key('de'))::regclass)"
                                ).fetchone()[0]

    with HybridClient(db.dsn()) as admin, admin.bulk_load():  # the text indexes dropped, then built again
        pass
    assert "text_config=german" in config()
    # the parent index created anew in one statement (as when pg_textsearch is installed later) builds every
    # partition's in its definition, english: the optional part then gives the German tenant its own again
    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        conn.execute("DROP INDEX hybrid.chunk_content_bm25")
    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        conn.execute((Path(__file__).resolve().parents[1] / "sql" / "optional" / "bm25_index.sql").read_text())
    assert "text_config=german" in config()
    assert _lexical(db, "de", "Haus", "bm25 index", extensions)[:1] == ["doc0"]


def test_searches_go_on_while_a_populated_tenant_changes_language(db: Db, extensions: set[str]) -> None:
    import threading

    import numpy as np

    rng = np.random.default_rng(3)
    words = "haus häuser garten gärten see zug kuchen mehl stadt straße".split()
    with HybridClient(db.dsn()) as admin:
        admin.create_tenant("big", placement="dedicated")
        admin.create_tenant("small", placement="dedicated")
    with HybridClient(db.dsn("pyh_app")) as c:
        for tenant, n in (("big", 3000), ("small", 50)):
            with c.tenant(tenant) as t:
                t.ingest([{"chunk_id": f"c{i}", "document_id": f"d{i // 3}", "position": i % 3,
                           "content": " ".join(rng.choice(words, 30)), "embedding": unit(i)} for i in range(n)])
    stop, failures, answered = threading.Event(), [], {"big": 0, "small": 0}

    def read(tenant: str) -> None:
        try:
            with HybridClient(db.dsn("pyh_app")) as c:
                while not stop.is_set():
                    with c.tenant(tenant) as t:
                        assert t.retrieve(query_embedding=unit(1), query_text="haus garten", top_k=5)
                    answered[tenant] += 1
        except BaseException as exc:  # noqa: BLE001 - asserted below
            failures.append(exc)

    readers = [threading.Thread(target=read, args=(t,)) for t in answered for _ in range(2)]
    for r in readers:
        r.start()
    try:
        with HybridClient(db.dsn()) as admin:
            assert admin.set_tenant_language("big", "german") == "german"
    finally:
        stop.set()
        for r in readers:
            r.join()
    assert not failures, failures
    assert answered["big"] > 0 and answered["small"] > 0
    assert _lexical(db, "big", "Häuser", "bm25 sql", extensions)  # German stems: "häuser" is "haus"
    with psycopg.connect(db.dsn()) as conn:
        assert conn.execute("SELECT count(*) FROM hybrid.chunk WHERE tenant_id = 'big'").fetchone()[0] == 3000
        assert conn.execute("SELECT count(*) FROM hybrid.bm25_stats_drift('big')").fetchone()[0] == 0


def test_doctor_lists_the_languages_and_flags_a_bm25_index_of_another(db: Db, extensions: set[str]) -> None:
    from pyhybrid import doctor

    if "pg_textsearch" not in extensions:
        pytest.fail("pg_textsearch is missing: CI's server has it")
    _tenant(db, "de", "german", CASES[0][1])
    _tenant(db, "en", None, ["The houses by the lake are old."])

    def finding() -> Any:
        with psycopg.connect(db.dsn()) as conn:
            return next(f for f in doctor.check(conn) if f.subject == "tenant languages")

    first = finding()
    assert first.state.endswith("english, 1 german") and not first.problem  # the fixture's tenants are english
    with psycopg.connect(db.dsn(), autocommit=True) as conn:  # as a parent index built anew would leave it
        idx = conn.execute("SELECT hybrid._bm25_partition_index(hybrid._tenant_key('de'))").fetchone()[0]
        conn.execute(f"ALTER INDEX {idx} SET (text_config = english)")
    broken = finding()
    assert broken.problem and "1 tenant(s) whose BM25 index reads ANOTHER language" in broken.state
    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        conn.execute(broken.fix.split(": ", 1)[1])
    assert not finding().problem
    assert _lexical(db, "de", "Haus", "bm25 index", extensions)[:1] == ["doc0"]
