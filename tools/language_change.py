"""How long changing a tenant's language takes, and what searches meet meanwhile (hybrid.set_tenant_language).

On a database of its own (dropped and made again) on the server of --dsn: a tenant of --chunks chunks (random
384-d embeddings, German words) and a second, small tenant; while the first's language changes, one reader of each
tenant searches in a loop. Prints the change's duration and each reader's searches: count, median and max.

    python tools/language_change.py --dsn "host=/tmp/pg user=postgres" --chunks 20000
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import numpy as np
import psycopg

from pyhybrid import HybridClient, migrate

WORDS = "haus häuser garten gärten see zug kuchen mehl eier zucker stadt straße auto bahn wasser licht".split()


def load(dsn: str, chunks: int) -> None:
    rng = np.random.default_rng(0)
    with HybridClient(dsn) as admin:
        admin.create_tenant("changed")
        admin.create_tenant("other")
        for tenant, n in (("changed", chunks), ("other", 200)):
            for start in range(0, n, 2000):
                vecs = rng.standard_normal((min(2000, n - start), 384)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                with admin.tenant(tenant) as t:
                    t.ingest([{"chunk_id": f"c{start + i}", "document_id": f"d{(start + i) // 4}", "position": i % 4,
                               "content": " ".join(rng.choice(WORDS, 60)), "embedding": v}
                              for i, v in enumerate(vecs)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True, help="a superuser DSN of the server (its dbname is ignored)")
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--database", default="pyhybrid_language_change")
    args = ap.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{args.database}"')
    dsn = psycopg.conninfo.make_conninfo(args.dsn, dbname=args.database)
    migrate.upgrade(dsn)
    load(dsn, args.chunks)
    stop = threading.Event()
    seen: dict[str, list[float]] = {"changed": [], "other": []}

    def reader(tenant: str) -> None:
        with HybridClient(dsn) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                with c.tenant(tenant) as t:
                    t.retrieve(query_text="haus garten", vector_weight=0, top_k=5)
                seen[tenant].append(time.perf_counter() - t0)
                time.sleep(0.02)

    threads = [threading.Thread(target=reader, args=(t,)) for t in seen]
    for th in threads:
        th.start()
    try:
        time.sleep(1.0)
        t0 = time.perf_counter()
        with HybridClient(dsn) as admin:
            admin.set_tenant_language("changed", "german")
        took = time.perf_counter() - t0
        time.sleep(0.5)
    finally:
        stop.set()
        for th in threads:
            th.join()
    print(json.dumps({"chunks": args.chunks, "change_s": round(took, 2), "searches": {
        k: {"n": len(v), "median_ms": round(1000 * statistics.median(v), 1), "max_ms": round(1000 * max(v), 1)}
        for k, v in seen.items()}}, indent=2))


if __name__ == "__main__":
    main()
