"""Ingesting records (dicts such as JSONL lines) in document-aligned batches, embedding what lacks a vector."""

from __future__ import annotations

import sys
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
    outside the writing transaction.
    """
    from ._base import IngestPlan
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
        for batch in _batches(records, batch_size):
            if acl_labels:
                for r in batch:
                    r.setdefault("acl_labels", list(acl_labels))
            size = len(batch)
            if dry_run:
                with client.tenant(tenant) as t:
                    same = t.unchanged_documents(batch, corpus_id=corpus)
                kept = [r for r in batch if r.get("document_id") not in same]
                totals["unchanged"] += size - len(kept)
                totals["would_write"] += len(kept)
                bar.update(size)
                continue
            plan = IngestPlan(batch, embed, allow_missing=False)
            if skip_unchanged and (check := plan.to_check()):
                with client.tenant(tenant) as t:
                    plan.skip(t.unchanged_documents(check, corpus_id=corpus))
            if texts := plan.to_embed():
                assert plan.embed is not None
                plan.fill(plan.embed(texts))
                totals["embedded"] += len(texts)
            if plan.items:
                with client.tenant(tenant) as t:
                    res = t.ingest(plan.items, corpus_id=corpus)
                for key in ("inserted", "updated", "unchanged", "superseded"):
                    totals[key] += getattr(res, key)
            totals["unchanged"] += plan.skipped
            bar.update(size)
    return totals
