"""The LangChain and LlamaIndex retrievers against the real server, through the frameworks' own interfaces."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from langchain_tests.integration_tests import RetrieversIntegrationTests

from pyhybrid import HybridClient
from pyhybrid.integrations.langchain import PyhybridRetriever as LangChainRetriever
from pyhybrid.integrations.llamaindex import PyhybridRetriever as LlamaIndexRetriever
from tests.conftest import Db
from tests.helpers import chunks

QUERY = "pumps valves and alarms"


def _load(db: Db) -> str:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        t.ingest(chunks("lc", 12), corpus_id="qms")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("globex") as t:
        t.ingest(chunks("gx", 3), corpus_id="qms")
    return db.dsn("pyh_acme")  # a tenant login role: row-level security applies


class TestLangChainStandardRetrieverSuite(RetrieversIntegrationTests):
    """LangChain's own standard tests for retrievers (langchain-tests), run against the embedded server."""

    dsn = ""

    @pytest.fixture(autouse=True)
    def _corpus(self, db: Db) -> None:
        type(self).dsn = _load(db)

    @property
    def retriever_constructor(self) -> type[LangChainRetriever]:
        return LangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"dsn": self.dsn, "tenant_id": "acme", "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_langchain_chain_retriever_then_format_docs_and_metadata(db: Db) -> None:
    dsn = _load(db)
    retriever = LangChainRetriever(dsn=dsn, tenant_id="acme", k=3, search_kwargs={"fusion": "convex"})
    chain = retriever | RunnableLambda(lambda docs: "\n\n".join(d.page_content for d in docs))
    text = chain.invoke("chunk number 5 item5")
    assert text.startswith("lc chunk number 5 about pumps")
    docs = retriever.invoke("chunk number 5 item5")
    assert isinstance(docs[0], Document) and docs[0].id == "lc-5" and docs[0].metadata["chunk_id"] == "lc-5"
    assert docs[0].metadata["keyword_rank"] == 1 and docs[0].metadata["tenant_id"] == "acme"
    assert {d.metadata["tenant_id"] for d in retriever.invoke("gx chunk")} == {"acme"}  # never globex's


async def test_langchain_async_equals_sync(db: Db) -> None:
    retriever = LangChainRetriever(dsn=_load(db), tenant_id="acme", k=5)
    sync = [d.id for d in retriever.invoke(QUERY)]
    assert [d.id for d in await retriever.ainvoke(QUERY)] == sync


async def test_llamaindex_retriever_sync_async_and_global_settings_untouched(db: Db) -> None:
    from llama_index.core import Settings

    dsn = _load(db)
    retriever = LlamaIndexRetriever(dsn, "acme", top_k=3)
    nodes = retriever.retrieve("chunk number 5 item5")
    by_id = {n.node.node_id: n for n in nodes}
    assert by_id["lc-5"].node.metadata["keyword_rank"] == 1 and by_id["lc-5"].node.text.startswith("lc chunk number 5")
    with HybridClient(dsn) as c, c.tenant("acme") as t:
        ref = t.retrieve(query_embedding=retriever.embedder(["chunk number 5 item5"])[0],
                         query_text="chunk number 5 item5", top_k=3)
    assert [(n.node.node_id, n.score) for n in nodes] == [(r.chunk_id, r.score) for r in ref]
    assert [n.node.node_id for n in await retriever.aretrieve("chunk number 5 item5")] == [r.chunk_id for r in ref]
    assert Settings._llm is None and Settings._embed_model is None  # never set (they default to a hosted service)


def test_nothing_reaches_the_network_at_import_or_retrieval(db: Db) -> None:
    dsn = _load(db)
    script = textwrap.dedent(f"""
        import socket
        _connect = socket.socket.connect
        def guard(self, address):
            if self.family != socket.AF_UNIX:
                raise SystemExit(f"network access: {{address!r}}")
            return _connect(self, address)
        socket.socket.connect = guard
        socket.create_connection = lambda *a, **k: guard(socket.socket(), a[0])
        from pyhybrid.integrations.langchain import PyhybridRetriever as L
        from pyhybrid.integrations.llamaindex import PyhybridRetriever as I
        assert L(dsn={dsn!r}, tenant_id="acme", k=2).invoke("pumps valves")
        assert I({dsn!r}, "acme", top_k=2).retrieve("pumps valves")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
