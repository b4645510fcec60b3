"""Logic shared by the sync and async clients: error translation, tenant scope, retrieve arguments, row mapping."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from contextlib import contextmanager
from queue import Empty, Queue
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import psycopg

from . import _sql
from .errors import InvalidParameterError, SchemaError, from_psycopg
from .query import RetrieveQuery, check_text
from .types import Chunk, ChunkRef, IngestResult

SOURCE_FAILED = "hybrid_retrieve.source_failed"
LEXICAL_FALLBACK = "hybrid.search_lexical: the BM25 index is stale"
ABSTAINED = "hybrid_retrieve.abstained"


class SourceFailedWarning(UserWarning):
    """One retrieval source failed and the others were fused (from the server's WARNING)."""


class LexicalFallbackWarning(UserWarning):
    """The lexical branch ranked by ts_rank because BM25 could not be trusted (a stale index that could
    not be rebuilt in a read-only transaction, or a hot standby). Servers before 0.4 only: since 0.4 the exact SQL
    scorer answers BM25 there, from the tenant's statistics."""


class AbstainedWarning(UserWarning):
    """retrieve(abstain=True) returned no rows because nothing was relevant: the dense branch's ten best hits
    scored below the tenant's calibrated floor on average, the best of them below 1.5 times it, and none of the three
    best lexical hits held every query term (the server's NOTICE)."""


def notice_handler(diag: psycopg.errors.Diagnostic) -> None:
    """Turn the server's source_failed, lexical fallback and abstention notices into Python warnings."""
    msg = diag.message_primary or ""
    if msg.startswith(ABSTAINED):
        warnings.warn(msg, AbstainedWarning, stacklevel=2)
    elif msg.startswith(SOURCE_FAILED):
        warnings.warn(msg, SourceFailedWarning, stacklevel=2)
    elif msg.startswith(LEXICAL_FALLBACK):
        warnings.warn(msg, LexicalFallbackWarning, stacklevel=2)


def check_quantile(quantile: float | None) -> float | None:
    """calibrate_abstention's quantile, checked as hybrid.calibrate_abstention checks it (None: the neighbour floor)."""
    if quantile is None:
        return None
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 < quantile < 1:
        raise InvalidParameterError(f"quantile must be a number between 0 and 1 (both excluded), or None for the "
                                    f"neighbour floor, got {quantile!r}")
    return float(quantile)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise psycopg errors as the pyhybrid exception for their SQLSTATE, chained."""
    try:
        yield
    except psycopg.Error as exc:
        raise from_psycopg(exc) from exc


def tenant_params(tenant_id: str, acl_labels: Sequence[str] | None) -> tuple[str, str]:
    """Validate a tenant scope; return the two settings' values."""
    if not isinstance(tenant_id, str) or not tenant_id.strip():
        raise InvalidParameterError(f"tenant_id must be a non-empty string, got {tenant_id!r}")
    labels = list(acl_labels or [])
    for label in labels:
        if not isinstance(label, str) or not label.strip() or "," in label:
            raise InvalidParameterError(f"acl_labels entries must be non-empty strings without commas, got {label!r}")
    return tenant_id, ",".join(labels)


def retrieve_query(query: Any, kwargs: dict[str, Any]) -> RetrieveQuery:
    """The RetrieveQuery of a retrieve() call: a RetrieveQuery (changed by kwargs), an embedding
    given positionally, or keywords alone."""
    if isinstance(query, RetrieveQuery):
        return query.replace(**kwargs) if kwargs else query
    if query is not None:
        if "query_embedding" in kwargs or "vector" in kwargs:
            raise InvalidParameterError("query_embedding given twice (positionally and by name)")
        kwargs = {**kwargs, "query_embedding": query}
    return RetrieveQuery.build(**kwargs)


def rerank_plan(q: RetrieveQuery, rerank: Any, rerank_depth: int) -> tuple[RetrieveQuery, Any]:
    """The call to send for a retrieve with rerank (the best max(rerank_depth, skip + top_k) fused rows from
    the first), and the reranker; without rerank, the query itself."""
    if rerank is None:
        return q, None
    from . import rerank as rr

    reranker = rr.resolve(rerank)
    depth = max(rr.check_depth(rerank_depth), q.skip + q.top_k)
    if q.query_text is None or not q.query_text.strip():
        raise InvalidParameterError("rerank needs query_text: the reranker compares it with each row's content")
    if depth > 1000:
        raise InvalidParameterError(f"rerank: skip + top_k must be at most 1000, got {q.skip + q.top_k}")
    psk = q.per_source_k if q.per_source_k is None or q.per_source_k >= depth else depth
    return q.replace(top_k=depth, skip=0, per_source_k=psk), reranker


def rerank_apply(q: RetrieveQuery, refs: list[ChunkRef], reranker: Any) -> list[ChunkRef]:
    """refs as returned, or re-ordered by the reranker and cut to q's skip and top_k."""
    if reranker is None:
        return refs
    from . import rerank as rr

    assert q.query_text is not None
    return rr.apply(refs, q.query_text, reranker, q.skip, q.top_k)


def register_vector_type(conn: psycopg.Connection[Any]) -> None:
    """Register pgvector's adapters on a connection (the vector type must exist: run pyhybrid migrate)."""
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except psycopg.ProgrammingError as exc:
        raise SchemaError(f"{exc} (is the hybrid schema installed? run: pyhybrid migrate)") from exc


async def register_vector_type_async(conn: psycopg.AsyncConnection[Any]) -> None:
    """register_vector_type for an async connection."""
    from pgvector.psycopg import register_vector_async

    try:
        await register_vector_async(conn)
    except psycopg.ProgrammingError as exc:
        raise SchemaError(f"{exc} (is the hybrid schema installed? run: pyhybrid migrate)") from exc


def unchanged_payload(chunks: Iterable[Mapping[str, Any]]) -> str:
    """The JSON hybrid.unchanged_documents reads: the fields the content hash covers."""
    import json

    keys = ("chunk_id", "document_id", "position", "content", "acl_labels", "metadata")
    return json.dumps([{k: c.get(k) for k in keys} for c in chunks], ensure_ascii=False)


_RECORD_KEYS = ("chunk_id", "document_id", "position", "content", "acl_labels", "metadata")


def _get(chunk: Chunk | Mapping[str, Any], key: str) -> Any:
    return getattr(chunk, key, None) if isinstance(chunk, Chunk) else chunk.get(key)


class IngestPlan:
    """What ingest(chunks, embedder=...) does before its COPY, for the sync and async sessions alike:
    documents stored exactly so are skipped, then the chunks that arrive without an embedding are embedded."""

    def __init__(self, chunks: Iterable[Chunk | Mapping[str, Any]], embedder: Any, allow_missing: bool) -> None:
        self.items: list[Chunk | Mapping[str, Any]] = list(chunks)
        self.skipped = 0
        self._todo: list[int] = []
        self.embed: Callable[[Sequence[str]], Any] | None = None
        if embedder is not None:
            from .embed import as_embedder

            self.embed = as_embedder(embedder)
        missing = self._missing()
        if missing and self.embed is None and not allow_missing:
            warnings.warn(
                f"ingest: {len(missing)} chunk(s) have no embedding (the first: chunk_id "
                f"{_get(self.items[missing[0]], 'chunk_id')!r}), so dense search never finds them; storing chunks "
                "without embeddings is deprecated and will be refused in the next release: pass embedder= "
                "(e.g. pyhybrid.embed.default_embedder()), or allow_missing_embeddings=True for lexical- and "
                "graph-only chunks", DeprecationWarning, stacklevel=3)

    def _missing(self) -> list[int]:
        return [i for i, c in enumerate(self.items) if isinstance(c, (Chunk, Mapping)) and _get(c, "embedding") is None]

    def to_check(self) -> list[dict[str, Any]]:
        """The chunks of every document that has a chunk to embed (for unchanged_documents); [] without an embedder."""
        if self.embed is None:
            return []
        docs = {_get(self.items[i], "document_id") for i in self._missing()}
        return [{k: _get(c, k) for k in _RECORD_KEYS} for c in self.items
                if isinstance(c, (Chunk, Mapping)) and _get(c, "document_id") in docs]

    def skip(self, unchanged: set[str]) -> None:
        """Leave out every chunk of the documents stored exactly so (counted as unchanged)."""
        if unchanged:
            kept = [c for c in self.items if not isinstance(c, (Chunk, Mapping)) or _get(c, "document_id") not in unchanged]
            self.skipped += len(self.items) - len(kept)
            self.items = kept

    def to_embed(self) -> list[str]:
        """The contents to embed (those of chunks without an embedding; [] without an embedder)."""
        if self.embed is None:
            return []
        self._todo = [i for i in self._missing() if isinstance(_get(self.items[i], "content"), str)]
        return [_get(self.items[i], "content") for i in self._todo]

    def fill(self, vectors: Any) -> None:
        """Give the chunks of to_embed() their vectors (copies: the caller's chunks are not changed)."""
        for i, v in zip(self._todo, vectors):
            c = self.items[i]
            self.items[i] = dataclasses.replace(c, embedding=v) if isinstance(c, Chunk) else {**c, "embedding": v}

    def identity(self, dim: int) -> dict[str, Any] | None:
        """The record the corpus keeps of the embedder that embeds these chunks (None: nothing to embed)."""
        if self.embed is None or not self._todo:
            return None
        from .embedders import embedder_identity

        return embedder_identity(self.embed, dim)

    def result(self, row: Mapping[str, Any] | None) -> IngestResult:
        """The IngestResult of finish_ingest's row (None: nothing was sent), skipped chunks counted as unchanged."""
        counts = {k: int(v) for k, v in (row or {"inserted": 0, "updated": 0, "unchanged": 0, "superseded": 0}).items()}
        counts["unchanged"] += self.skipped
        return IngestResult(**counts)


def resolve_embedder(embedder: Any) -> Any:
    """An embedder from what a caller gave (a spec string is loaded); InvalidParameterError for none."""
    if embedder is None:
        raise InvalidParameterError("embedder: none given, and the session has none (HybridClient(..., embedder=...))")
    from .embed import as_embedder

    return as_embedder(embedder)


def query_text_to_embed(q: RetrieveQuery, embedder: Any) -> str | None:
    """The text a session with an embedder embeds for a retrieve that gives query_text and no query_embedding while
    the dense branch has weight (None: nothing to embed)."""
    if embedder is None or q.query_embedding is not None or not (q.query_text or "").strip() or q.vector_weight <= 0:
        return None
    return q.query_text


def embedder_conflict(records: Iterable[Mapping[str, Any]], identity: Mapping[str, Any], writing: bool) -> str | None:
    """Why an embedder may not query (or, writing, fill) the corpora of records (hybrid.corpus_embedders rows), or None.

    A query may use a corpus's embedder or, while it is re-embedded, the one it moves to; a write only the latter.
    """
    from .embedders import same, shown

    for r in records:
        moving_to = (r.get("reembedding") or {}).get("embedder")
        ok = [moving_to] if writing and moving_to else [r.get("embedder"), moving_to]
        if any(same(dict(identity), e) for e in ok if e):
            continue
        what = "write" if writing else "query"
        was = (f"is being re-embedded with {shown(moving_to)}" if writing and moving_to
               else f"was embedded with {shown(r.get('embedder') or moving_to)}")
        return (f"corpus {r['corpus_id']!r} {was}; this {what} uses {shown(dict(identity))}: vectors of two "
                "models do not compare (use the corpus's embedder, or re-embed it: pyhybrid reembed)")
    return None


def rows_to_refs(rows: Iterable[Mapping[str, Any]]) -> list[ChunkRef]:
    """Map hybrid_retrieve rows to ChunkRef by column name."""
    return [ChunkRef.from_row(row) for row in rows]


def documents_args(corpus_id: str | None, prefix: str | None,
                   document_ids: Iterable[str] | None = None) -> tuple[str | None, str | None, list[str] | None]:
    """hybrid.documents' arguments, checked."""
    if corpus_id is not None:
        check_name("corpus_id", corpus_id)
    if prefix is not None:
        check_text("prefix", prefix)
    ids = None
    if document_ids is not None:
        if isinstance(document_ids, str):
            raise InvalidParameterError("document_ids must be a list of document ids, not one string")
        ids = list(document_ids)
        for i in ids:
            if not isinstance(i, str):
                raise InvalidParameterError(f"document_ids must hold strings, got {i!r}")
            check_text("document_ids", i)
    return corpus_id, prefix, ids


def prune_args(corpus_id: str, keep: Iterable[str], prefix: str, dry_run: bool) -> tuple[str, list[str], str, bool]:
    """hybrid.prune_documents' arguments, checked: keep must be document ids (strings), not one string."""
    check_name("corpus_id", corpus_id)
    if isinstance(keep, (str, bytes)):
        raise InvalidParameterError("keep must be a collection of document ids, got a single string")
    ids = list(keep)
    bad = next((k for k in ids if not isinstance(k, str)), None)
    if bad is not None:
        raise InvalidParameterError(f"keep must hold document ids (strings), got {bad!r}")
    if not isinstance(prefix, str):
        raise InvalidParameterError(f"prefix must be a string ('' for the whole corpus), got {prefix!r}")
    return corpus_id, ids, check_text("prefix", prefix) if prefix else prefix, check_flag("dry_run", dry_run)


def check_name(name: str, value: Any) -> str:
    """A required non-empty string argument."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(f"{name} must be a non-empty string, got {value!r}")
    return check_text(name, value)


def check_flag(name: str, value: Any) -> bool:
    """A required boolean argument (not 0 or 1: a typo would flip a mode)."""
    if not isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
    return value


PLACEMENTS = ("pool", "dedicated")


def check_placement(value: Any, optional: bool = False) -> str | None:
    """A tenant placement: pool or dedicated (None where optional: the install's setting)."""
    if value is None and optional:
        return None
    if value not in PLACEMENTS:
        raise InvalidParameterError(f"placement must be one of {', '.join(PLACEMENTS)}, got {value!r}")
    return str(value)


MAX_BUILD_WORKERS = 16


def check_workers(name: str, value: Any, most: int = MAX_BUILD_WORKERS) -> int:
    """A count of connections to work on at once: an integer from 1 to most."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidParameterError(f"{name} must be an integer from 1 to {most}, got {value!r}")
    return value


def build_partition_indexes(dsn: str, jobs: list[tuple[int, str]], workers: int) -> None:
    """Build the partition indexes of hybrid.bulk_index_jobs (jobs, largest first) on workers connections at once,
    each in a thread of its own; the first error stops the others taking new jobs and is raised (translated).
    An interrupt stops new jobs too, and waits for the builds running."""
    queue: Queue[tuple[int, str]] = Queue()
    for job in jobs:
        queue.put(job)
    failed: list[BaseException] = []

    def work() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as wconn:
                while not failed:
                    try:
                        job = queue.get_nowait()
                    except Empty:
                        return
                    wconn.execute(_sql.BUILD_JOB_NAME_SQL, (job[1], job[0]))
                    wconn.execute(_sql.BUILD_PARTITION_INDEX_SQL, job)
        except BaseException as exc:  # a failed connection or build: the others take no new job
            failed.append(exc)

    threads = [threading.Thread(target=work, name=f"pyhybrid-build-{i}") for i in range(min(workers, len(jobs)))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException as exc:  # an interrupt: no new job; the resume calls wait for the builds running
        failed.append(exc)
        for t in threads:
            t.join()
        raise
    if failed:
        with translate_errors():
            raise failed[0]
