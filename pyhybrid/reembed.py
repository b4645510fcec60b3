"""Re-embedding a corpus in place with another embedder: batch by batch, resumably, while readers keep querying."""

from __future__ import annotations

import json
from typing import Any, Callable

BEGIN_SQL = "SELECT hybrid.begin_reembed(%s, %s::jsonb) AS after"
BATCH_SQL = "SELECT chunk_id, content, content_hash FROM hybrid.reembed_batch(%s, %s)"
WRITE_SQL = "SELECT hybrid.reembed_chunks(%s, %s::text[], %s::text[], %s::text[]) AS written"
FINISH_SQL = "SELECT hybrid.finish_reembed(%s) AS embedder"


def reembed(dsn: str, tenant: str, corpus: str, embedder: Any, *, batch_size: int = 256,
            progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Re-embed the live chunks of corpus with embedder (a callable or a spec: pyhybrid.embedders), in place.

    Each batch is read, embedded outside any transaction, then written in a transaction of its own
    (hybrid.reembed_chunks), so readers never wait and see each batch whole or not at all; until the last batch the
    corpus answers queries of either embedder (the dense branch mixes the two models' vectors meanwhile) and takes
    writes only of the new one. Stopped anywhere, the same call resumes after the last batch written. At the end the
    corpus records the new embedder (hybrid.finish_reembed). progress(n) is called with each batch's size.

    Returns {"chunks": chunks embedded, "written": chunks written (a chunk re-ingested meanwhile keeps its writer's
    vectors), "resumed_after": the chunk id it resumed after (None from the start), "embedder": the record}.
    """
    from . import _base
    from .client import HybridClient
    from .embed import as_embedder, vector_literal
    from .embedders import embedder_identity
    from .errors import InvalidParameterError

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 10000:
        raise InvalidParameterError(f"batch_size must be an integer from 1 to 10000, got {batch_size!r}")
    _base.check_name("corpus_id", corpus)
    e = as_embedder(embedder)
    totals: dict[str, Any] = {"chunks": 0, "written": 0}
    with HybridClient(dsn) as client, _base.translate_errors():
        with client.tenant(tenant) as t:
            dim = t.embedding_dim()
            row = t.conn.execute(BEGIN_SQL, (corpus, json.dumps(embedder_identity(e, dim)))).fetchone()
        totals["resumed_after"] = row["after"] if row else None
        while True:
            with client.tenant(tenant) as t:
                rows = t.conn.execute(BATCH_SQL, (corpus, batch_size)).fetchall()
            if not rows:
                break
            vectors = e([r["content"] for r in rows])
            with client.tenant(tenant) as t:
                written = t.conn.execute(WRITE_SQL, (corpus, [r["chunk_id"] for r in rows],
                                                     [r["content_hash"] for r in rows],
                                                     [vector_literal(v) for v in vectors])).fetchone()
            totals["chunks"] += len(rows)
            totals["written"] += int(written["written"]) if written else 0
            if progress is not None:
                progress(len(rows))
        with client.tenant(tenant) as t:
            done = t.conn.execute(FINISH_SQL, (corpus,)).fetchone()
    totals["embedder"] = done["embedder"] if done else None
    return totals
