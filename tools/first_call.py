"""A tenant's first hybrid_retrieve on a new connection, and its warm ones, on a kept bench/tenants.py database.

bench/tenants.py measures them at each of its steps while it builds; this measures them again on the database it left,
for random tenants of one placement, as its steps do (bench/tenants.py's measure_tenant: a login role of the tenant,
a new connection, one call, then --calls more), in --rounds rounds of different tenants. Run it before and after a
change (a server setting, a re-applied sql/idempotent/) to compare them side by side; the --label names the run.
Each round first makes --warmup other tenants' first calls, so that every round starts from the same kind of cache.

    python tools/first_call.py --dsn "host=/tmp/pyhybrid-bench-tenants user=postgres dbname=bench_tenants" --label a
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _common import pct
from tenants import measure_tenant


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": round(statistics.median(ms), 2), "p95": round(pct(ms, 95), 2),
            "max": round(max(ms), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True, help="the bench database, as a superuser")
    ap.add_argument("--tenants", type=int, default=40, help="tenants measured in each round")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=10, help="other tenants' first calls before each round")
    ap.add_argument("--calls", type=int, default=5, help="warm calls per tenant")
    ap.add_argument("--placement", choices=["pool", "dedicated"], default="pool")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=None, help="append the result as a JSON line")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        op = ">=" if args.placement == "pool" else "<"
        ids = [r[0] for r in admin.execute(f"SELECT t.tenant_id FROM hybrid.tenant t WHERE t.tenant_key {op} 1073741824 "
                                           "AND EXISTS (SELECT 1 FROM hybrid.bm25_tenant_stats s "
                                           "WHERE s.tenant_key = t.tenant_key AND s.n_docs > 0) ORDER BY 1")]
        picks = [ids[int(i)] for i in rng.choice(len(ids), args.rounds * (args.tenants + args.warmup), replace=False)]
        settings = dict(admin.execute("SELECT name, current_setting(name) FROM pg_settings WHERE name IN "
                                      "('shared_buffers', 'max_locks_per_transaction')").fetchall())
        rounds: list[dict[str, Any]] = []
        per = args.tenants + args.warmup
        for r in range(args.rounds):
            chosen = picks[r * per:(r + 1) * per]
            for tid in chosen[:args.warmup]:
                measure_tenant(args.dsn, admin, tid, 0, rng)
            got = [measure_tenant(args.dsn, admin, tid, args.calls, rng) for tid in chosen[args.warmup:]]
            rounds.append({"first_ms": [g["cold_s"] * 1000 for g in got], "connect_ms": [g["connect_s"] * 1000 for g in got],
                           "warm_ms": [w * 1000 for g in got for w in g["warm_s"]]})
    out = {"label": args.label, "placement": args.placement, "tenants": len(ids), "settings": settings,
           "loadavg": [round(x, 2) for x in os.getloadavg()],
           **{k: summary([x for rd in rounds for x in rd[k]]) for k in ("first_ms", "warm_ms", "connect_ms")},
           "rounds": [{k: summary(v) for k, v in rd.items()} for rd in rounds]}
    print(json.dumps(out))
    if args.out:
        with args.out.open("a") as f:
            f.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
