"""pyhybrid as a retriever of the RAG frameworks: LangChain (pyhybrid.integrations.langchain) and
LlamaIndex (pyhybrid.integrations.llamaindex). Each is an optional extra:
pip install "pyhybrid[langchain]" / "pyhybrid[llamaindex]"."""

from __future__ import annotations

from typing import Any

from ..types import ChunkRef


def ref_metadata(ref: ChunkRef) -> dict[str, Any]:
    """What a framework document carries besides its text: ids, the fused score, and each branch's rank and own
    measure (ranks, scores: by branch name; vector_rank, keyword_rank, graph_rank as in 0.3)."""
    return {
        **dict(ref.metadata),
        "chunk_id": ref.chunk_id, "document_id": ref.document_id, "corpus_id": ref.corpus_id,
        "tenant_id": ref.tenant_id, "position": ref.position, "score": ref.score,
        "vector_rank": ref.vector_rank, "keyword_rank": ref.keyword_rank, "graph_rank": ref.graph_rank,
        "ranks": dict(ref.ranks), "scores": dict(ref.scores),
    }
