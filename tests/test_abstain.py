"""Abstention (issue 26): retrieve(abstain=True) returns no rows, and says so, when nothing is relevant: the mean
similarity of the dense branch's ten best hits below the tenant's calibrated floor, its best hit below 1.5 times the
floor and no lexical hit holding every term of the query."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import psycopg
import pytest

from pyhybrid import AbstainedWarning, HybridClient, InvalidParameterError
from pyhybrid.errors import PyhybridError, TenantError
from tests.conftest import Api, Db
from tests.helpers import chunks, near, unit

ON_TOPIC = "How quickly must the pump alarm after a downstream occlusion?"
OFF_TOPIC = "a recipe for chocolate cake with vanilla frosting"


def _ask(dsn: str, text: str | None, embed: bool = True, **kw: Any) -> tuple[list[Any], list[str]]:
    from pyhybrid.embed import default_embedder

    vec = default_embedder().embed_query(text) if embed and text else None
    with warnings.catch_warnings(record=True) as caught, HybridClient(dsn) as c, c.tenant("acme") as t:
        warnings.simplefilter("always")
        rows = t.retrieve(query_embedding=vec, query_text=text, **kw)
    return rows, [str(w.message) for w in caught if issubclass(w.category, AbstainedWarning)]


@pytest.mark.usefixtures("require_bm25")
def test_an_off_topic_question_gets_no_rows_and_a_warning_an_on_topic_one_its_answer(demo_db: Db) -> None:
    rows, said = _ask(demo_db.dsn("pyh_app"), OFF_TOPIC, abstain=True)
    assert rows == [] and len(said) == 1 and said[0].startswith("hybrid_retrieve.abstained: the dense branch's ten best hits")
    plain, said = _ask(demo_db.dsn("pyh_app"), OFF_TOPIC)  # without abstain the same call answers (weakly)
    assert plain and not said
    rows, said = _ask(demo_db.dsn("pyh_app"), ON_TOPIC, abstain=True)
    assert rows and rows[0].chunk_id == "acme:REQ-012#0" and not said
    assert [r.chunk_id for r in rows] == [r.chunk_id for r in _ask(demo_db.dsn("pyh_app"), ON_TOPIC)[0]]


@pytest.mark.usefixtures("require_bm25")
def test_a_lexical_hit_holding_every_term_answers_without_a_dense_branch(demo_db: Db) -> None:
    rows, said = _ask(demo_db.dsn("pyh_app"), "DEV-007", embed=False, abstain=True)  # the id's two terms, in a hit
    assert rows and rows[0].chunk_id.startswith("acme:DEV-007") and not said
    rows, said = _ask(demo_db.dsn("pyh_app"), "DEV-007 chocolate", embed=False, abstain=True)
    assert rows == [] and said


def test_explain_shows_the_floor_and_the_similarities(demo_db: Db) -> None:
    from pyhybrid.embed import default_embedder

    with psycopg.connect(demo_db.dsn()) as admin:
        floor = admin.execute("SELECT abstain_floor FROM hybrid.tenant WHERE tenant_id = 'acme'").fetchone()[0]
    with HybridClient(demo_db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AbstainedWarning)
            report = t.explain_retrieve(query_embedding=default_embedder().embed_query(OFF_TOPIC),
                                        query_text=OFF_TOPIC, abstain=True)
    a = report["abstention"]
    assert report["rows"] == [] and a["lexical_full_match"] is False
    assert a["mean_similarity"] < a["floor"] and a["mean_similarity"] < a["best_similarity"] < 1.5 * a["floor"]
    assert a["floor"] == floor
    with HybridClient(demo_db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        assert t.explain_retrieve(query_text="pump", abstain=False)["abstention"] is None


def _sixty(api: Api) -> tuple[list[Any], Any]:
    base = unit(1)
    docs = [dataclasses.replace(d, embedding=near(base, i + 10, 0.6 + (i % 5) * 0.2))
            for i, d in enumerate(chunks("c", 60, doc_size=3))]
    api.ingest("acme", docs, corpus_id="qms")
    e = np.stack([d.embedding for d in docs]).astype(np.float64)
    return docs, e @ e.T


def test_the_default_floor_is_from_each_chunks_tenth_neighbour_of_another_document(api: Api, db: Db) -> None:
    # 60 chunks: every one is sampled, its ten nearest chunks of other documents found exactly
    docs, sims = _sixty(api)
    floor = api.call("acme", "calibrate_abstention")
    doc = [d.document_id for d in docs]
    tenth = [sorted((sims[i, j] for j in range(60) if doc[j] != doc[i]), reverse=True)[9] for i in range(60)]
    assert len(set(doc)) < 60  # chunks share documents: a chunk's own document's others are not its neighbours
    assert floor == pytest.approx(0.60 * float(np.median(tenth)), abs=1e-6)
    assert api.call("acme", "calibrate_abstention") == floor  # the same sample, the same floor
    with psycopg.connect(db.dsn()) as c:
        stored = c.execute("SELECT tenant_id, abstain_floor FROM hybrid.tenant ORDER BY 1").fetchall()
    assert stored == [("acme", floor), ("globex", None)]  # the other tenant's floor is untouched


def test_a_quantile_gives_the_floor_of_two_chunks_at_random(api: Api, db: Db) -> None:
    _, sims = _sixty(api)
    # all 60 sampled: the floor is 0.82 x the 0.96 quantile of every pair's similarity (percentile_cont interpolates
    # as numpy)
    floor = api.call("acme", "calibrate_abstention", 0.96)
    assert floor == pytest.approx(0.82 * float(np.quantile(sims[np.triu_indices(60, 1)], 0.96)), abs=1e-6)
    assert api.call("acme", "calibrate_abstention", 0.5) < floor


def _at(q: np.ndarray, similarity: float, seed: int) -> np.ndarray:
    """A unit vector whose cosine similarity to the unit vector q is similarity."""
    u = unit(seed) - float(unit(seed) @ q) * q
    return (similarity * q + np.sqrt(1 - similarity ** 2) * u / np.linalg.norm(u)).astype(np.float32)


@pytest.mark.parametrize(("best", "others", "answered"), [
    (0.5, 0.05, False),  # one hit above the floor, nine far: answered when the best hit alone decided
    (0.65, 0.05, True),  # the best hit 1.5 times the floor answers alone (a question one chunk answers)
    (0.45, 0.45, True),  # ten hits above the floor
    (0.7, 0.3, True),  # their mean above it
    (0.55, 0.3, False),  # their mean 0.325, the best below 0.6
])
def test_the_ten_best_hits_decide_and_a_near_one_answers_alone(db: Db, best: float, others: float,
                                                              answered: bool) -> None:
    q = unit(7)
    docs = [dataclasses.replace(d, embedding=_at(q, best if i == 0 else others if i < 10 else -0.5, i + 100))
            for i, d in enumerate(chunks("c", 30))]
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        t.ingest(docs, corpus_id="qms")
    with psycopg.connect(db.dsn()) as admin:
        admin.execute("UPDATE hybrid.tenant SET abstain_floor = 0.4 WHERE tenant_id = 'acme'")
    with HybridClient(db.dsn("pyh_acme")) as c, c.tenant("acme", ["quality"]) as t:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = t.retrieve(query_embedding=q, abstain=True)
    said = [str(w.message) for w in caught if issubclass(w.category, AbstainedWarning)]
    assert (rows != [] and said == []) if answered else (rows == [] and len(said) == 1)
    if not answered:
        mean = (best + 9 * others) / 10
        assert f"(mean similarity {mean:.4f}, best {best:.4f})" in said[0], said


def test_abstain_without_a_calibrated_floor_says_how_to_get_one(api: Api) -> None:
    api.ingest("acme", chunks("c", 5), corpus_id="qms")
    with pytest.raises(PyhybridError, match="not calibrated") as info:
        api.retrieve("acme", query_text="pumps", abstain=True)
    assert info.value.__cause__.sqlstate == "55000"  # type: ignore[union-attr]
    assert "calibrate_abstention" in str(info.value.__cause__.diag.message_hint)  # type: ignore[union-attr]
    with pytest.raises(PyhybridError, match="at least 20 chunks with embeddings"):
        api.call("acme", "calibrate_abstention")  # five chunks are too few to calibrate on


def test_a_reader_may_abstain_but_not_calibrate(db: Db) -> None:
    base = unit(99)  # 30 chunks near one direction: their pairs are alike, the floor high
    docs = [dataclasses.replace(d, embedding=near(base, i + 10, 0.5)) for i, d in enumerate(chunks("c", 30))]
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        t.ingest(docs, corpus_id="qms")
        t.calibrate_abstention()
    with HybridClient(db.dsn("pyh_acme")) as c, c.tenant("acme", ["quality"]) as t:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answered = t.retrieve(query_embedding=base, abstain=True)  # on topic: answered, no warning
            abstained = t.retrieve(query_embedding=-base, abstain=True)  # opposite: nothing, and said so
        said = [str(w.message) for w in caught if issubclass(w.category, AbstainedWarning)]
        assert len(answered) == 10 and abstained == []
        assert len(said) == 1 and said[0].startswith("hybrid_retrieve.abstained: the dense branch's ten best hits"), said
        with pytest.raises(TenantError, match="may read tenant 'acme' but not write it"):
            t.calibrate_abstention()
    with psycopg.connect(db.dsn("pyh_acme")) as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        c.execute("UPDATE hybrid.tenant SET abstain_floor = 0")  # only the definer function writes it


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "0.9"])
def test_a_bad_quantile_is_refused_in_python_and_in_sql(db: Db, value: Any) -> None:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t, \
            pytest.raises(InvalidParameterError, match="quantile must be a number between 0 and 1"):
        t.calibrate_abstention(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with psycopg.connect(db.dsn("pyh_app")) as c, pytest.raises(psycopg.errors.InvalidParameterValue,
                                                                      match="quantile must be a number"):
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
            c.execute("SELECT hybrid.calibrate_abstention(%s)", (value,))


def test_abstain_must_be_a_boolean(db: Db) -> None:
    from pyhybrid import RetrieveQuery

    with pytest.raises(InvalidParameterError, match="abstain must be true or false"):
        RetrieveQuery(query_text="x", abstain="yes")  # type: ignore[arg-type]
