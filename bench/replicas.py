"""Read throughput of hybrid_retrieve with 0, 1 and 2 hot standbys on this machine.

An embedded primary with a synthetic multi-tenant corpus, standbys made by
pyhybrid.server.start_embedded_standby, and reader threads that send every retrieval through
HybridClient(primary, replicas=[...]) as read_only sessions (round-robin over the replicas; with
none, the primary serves them). All servers share this machine's cores, so this measures the
routing and its overhead, not what separate machines would add.

    python bench/replicas.py --chunks 20000 --readers 8 --seconds 20 --out bench/results/replicas.json
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
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import start_meta, write_result  # noqa: E402
from pyhybrid import Chunk, HybridClient, migrate  # noqa: E402
from pyhybrid.server import start_embedded, start_embedded_standby, stop_embedded  # noqa: E402

WORDS = ["pump", "valve", "alarm", "sensor", "battery", "occlusion", "flow", "label", "audit", "risk", "keypad",
         "pressure", "infusion", "brake", "controller", "latency", "protocol", "deviation", "requirement", "test"]


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray[Any, Any]:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def load(admin: str, app: str, chunks: int, tenants: int, seed: int) -> None:
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=Path("bench/results/replicas.json"))
    args = ap.parse_args()
    meta = start_meta("replicas")
    top = Path(tempfile.mkdtemp(prefix="pyhybrid-replicas-"))
    data_dir = top / "primary" / "pgdata"
    data_dir.parent.mkdir()
    root = start_embedded(data_dir)
    standbys: list[Path] = []
    results = []
    try:
        with psycopg.connect(root, autocommit=True) as c:
            c.execute("CREATE ROLE replicas_app LOGIN PASSWORD 'replicas_app'")
        migrate.upgrade(root)
        with psycopg.connect(root, autocommit=True) as c:
            c.execute("SELECT hybrid.grant_app('replicas_app')")
        app = conninfo.make_conninfo(root, user="replicas_app", password="replicas_app")
        load(root, app, args.chunks, args.tenants, args.seed)
        with psycopg.connect(root, autocommit=True) as c:
            c.execute("VACUUM ANALYZE hybrid.chunk")
            c.execute("CHECKPOINT")
        replica_dsns: list[str] = []
        for n in (0, 1, 2):
            while len(replica_dsns) < n:
                sdir = Path(tempfile.mkdtemp(prefix="pyhybrid-replica-"))
                standbys.append(sdir)
                replica_dsns.append(conninfo.make_conninfo(start_embedded_standby(data_dir, sdir),
                                                           user="replicas_app", password="replicas_app"))
            with psycopg.connect(root) as c:
                lsn = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
            for dsn in replica_dsns:  # caught up before measuring
                with psycopg.connect(dsn) as c:
                    while not c.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:  # type: ignore[index]
                        time.sleep(0.1)
            results.append(readers(app, replica_dsns, args.readers, args.seconds, args.tenants, args.seed))
            print(json.dumps(results[-1]), flush=True)
    finally:
        for sdir in standbys:
            stop_embedded(sdir / "data")
        stop_embedded(data_dir)
        for path in (top, *standbys):
            shutil.rmtree(path, ignore_errors=True)
    base = results[0]["qps"]
    report = {"chunks": args.chunks, "tenants": args.tenants, "readers": args.readers, "runs": results,
              "qps_ratio_to_primary_only": [round(r["qps"] / base, 2) for r in results]}
    write_result(args.out, meta, report)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
