"""Load: concurrent clients mixing retrieve, ingest, re-ingest, delete and add_edges over several tenants.

Each client owns its documents, so the final state is known exactly: at the end every tenant holds the
live chunks its clients last wrote, no more, no less. The only errors allowed are the retryable ones
(pyhybrid.ConflictError: deadlock, serialization failure, lock timeout), which this harness retries and
counts; pyhybrid's clients do not retry by themselves (a retry belongs to the caller's transaction).

    python bench/load.py --clients 16 --seconds 60 --out bench/results/load.json

runs on an embedded server of its own (loopback only, bounded in time and count) and writes throughput
and p50/p99 per operation. tests/test_load.py runs a short variant of the same code.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import conninfo

from _common import start_meta, write_result
from pyhybrid import Chunk, ConflictError, HybridClient, migrate
from pyhybrid.server import start_embedded, stop_embedded

DIM = 384
OPS = (("retrieve", 0.55), ("ingest", 0.15), ("reingest", 0.12), ("delete", 0.10), ("add_edges", 0.08))


def _unit(rng: np.random.Generator) -> np.ndarray[Any, Any]:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@dataclass
class Client:
    """One load client: its tenant, its documents (document id -> live chunk ids) and its timings."""

    index: int
    tenant: str
    rng: random.Random
    docs: dict[str, list[str]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    serial: int = 0

    def chunks(self, doc: str, n: int) -> list[Chunk]:
        self.serial += 1
        vrng = np.random.default_rng(self.index * 1_000_003 + self.serial)
        words = ["pump", "valve", "alarm", "sensor", "battery", "occlusion", "flow", "label", "audit", "risk"]
        return [Chunk(chunk_id=f"{doc}#{i}", document_id=doc, position=i, embedding=_unit(vrng),
                      content=" ".join(self.rng.choice(words) for _ in range(12)) + f" v{self.serial}")
                for i in range(n)]


def _one(client: Client, hc: HybridClient, op: str) -> None:
    with hc.tenant(client.tenant) as t:
        if op == "retrieve" or (op in ("reingest", "delete", "add_edges") and not client.docs):
            q = _unit(np.random.default_rng(client.rng.randrange(1 << 30)))
            t.retrieve(query_embedding=q, query_text=client.rng.choice(["pump alarm", "valve flow", "audit risk"]),
                       top_k=10)
        elif op == "ingest":
            doc = f"c{client.index}-d{client.serial}"
            batch = client.chunks(doc, client.rng.randint(1, 6))
            t.ingest(batch, corpus_id="load")
            client.docs[doc] = [c.chunk_id for c in batch]
        elif op == "reingest":
            doc = client.rng.choice(sorted(client.docs))
            batch = client.chunks(doc, client.rng.randint(1, 6))
            t.ingest(batch, corpus_id="load")
            client.docs[doc] = [c.chunk_id for c in batch]
        elif op == "delete":
            doc = client.rng.choice(sorted(client.docs))
            t.delete_document(doc)
            del client.docs[doc]
        else:
            doc = client.rng.choice(sorted(client.docs))
            ids = client.docs[doc]
            t.add_edges([{"src": ids[0], "dst": f"{client.tenant}:entity:{client.rng.randrange(20)}",
                          "rel": "MENTIONS"}])


def _run_client(client: Client, dsn: str, stop_at: float, max_ops: int) -> None:
    with HybridClient(dsn) as hc:
        for _ in range(max_ops):
            if time.monotonic() >= stop_at:
                return
            op = client.rng.choices([o for o, _ in OPS], [w for _, w in OPS])[0]
            for attempt in range(5):
                t0 = time.perf_counter()
                try:
                    _one(client, hc, op)
                except ConflictError:
                    client.retries += 1
                    continue
                except Exception as exc:  # noqa: BLE001 - every other error is a finding
                    client.errors.append(f"{op}: {type(exc).__name__}: {exc}")
                    return
                client.latencies.setdefault(op, []).append((time.perf_counter() - t0) * 1000)
                break
            else:
                client.errors.append(f"{op}: still conflicting after 5 attempts")
                return


def run_load(admin_dsn: str, app_dsn: str, *, clients: int, seconds: float, tenants: int = 4, seed: int = 7,
             max_ops: int = 100_000) -> dict[str, Any]:
    """Run the load on a migrated database; returns the report (errors, retries, counts, latencies)."""
    names = [f"load{t}" for t in range(tenants)]
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        for name in names:
            c.execute("SELECT hybrid.create_tenant(%s)", (name,))
        c.execute("SELECT hybrid.register_edge_type('MENTIONS')")
    pool = [Client(i, names[i % tenants], random.Random(seed * 7919 + i)) for i in range(clients)]
    stop_at = time.monotonic() + seconds
    threads = [threading.Thread(target=_run_client, args=(cl, app_dsn, stop_at, max_ops)) for cl in pool]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=seconds + 120)
    elapsed = time.monotonic() - t0
    expected = {name: sum(len(ids) for cl in pool if cl.tenant == name for ids in cl.docs.values())
                for name in names}
    with psycopg.connect(admin_dsn) as c:  # a superuser sees every tenant's rows
        actual = dict(c.execute("SELECT tenant_id, count(*) FILTER (WHERE NOT superseded) FROM hybrid.chunk "
                                "WHERE corpus_id = 'load' GROUP BY 1").fetchall())
        expected_ids = {cid for cl in pool for ids in cl.docs.values() for cid in ids}
        live_ids = {r[0] for r in c.execute("SELECT chunk_id FROM hybrid.chunk WHERE corpus_id = 'load' "
                                            "AND NOT superseded").fetchall()}
    merged: dict[str, list[float]] = {}
    for cl in pool:
        for op, values in cl.latencies.items():
            merged.setdefault(op, []).extend(values)
    ops = sum(len(v) for v in merged.values())
    return {
        "clients": clients, "seconds": round(elapsed, 2), "tenants": tenants,
        "operations": ops, "throughput_ops_per_s": round(ops / elapsed, 1) if elapsed else 0.0,
        "retries": sum(cl.retries for cl in pool),
        "errors": [e for cl in pool for e in cl.errors],
        "expected_live_chunks": {k: v for k, v in expected.items()},
        "actual_live_chunks": {k: int(actual.get(k, 0)) for k in names},
        "missing_chunks": len(expected_ids - live_ids), "unexpected_chunks": len(live_ids - expected_ids),
        "latency_ms": {op: {"n": len(v), "p50": round(statistics.median(v), 2),
                            "p99": round(float(np.percentile(v, 99)), 2)} for op, v in sorted(merged.items())},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("bench/results/load.json"))
    args = ap.parse_args()
    meta = start_meta("load")
    data_dir = Path(tempfile.mkdtemp(prefix="pyhybrid-load-")) / "pgdata"
    root = start_embedded(data_dir)
    try:
        with psycopg.connect(root, autocommit=True) as c:
            c.execute("CREATE ROLE load_app LOGIN PASSWORD 'load_app'")
        migrate.upgrade(root)
        with psycopg.connect(root, autocommit=True) as c:
            c.execute("SELECT hybrid.grant_app('load_app')")
        report = run_load(root, conninfo.make_conninfo(root, user="load_app", password="load_app"),
                          clients=args.clients, seconds=args.seconds, tenants=args.tenants)
    finally:
        stop_embedded(data_dir)
    write_result(args.out, meta, report)
    print(json.dumps(report, indent=2))
    ok = not report["errors"] and report["expected_live_chunks"] == report["actual_live_chunks"] \
        and report["missing_chunks"] == 0 and report["unexpected_chunks"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
