"""Ingesting records (dicts such as JSONL lines) in document-aligned batches, embedding what lacks a vector."""

from __future__ import annotations

import sys
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from queue import Queue
from typing import Any, Iterator, Sequence


def _progress(total: int | None, desc: str, quiet: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="chunk", disable=quiet, file=sys.stderr)


def _batches(records: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """Batches of about size records, never splitting a document (re-ingest supersedes per call)."""
    batch: list[dict[str, Any]] = []
    for rec in records:
        if len(batch) >= size and rec.get("document_id") != batch[-1].get("document_id"):
            yield batch
            batch = []
        batch.append(rec)
    if batch:
        yield batch


MAX_WRITERS = 16


def ingest_records(dsn: str, tenant: str, corpus: str, records: Iterator[dict[str, Any]], *, batch_size: int = 1000,
                   acl_labels: Sequence[str] = (), quiet: bool = False, total: int | None = None,
                   skip_unchanged: bool = True, dry_run: bool = False, embedder: Any = None,
                   writers: int = 1) -> dict[str, int]:
    """Embed records lacking an embedding and ingest them in document-aligned batches.

    skip_unchanged: first ask the server which documents it already stores exactly so
    (hybrid.unchanged_documents) and neither embed nor send them (counted as unchanged). dry_run: do
    that, embed and write nothing, and count the chunks that would be written (would_write). embedder:
    a texts -> vectors callable or a spec (pyhybrid.embedders; default: the bundled MiniLM, loaded when first
    needed), checked against the corpus's record before the first batch is embedded and recorded with each batch
    it embeds (TenantSession.use_embedder). Each batch is
    checked, embedded and written as TenantSession.ingest(embedder=...) does, with the embedding
    outside the writing transaction. A batch is written (one transaction, on a second connection) while
    the next one is embedded; the rows are those of writing the batches one after the other, and an error
    stops at its batch: the batches before it are written, it and those after it are not.

    writers: how many batches are written at once, each on a connection of its own (1 to 16; for
    pre-embedded loads on a server with cores to spare). A batch that shares a document or chunk id with
    one being written waits for it, so the rows are still those of the batches one after the other; an
    error stops at its batch, but up to writers - 1 batches sent beside it may be written too (running
    the same ingest again writes only what is missing).
    """
    from .client import HybridClient
    from .errors import InvalidParameterError

    if isinstance(writers, bool) or not isinstance(writers, int) or not 1 <= writers <= MAX_WRITERS:
        raise InvalidParameterError(f"writers must be an integer from 1 to {MAX_WRITERS}, got {writers!r}")
    totals = {"inserted": 0, "updated": 0, "unchanged": 0, "superseded": 0, "embedded": 0}
    if dry_run:
        totals = {"would_write": 0, "unchanged": 0}
    with HybridClient(dsn) as client, _progress(total, f"ingest {tenant}/{corpus}", quiet) as bar:
        embed = _Embedding(embedder, client, tenant, corpus)
        if dry_run:
            for batch in _batches(records, batch_size):
                with client.tenant(tenant) as t:
                    same = t.unchanged_documents(batch, corpus_id=corpus)
                kept = [r for r in batch if r.get("document_id") not in same]
                totals["unchanged"] += len(batch) - len(kept)
                totals["would_write"] += len(kept)
                bar.update(len(batch))
            return totals
        with ExitStack() as stack:
            idle: Queue[Any] = Queue()
            for _ in range(writers):
                idle.put(stack.enter_context(HybridClient(dsn)))
            pool = stack.enter_context(ThreadPoolExecutor(writers, thread_name_prefix="pyhybrid-ingest"))
            _pipeline(client, idle, writers, pool, tenant, corpus, _batches(records, batch_size), acl_labels,
                      skip_unchanged, embed, totals, bar)
    return totals


class _Embedding:
    """The embedder of an ingest: loaded when a batch first needs it and recorded then for the corpus (refused with
    an error naming both, before anything is embedded, where the corpus records another); identity is the record."""

    def __init__(self, embedder: Any, client: Any, tenant: str, corpus: str) -> None:
        self._given, self._client, self._tenant, self._corpus = embedder, client, tenant, corpus
        self._embedder: Any = None
        self._dim: int | None = None
        self.identity: dict[str, Any] | None = None

    def __call__(self, texts: Sequence[str]) -> Any:
        from .embedders import embedder_identity

        if self._embedder is None:
            from .embed import as_embedder, default_embedder

            with self._client.tenant(self._tenant) as t:
                self._dim = t.embedding_dim()
                self._embedder = default_embedder() if self._given is None else as_embedder(self._given)
                # recorded now, in a transaction of its own, so that the batches' writers only read the record and
                # go on side by side (a corpus that holds no chunk takes another embedder later)
                t.use_embedder(self._corpus, embedder_identity(self._embedder, self._dim))
        vectors = self._embedder(texts)
        self.identity = embedder_identity(self._embedder, self._dim)
        return vectors


def _pipeline(client: Any, idle: Queue[Any], writers: int, pool: ThreadPoolExecutor, tenant: str, corpus: str,
              batches: Iterator[list[dict[str, Any]]], acl_labels: Sequence[str], skip_unchanged: bool,
              embed: Any, totals: dict[str, int], bar: Any) -> None:
    """Check and embed batch k+1 here while pool writes up to writers batches, each on a client from idle."""
    from ._base import IngestPlan

    def write(items: list[Any], identity: dict[str, Any] | None) -> Any:
        writer_client = idle.get()
        try:
            with writer_client.tenant(tenant) as t:
                if identity is not None:  # in the batch's transaction: the record and the vectors land together
                    t.use_embedder(corpus, identity)
                return t.ingest(items, corpus_id=corpus)
        finally:
            idle.put(writer_client)

    pending: deque[tuple[Future[Any], int, set[Any]]] = deque()  # in the order sent
    batch_failed = [False]

    def collect() -> None:  # the oldest batch in flight: its counts, or its error
        future, size, _ = pending.popleft()
        try:
            res = future.result()
        except BaseException:
            batch_failed[0] = True
            raise
        for key in ("inserted", "updated", "unchanged", "superseded"):
            totals[key] += getattr(res, key)
        bar.update(size)

    try:
        for batch in batches:
            if acl_labels:
                for r in batch:
                    r.setdefault("acl_labels", list(acl_labels))
            keys = {("d", r.get("document_id")) for r in batch} | {("c", r.get("chunk_id")) for r in batch}
            # a document (or chunk id) met again is checked after its earlier chunks are written, as serially
            while any(p[2] & keys for p in pending) or (pending and pending[0][0].done()):
                collect()
            plan = IngestPlan(batch, embed, allow_missing=False)
            if skip_unchanged and (check := plan.to_check()):
                with client.tenant(tenant) as t:
                    plan.skip(t.unchanged_documents(check, corpus_id=corpus))
            identity = None
            if texts := plan.to_embed():
                assert plan.embed is not None
                plan.fill(plan.embed(texts))
                totals["embedded"] += len(texts)
                identity = embed.identity
            while len(pending) >= writers:  # writers 1: batch k is written before batch k+1 is sent
                collect()
            totals["unchanged"] += plan.skipped
            if plan.items:
                pending.append((pool.submit(write, plan.items, identity), len(batch), keys))
            else:
                bar.update(len(batch))
        while pending:
            collect()
    except BaseException:
        # the batches being written were complete: let them finish. The error raised is the oldest
        # batch's: the one that failed here, else (the failure was here, checking or embedding) the
        # first error of the batches sent before it
        from_batch, first = batch_failed[0], None
        while pending:
            try:
                collect()
            except BaseException as e:  # noqa: BLE001 - re-raised below
                first = first or e
        if first is not None and not from_batch:
            raise first
        raise
