"""Finish the bulk load of a latency.py database whose process died during ingest (e.g. killed for memory).

Regenerates the tenants one at a time with latency.py's generator and seed (same chunks), skips the batches
already committed (each ingest call is one transaction, batches cut by latency.doc_batches, so a tenant's
live chunk count is a whole number of its batches), ingests the rest as the app role inside
HybridClient(admin).bulk_load(), and prints the load and HNSW rebuild seconds of this process as JSON; then
`latency.py --resume <size> --resumed-ingest-s LOAD REBUILD` loads the edges and measures.

    python bench/latency_continue_ingest.py --size 1000000 --tenants 1000 --data-dir /tmp/d1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402

from pyhybrid import Chunk, connect  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, required=True)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20240501)
    args = ap.parse_args()
    L.N_TENANTS = args.tenants
    admin_dsn = start_embedded(args.data_dir)
    db = f"bench_latency_{args.size}"
    db_dsn = L.dsn_for(admin_dsn, db)
    with psycopg.connect(db_dsn) as conn:
        have = dict(conn.execute("SELECT tenant_id, count(*) FROM hybrid.chunk WHERE NOT superseded GROUP BY 1").fetchall())
    before = sum(have.values())
    sizes = L.tenant_sizes(args.size)
    world = L.World(args.seed)
    rng = np.random.default_rng(args.seed + args.size)
    loaded = 0
    with connect(db_dsn) as admin, connect(L.dsn_for(admin_dsn, db, L.APP_ROLE)) as client:
        t0 = time.perf_counter()
        with admin.bulk_load():
            for i, n in enumerate(sizes):
                td = L.make_tenant(world, L.tenant_name(i), n, rng)  # always drawn: keeps the stream in step
                done = have.get(td.tenant_id, 0)
                if done >= n:
                    continue
                cum = 0
                for lo, hi in L.doc_batches(td, args.batch):
                    if hi <= done:
                        cum = hi
                        continue
                    assert lo == cum == done or lo >= done, (td.tenant_id, lo, hi, done)
                    chunks = [Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j],
                                    embedding=td.vectors[j], position=int(td.positions[j]),
                                    metadata={"title": f"{td.doc_ids[j]} part {int(td.positions[j])}",
                                              "topic": int(td.clusters[j])})
                              for j in range(lo, hi)]
                    with client.tenant(td.tenant_id) as t:
                        r = t.ingest(chunks, corpus_id="main")
                    assert r.inserted == hi - lo and r.superseded == 0, r
                    loaded += hi - lo
                print(f"{td.tenant_id}: {n} chunks ({done} were loaded); {loaded} this process, "
                      f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            t1 = time.perf_counter()
            print(f"loaded {loaded} in {t1 - t0:.1f} s; rebuilding HNSW", file=sys.stderr, flush=True)
        t2 = time.perf_counter()
    with psycopg.connect(db_dsn) as conn:
        live = conn.execute("SELECT count(*) FROM hybrid.chunk WHERE NOT superseded").fetchone()[0]
    print(json.dumps({"chunks_before": before, "chunks_loaded": loaded, "load_s": round(t1 - t0, 2),
                      "hnsw_rebuild_s": round(t2 - t1, 2), "live_after": live}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
