"""Online ingest into partitions of each dense index kind, on a kept 1M database (`latency.py --keep-db`).

New pre-embedded chunks (the generator's own kind: the tenant's topics, 60-160 words) go through
`TenantSession.ingest` as the app role, in batches of --batch chunks cut at document boundaries, every index
present (dense, BM25, GIN), the tenants taking turns batch by batch for --rounds rounds. Default tenants: the
50% one (500,000 chunks) and the two either side of `ivfflat_rows` (24,144 chunks, IVFFlat after a rebuild;
19,315, HNSW). Reported per tenant: its partition's dense index (access method), the median batch's chunks/s
and the total. The chunks stay in the database (ids `<tenant>-online-...`).

    python bench/online_ingest.py --data-dir /work/bench1m/data --out bench/results/online_ingest_1m.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402
from _common import start_meta, write_result  # noqa: E402
from pyhybrid import Chunk, HybridClient  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

_AM_SQL = """SELECT a.amname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
WHERE x.indrelid = hybrid._chunk_partition(hybrid._tenant_key(%s)) AND a.amname IN ('hnsw', 'ivfflat')"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--tenants", nargs="+", default=["t000", "t004", "t005"])
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("bench/results/online_ingest_1m.json"))
    args = ap.parse_args(argv)
    meta = start_meta("online_ingest", argv)
    admin = start_embedded(args.data_dir)
    db = f"bench_latency_{args.size}"
    world = L.World(args.seed)
    rng = np.random.default_rng(args.seed + 99)
    n = args.batch * args.rounds
    new = {t: L.make_tenant(world, f"{t}-online", n, rng) for t in args.tenants}
    batches = {t: list(L.doc_batches(td, args.batch)) for t, td in new.items()}
    out: dict[str, Any] = {"database": db, "tenants": {}}
    with psycopg.connect(L.dsn_for(admin, db), autocommit=True) as conn:
        for t in args.tenants:
            rows = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = hybrid._chunk_partition(hybrid._tenant_key(%s))",
                                (t,)).fetchone()[0]
            out["tenants"][t] = {"rows_before": rows, "dense_index": [r[0] for r in conn.execute(_AM_SQL, (t,))],
                                 "batches": []}
    with HybridClient(L.dsn_for(admin, db, L.APP_ROLE)) as client:
        for r in range(max(len(b) for b in batches.values())):
            for t in args.tenants:
                if r >= len(batches[t]):
                    continue
                lo, hi = batches[t][r]
                td = new[t]
                chunks = [Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j],
                                embedding=td.vectors[j], position=int(td.positions[j])) for j in range(lo, hi)]
                with client.tenant(t) as s:
                    t0 = time.perf_counter()
                    res = s.ingest(chunks)
                    dt = time.perf_counter() - t0
                assert res.inserted == len(chunks), res
                out["tenants"][t]["batches"].append({"chunks": len(chunks), "s": round(dt, 3)})
                print(t, r, len(chunks), round(len(chunks) / dt, 1), flush=True)
    for t, v in out["tenants"].items():
        rates = [b["chunks"] / b["s"] for b in v["batches"]]
        v["median_batch_chunks_per_s"] = round(statistics.median(rates), 1)
        v["chunks_per_s"] = round(sum(b["chunks"] for b in v["batches"]) / sum(b["s"] for b in v["batches"]), 1)
    write_result(args.out, meta, out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
