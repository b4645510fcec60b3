"""PyhybridRetriever: hybrid_retrieve as a LlamaIndex retriever (llama-index-core BaseRetriever).

    from pyhybrid.integrations.llamaindex import PyhybridRetriever
    retriever = PyhybridRetriever(dsn=DSN, tenant_id="acme", top_k=4)
    nodes = retriever.retrieve("How quickly must the pump alarm?")

Returns NodeWithScore(TextNode) with the fused score; chunk_id, document_id and each branch's rank are
in the node's metadata. The query is embedded with the offline MiniLM embedder (or `embedder`). It never
reads or sets LlamaIndex's global Settings (whose defaults call a hosted service).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ..types import ChunkRef
from . import ref_metadata


def to_node(ref: ChunkRef) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=ref.chunk_id, text=ref.content or "", metadata=ref_metadata(ref)),
                         score=ref.score)


class PyhybridRetriever(BaseRetriever):
    """Hybrid retrieval (dense + BM25 + graph, fused, under row-level security) for one tenant."""

    def __init__(self, dsn: str, tenant_id: str, *, top_k: int = 4, acl_labels: Sequence[str] | None = None,
                 search_kwargs: Mapping[str, Any] | None = None, embedder: Any = None, **kwargs: Any) -> None:
        self.dsn = dsn
        self.tenant_id = tenant_id
        self.top_k = top_k
        self.acl_labels = list(acl_labels) if acl_labels is not None else None
        self.search_kwargs = dict(search_kwargs or {})
        self.embedder = embedder
        self._client: Any = None
        super().__init__(**kwargs)

    def _args(self, query: QueryBundle) -> dict[str, Any]:
        args = {"top_k": self.top_k, **self.search_kwargs}
        text = query.query_str
        args.setdefault("query_text", text)
        if query.embedding is not None:
            args.setdefault("query_embedding", query.embedding)
        elif text.strip() and args.get("vector_weight", 1.0) > 0:
            from ..embedders import query_vector

            if self.embedder is None:
                from ..embed import default_embedder

                self.embedder = default_embedder()
            args.setdefault("query_embedding", query_vector(self.embedder, text))
        return args

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        from ..client import HybridClient

        if self._client is None:
            self._client = HybridClient(self.dsn)
        with self._client.tenant(self.tenant_id, self.acl_labels) as t:
            args = self._args(query_bundle)
            if query_bundle.embedding is None and "query_embedding" in args and self.embedder is not None:
                t.check_embedder(self.embedder, args.get("corpus_ids"))
            refs = t.retrieve(**args)
        return [to_node(r) for r in refs]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        from ..aio import AsyncHybridClient

        async with AsyncHybridClient(self.dsn) as client:
            async with client.tenant(self.tenant_id, self.acl_labels) as t:
                args = self._args(query_bundle)
                if query_bundle.embedding is None and "query_embedding" in args and self.embedder is not None:
                    await t.check_embedder(self.embedder, args.get("corpus_ids"))
                refs = await t.retrieve(**args)
        return [to_node(r) for r in refs]
