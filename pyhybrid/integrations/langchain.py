"""PyhybridRetriever: hybrid_retrieve as a LangChain retriever (langchain-core BaseRetriever, sync and async).

    from pyhybrid.integrations.langchain import PyhybridRetriever
    retriever = PyhybridRetriever(dsn=DSN, tenant_id="acme", k=4)
    docs = retriever.invoke("How quickly must the pump alarm?")

The query is embedded with the offline MiniLM embedder (or `embedder`, any callable texts -> vectors);
`search_kwargs` are hybrid_retrieve's parameters (fusion, filter, corpus_ids, graph_expand, ...).
Documents carry chunk_id, document_id, the fused score and each branch's rank in metadata.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from ..types import ChunkRef
from . import ref_metadata


def to_document(ref: ChunkRef) -> Document:
    return Document(page_content=ref.content or "", metadata=ref_metadata(ref), id=ref.chunk_id)


class PyhybridRetriever(BaseRetriever):
    """Hybrid retrieval (dense + BM25 + graph, fused, under row-level security) for one tenant."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    dsn: str
    """The database (a tenant login role or an app role)."""
    tenant_id: str
    acl_labels: list[str] | None = None
    k: int = 4
    """Documents returned (top_k); invoke(query, k=N) overrides it for one call."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Other hybrid_retrieve parameters, by their SQL names."""
    embedder: Any = None
    """texts -> vectors, or an embedder spec ("minilm", "st:PATH", "openai:URL;model=M", "MODULE:CALLABLE"); default:
    the offline MiniLM embedder. A corpus in scope that records another embedder refuses the query, naming both."""

    _client: Any = PrivateAttr(default=None)

    def _embed(self, query: str) -> Any:
        from ..embedders import query_vector

        if self.embedder is None:
            from ..embed import default_embedder

            self.embedder = default_embedder()
        return query_vector(self.embedder, query)

    def _kwargs(self, query: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        args = {**self.search_kwargs, **kwargs}
        top_k = args.pop("k", self.k)
        args.setdefault("top_k", top_k)
        args.setdefault("query_text", query)
        if query.strip() and args.get("vector_weight", 1.0) > 0:
            args.setdefault("query_embedding", self._embed(query))
        return args

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        from ..client import HybridClient

        if self._client is None:
            self._client = HybridClient(self.dsn)
        with self._client.tenant(self.tenant_id, self.acl_labels) as t:
            args = self._kwargs(query, kwargs)
            if self.embedder is not None and "query_embedding" not in kwargs and "query_embedding" in args:
                t.check_embedder(self.embedder, args.get("corpus_ids"))
            refs = t.retrieve(**args)
        return [to_document(r) for r in refs]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        from ..aio import AsyncHybridClient

        async with AsyncHybridClient(self.dsn) as client:
            async with client.tenant(self.tenant_id, self.acl_labels) as t:
                args = self._kwargs(query, kwargs)
                if self.embedder is not None and "query_embedding" not in kwargs and "query_embedding" in args:
                    await t.check_embedder(self.embedder, args.get("corpus_ids"))
                refs = await t.retrieve(**args)
        return [to_document(r) for r in refs]
