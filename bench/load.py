"""Load and faults: concurrent clients mixing every operation, or read throughput with hot standbys.

Mixed (the default): clients mixing retrieve, ingest, re-ingest, delete and add_edges over several tenants.
Each client owns its documents, so the final state is known exactly: at the end every tenant holds the
live chunks its clients last wrote, no more, no less. The only errors allowed are the retryable ones
(pyhybrid.ConflictError: deadlock, serialization failure, lock timeout), which this harness retries and
counts; pyhybrid's clients do not retry by themselves (a retry belongs to the caller's transaction).

    python bench/load.py --clients 16 --seconds 60 --out bench/results/load.json

Replicas (--replicas 0 1 2): a synthetic corpus on an embedded primary, standbys made by
pyhybrid.server.start_embedded_standby, and reader threads sending every retrieval through
HybridClient(primary, replicas=[...]) as read_only sessions. All servers share this machine's cores, so
this measures the routing and its overhead, not what separate machines would add.

    python bench/load.py --replicas 0 1 2 --chunks 20000 --readers 8 --seconds 20 --out bench/results/replicas.json

--restart (a fault, after the mixed load): a clean stop and start of the server, then every tenant's live
chunks are checked and its first retrieve timed (pg_textsearch 1.0.0 loses BM25 state on restart; the start
heals it). Each runs on an embedded server of its own (loopback only). tests/test_load.py runs a short mixed load.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
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
from pyhybrid.server import start_embedded, start_embedded_standby, stop_embedded

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


WORDS = ["pump", "valve", "alarm", "sensor", "battery", "occlusion", "flow", "label", "audit", "risk", "keypad",
         "pressure", "infusion", "brake", "controller", "latency", "protocol", "deviation", "requirement", "test"]


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray[Any, Any]:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def load_corpus(admin: str, app: str, chunks: int, tenants: int, seed: int) -> None:
    """--replicas: a synthetic corpus of chunks // tenants chunks a tenant."""
    rng = np.random.default_rng(seed)
    words = random.Random(seed)
    with psycopg.connect(admin, autocommit=True) as c:
        for t in range(tenants):
            c.execute("SELECT hybrid.create_tenant(%s)", (f"t{t}",))
    per = chunks // tenants
    with HybridClient(app) as client:
        for t in range(tenants):
            for start in range(0, per, 2000):
                n = min(2000, per - start)
                vecs = _vectors(rng, n)
                batch = [Chunk(chunk_id=f"t{t}-{start + i}", document_id=f"t{t}-d{(start + i) // 4}",
                               position=(start + i) % 4, embedding=vecs[i],
                               content=" ".join(words.choice(WORDS) for _ in range(40))) for i in range(n)]
                with client.tenant(f"t{t}") as s:
                    s.ingest(batch)


