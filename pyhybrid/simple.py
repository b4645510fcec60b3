"""A one-line entry point: retrieve((embedding, text), limit=10) -> list of plain dicts."""

from __future__ import annotations

import os
from typing import Any, Sequence

from .errors import InvalidParameterError


def retrieve(
    query: str | tuple[Any, str | None] | Sequence[float],
    limit: int = 10,
    *,
    tenant: str | None = None,
    dsn: str | None = None,
    corpus_ids: Sequence[str] | None = None,
    acl_labels: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Hybrid retrieval in one call, returning [{id, content, score, metadata}].

    query: (embedding, text), a text (embedded with the bundled MiniLM), or an embedding.
    tenant: the tenant to act for (default $PYHYBRID_TENANT). dsn: as pyhybrid.connect.
    """
    tenant = tenant or os.environ.get("PYHYBRID_TENANT")
    if not tenant:
        raise InvalidParameterError("tenant must be given (or set PYHYBRID_TENANT)")
    if isinstance(query, str):
        from .embed import default_embedder

        vector: Any = default_embedder().embed_query(query)
        text: str | None = query
    elif isinstance(query, tuple) and len(query) == 2:
        vector = query[0]
        text = query[1] if isinstance(query[1], str) or query[1] is None else str(query[1])
    else:
        vector, text = query, None
    from .client import connect

    with connect(dsn) as client, client.tenant(tenant, acl_labels) as t:
        refs = t.retrieve(query_embedding=vector, query_text=text, corpus_ids=corpus_ids, top_k=limit)
    return [{"id": r.chunk_id, "content": r.content, "score": r.score, "metadata": dict(r.metadata)} for r in refs]
