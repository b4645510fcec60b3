"""Ingesting records (dicts such as JSONL lines) in document-aligned batches, embedding what lacks a vector."""

from __future__ import annotations

import sys
from concurrent.futures import Future, ThreadPoolExecutor
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


def ingest_records(dsn: str, tenant: str, corpus: str, records: Iterator[dict[str, Any]], *, batch_size: int = 1000,
                   acl_labels: Sequence[str] = (), quiet: bool = False, total: int | None = None,
                   skip_unchanged: bool = True, dry_run: bool = False, embedder: Any = None) -> dict[str, int]:
    """Embed records lacking an embedding and ingest them in document-aligned batches.

    skip_unchanged: first ask the server which documents it already stores exactly so
    (hybrid.unchanged_documents) and neither embed nor send them (counted as unchanged). dry_run: do
    that, embed and write nothing, and count the chunks that would be written (would_write). embedder:
    a texts -> vectors callable (default: the bundled MiniLM, loaded when first needed). Each batch is
    checked, embedded and written as TenantSession.ingest(embedder=...) does, with the embedding
    outside the writing transaction. A batch is written (one transaction, on a second connection) while
    the next one is embedded; the rows are those of writing the batches one after the other, and an error
    stops at its batch: the batches before it are written, it and those after it are not.
    """
    from .client import HybridClient

    totals = {"inserted": 0, "updated": 0, "unchanged": 0, "superseded": 0, "embedded": 0}
    if dry_run:
        totals = {"would_write": 0, "unchanged": 0}
    loaded: list[Any] = [embedder]

    def embed(texts: Sequence[str]) -> Any:
        if loaded[0] is None:
            from .embed import default_embedder

            loaded[0] = default_embedder()
        return loaded[0](texts)

    with HybridClient(dsn) as client, _progress(total, f"ingest {tenant}/{corpus}", quiet) as bar:
        if dry_run:
            for batch in _batches(records, batch_size):
                with client.tenant(tenant) as t:
                    same = t.unchanged_documents(batch, corpus_id=corpus)
                kept = [r for r in batch if r.get("document_id") not in same]
                totals["unchanged"] += len(batch) - len(kept)
                totals["would_write"] += len(kept)
                bar.update(len(batch))
            return totals
        with HybridClient(dsn) as writer_client, ThreadPoolExecutor(1, thread_name_prefix="pyhybrid-ingest") as pool:
            _pipeline(client, writer_client, pool, tenant, corpus, _batches(records, batch_size), acl_labels,
                      skip_unchanged, embed, totals, bar)
    return totals


def _pipeline(client: Any, writer_client: Any, pool: ThreadPoolExecutor, tenant: str, corpus: str,
              batches: Iterator[list[dict[str, Any]]], acl_labels: Sequence[str], skip_unchanged: bool,
              embed: Any, totals: dict[str, int], bar: Any) -> None:
    """Check and embed batch k+1 here while pool writes batch k on writer_client."""
    from ._base import IngestPlan

    def write(items: list[Any]) -> Any:
        with writer_client.tenant(tenant) as t:
            return t.ingest(items, corpus_id=corpus)

    pending: tuple[Future[Any], int, set[Any]] | None = None

    def collect() -> None:
        nonlocal pending
        if pending is not None:
            future, size, _ = pending
            pending = None
            res = future.result()
            for key in ("inserted", "updated", "unchanged", "superseded"):
                totals[key] += getattr(res, key)
            bar.update(size)

    try:
        for batch in batches:
            if acl_labels:
                for r in batch:
                    r.setdefault("acl_labels", list(acl_labels))
            docs = {r.get("document_id") for r in batch}
            if pending is not None and (pending[2] & docs or pending[0].done()):
                collect()  # a document met again is checked after its earlier chunks are written, as serially
            plan = IngestPlan(batch, embed, allow_missing=False)
            if skip_unchanged and (check := plan.to_check()):
                with client.tenant(tenant) as t:
                    plan.skip(t.unchanged_documents(check, corpus_id=corpus))
            if texts := plan.to_embed():
                assert plan.embed is not None
                plan.fill(plan.embed(texts))
                totals["embedded"] += len(texts)
            collect()  # batch k is written before batch k+1 is sent: one write at a time, in order
            totals["unchanged"] += plan.skipped
            if plan.items:
                pending = (pool.submit(write, plan.items), len(batch), docs)
            else:
                bar.update(len(batch))
        collect()
    except BaseException:
        if pending is not None:  # the batch being written was complete: let it finish, its error first
            future = pending[0]
            pending = None
            future.result()
        raise