def readers(primary: str, replicas: list[str], n: int, seconds: float, tenants: int, seed: int) -> dict[str, Any]:
    """n reader threads for seconds through HybridClient(primary, replicas=...) as read_only sessions."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def run(i: int) -> None:
        rng = np.random.default_rng(seed + i)
        words = random.Random(seed + i)
        mine: list[float] = []
        with HybridClient(primary, replicas=replicas) as client:
            while time.monotonic() < stop_at:
                q = _vectors(rng, 1)[0]
                t0 = time.perf_counter()
                with client.tenant(f"t{words.randrange(tenants)}", read_only=True) as s:
                    s.retrieve(query_embedding=q, query_text=" ".join(words.choice(WORDS) for _ in range(3)),
                               top_k=10, lexical="ts_rank")
                mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - t0
    return {"replicas": len(replicas), "readers": n, "seconds": round(elapsed, 2), "queries": len(latencies),
            "qps": round(len(latencies) / elapsed, 1), "p50_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(float(np.percentile(latencies, 99)), 2)}


def scratch_server(top: Path, role: str) -> tuple[str, str]:
    """An embedded server in top/primary/pgdata with the engine installed and an app role; (admin, app) DSNs."""
    data_dir = top / "primary" / "pgdata"
    data_dir.parent.mkdir(parents=True)
    root = start_embedded(data_dir)
    with psycopg.connect(root, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{role}'")
    migrate.upgrade(root)
    with psycopg.connect(root, autocommit=True) as c:
        c.execute("SELECT hybrid.grant_app(%s)", (role,))
    return root, conninfo.make_conninfo(root, user=role, password=role)


def restart_check(data_dir: Path, app: str, report: dict[str, Any]) -> dict[str, Any]:
    """--restart: a clean stop and start (which heals every BM25 index), then each tenant's live chunks against
    what its clients wrote, and its first retrieve: time and rows that the BM25 branch ranked."""
    stop_embedded(data_dir)
    t0 = time.perf_counter()
    root = start_embedded(data_dir)
    out: dict[str, Any] = {"start_with_bm25_heal_s": round(time.perf_counter() - t0, 2), "tenants": {}}
    with psycopg.connect(root) as c:
        live = dict(c.execute("SELECT tenant_id, count(*) FILTER (WHERE NOT superseded) FROM hybrid.chunk "
                              "WHERE corpus_id = 'load' GROUP BY 1").fetchall())
    with HybridClient(app) as hc:
        for tenant, expected in report["expected_live_chunks"].items():
            t1 = time.perf_counter()
            with hc.tenant(tenant) as t:
                refs = t.retrieve(query_embedding=_unit(np.random.default_rng(1)), query_text="pump alarm", top_k=10)
            out["tenants"][tenant] = {"live_chunks": int(live.get(tenant, 0)), "expected": expected,
                                      "first_retrieve_ms": round((time.perf_counter() - t1) * 1000, 2),
                                      "rows_ranked_by_bm25": sum(r.keyword_rank is not None for r in refs)}
    out["intact"] = all(v["live_chunks"] == v["expected"] for v in out["tenants"].values())
    return out


def replica_runs(root: str, app: str, data_dir: Path, args: argparse.Namespace, standbys: list[Path]) -> dict[str, Any]:
    """Readers against 0, 1, 2, ... standbys (--replicas), each caught up with the primary before it is measured."""
    load_corpus(root, app, args.chunks, args.tenants, args.seed)
    with psycopg.connect(root, autocommit=True) as c:
        c.execute("VACUUM ANALYZE hybrid.chunk")
        c.execute("CHECKPOINT")
    replica_dsns: list[str] = []
    results = []
    for n in sorted(args.replicas):
        while len(replica_dsns) < n:
            sdir = Path(tempfile.mkdtemp(prefix="pyhybrid-replica-"))
            standbys.append(sdir)
            replica_dsns.append(conninfo.make_conninfo(start_embedded_standby(data_dir, sdir),
                                                       user="load_app", password="load_app"))
        with psycopg.connect(root) as c:
            lsn = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        for dsn in replica_dsns:
            with psycopg.connect(dsn) as c:
                while not c.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:  # type: ignore[index]
                    time.sleep(0.1)
        results.append(readers(app, replica_dsns, args.readers, args.seconds, args.tenants, args.seed))
        print(json.dumps(results[-1]), flush=True)
    base = results[0]["qps"]
    return {"chunks": args.chunks, "tenants": args.tenants, "readers": args.readers, "runs": results,
            "qps_ratio_to_primary_only": [round(r["qps"] / base, 2) for r in results]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=16, help="mixed load: concurrent clients")
    ap.add_argument("--seconds", type=float, default=60.0, help="mixed load, or each replica count's read phase")
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--restart", action="store_true", help="mixed load: then a clean restart, checked (a fault)")
    ap.add_argument("--replicas", type=int, nargs="+", default=None, help="read throughput with these standby counts")
    ap.add_argument("--chunks", type=int, default=20000, help="--replicas: corpus size")
    ap.add_argument("--readers", type=int, default=8, help="--replicas: reader threads")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=None, help="default bench/results/load.json (replicas.json)")
    args = ap.parse_args()
    kind = "replicas" if args.replicas else "load"
    meta = start_meta(kind, script="load")
    top = Path(tempfile.mkdtemp(prefix="pyhybrid-load-"))
    standbys: list[Path] = []
    try:
        root, app = scratch_server(top, "load_app")
        if args.replicas:
            report = replica_runs(root, app, top / "primary" / "pgdata", args, standbys)
        else:
            report = run_load(root, app, clients=args.clients, seconds=args.seconds, tenants=args.tenants)
            if args.restart:
                report["restart"] = restart_check(top / "primary" / "pgdata", app, report)
    finally:
        for sdir in standbys:
            stop_embedded(sdir / "data")
        stop_embedded(top / "primary" / "pgdata")
        for path in (top, *standbys):
            shutil.rmtree(path, ignore_errors=True)
    write_result(args.out or Path(f"bench/results/{kind}.json"), meta, report)
    print(json.dumps(report, indent=2))
    ok = args.replicas or (not report["errors"] and report["expected_live_chunks"] == report["actual_live_chunks"]
                           and report["missing_chunks"] == 0 and report["unexpected_chunks"] == 0
                           and report.get("restart", {}).get("intact", True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
