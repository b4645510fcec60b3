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
                   acl_labels: Sequence[str] = (), quiet: bool = False, total: int | None = None) -> dict[str, int]:
    """Embed records lacking an embedding and ingest them in document-aligned batches."""
    from .client import HybridClient

    totals = {"inserted": 0, "updated": 0, "unchanged": 0, "superseded": 0}
    embedder = None
    with HybridClient(dsn) as client, _progress(total, f"ingest {tenant}/{corpus}", quiet) as bar:
        for batch in _batches(records, batch_size):
            missing = [r for r in batch if r.get("embedding") is None]
            if missing:
                if embedder is None:
                    from .embed import default_embedder

                    embedder = default_embedder()
                vectors = embedder([r["content"] for r in missing])
                for r, v in zip(missing, vectors):
                    r["embedding"] = v
            if acl_labels:
                for r in batch:
                    r.setdefault("acl_labels", list(acl_labels))
            with client.tenant(tenant) as t:
                res = t.ingest(batch, corpus_id=corpus)
            for key in totals:
                totals[key] += getattr(res, key)
            bar.update(len(batch))
    return totals
