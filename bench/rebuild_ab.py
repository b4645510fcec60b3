"""A bulk load's index rebuild on one connection against several, alternating on one kept database.

Each round drops the HNSW, GIN and BM25 indexes and rebuilds them through the product's path,
`HybridClient(admin).bulk_load(build_workers=N)` with nothing loaded inside it, once for each N in an order
that alternates round by round (ABBA), with the machine-speed control before each rebuild. After each, the
indexes must be the same as before (names, definitions, the HNSW densities, the BM25 segment records),
else the run stops. CPU busy is the share of all cores not idle nor waiting on I/O during the rebuild.

    python bench/latency.py --sizes 1000000 --bulk-above 1000000 --keep-db ...   # makes the database
    python bench/rebuild_ab.py --size 1000000 --workers 1 2 --rounds 2 --out bench/results/rebuild_ab_1m.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import control_ms, cpu_seconds, start_meta, write_result  # noqa: E402
from pyhybrid import HybridClient  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

# every index of the partitions and of the parent, as the catalog defines it, and the BM25 segment records
_STATE_SQL = """
SELECT i.relname, pg_get_indexdef(i.oid), coalesce(array_to_string(i.reloptions, ','), '')
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE i.relnamespace = 'hybrid'::regnamespace
  AND x.indrelid IN (SELECT 'hybrid.chunk'::regclass UNION ALL
                     SELECT inhrelid FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass)
ORDER BY 1"""
_SEGMENTS_SQL = "SELECT count(*) FROM hybrid.bm25_merged"


def _state(dsn: str) -> tuple[list[Any], int]:
    with psycopg.connect(dsn) as c:
        return c.execute(_STATE_SQL).fetchall(), c.execute(_SEGMENTS_SQL).fetchone()[0]


def rebuild(dsn: str, workers: int) -> dict[str, Any]:
    control = control_ms()
    (tot0, idle0), t0 = cpu_seconds(), time.perf_counter()
    with HybridClient(dsn) as admin, admin.bulk_load(build_workers=workers):
        t_dropped = time.perf_counter()
    t1, (tot1, idle1) = time.perf_counter(), cpu_seconds()
    busy = (tot1 - tot0) - (idle1 - idle0)
    return {"workers": workers, "s": round(t1 - t_dropped, 1), "with_drop_s": round(t1 - t0, 1),
            "cpu_busy_pct": round(100 * busy / ((t1 - t0) * (os.cpu_count() or 1)), 1), "control_ms_before": control}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000, help="the kept database bench_latency_<size>")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-latency"), help="latency.py's --data-dir")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="build_workers to compare")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each rebuilding once per --workers value")
    ap.add_argument("--out", type=Path, default=Path("bench/results/rebuild_ab.json"))
    args = ap.parse_args()
    meta = start_meta("rebuild_ab")
    dsn = start_embedded(args.data_dir).replace("/postgres?", f"/bench_latency_{args.size}?")
    before = _state(dsn)
    runs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        for w in (args.workers if rnd % 2 == 0 else args.workers[::-1]):
            r = rebuild(dsn, w)
            r["round"] = rnd
            if _state(dsn) != before:
                raise SystemExit(f"round {rnd}, build_workers {w}: the indexes differ from before the rebuild")
            runs.append(r)
            print(r, file=sys.stderr, flush=True)
    by = {w: [r["s"] for r in runs if r["workers"] == w] for w in args.workers}
    base = args.workers[0]
    summary = {str(w): {"median_s": round(statistics.median(v), 1), "runs_s": v,
                        "ratio_to_%s" % base: round(statistics.median(v) / statistics.median(by[base]), 3)}
               for w, v in by.items()}
    write_result(args.out, meta, {"database": f"bench_latency_{args.size}", "runs": runs, "summary": summary,
                                  "same_indexes_after_each": True})
    print(summary)


if __name__ == "__main__":
    main()
