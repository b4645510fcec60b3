#!/usr/bin/env python
"""What each fusion method, rerank and several formulations cost per hybrid_retrieve call, side by side.

    python bench/fusion_cost.py --dataset DIR [--dataset DIR ...] --out FILE.json [--rounds 3]

For each collection (layout of ../shared/datasets/*), a fresh database on the embedded server holds the
corpus for one tenant (as bench/quality.py loads it). Every judged query (up to --queries) then runs, as the
tenant's login role, hybrid_retrieve with dense + BM25 at top_k 10 (the default depth, 30 per branch) in
each mode, the modes interleaved query by query and their order rotated, for --rounds rounds:

  rrf, convex, dbsf       fusion => ..., everything else at its default
  convex_psk100           convex with per_source_k 100 (deeper branches)

p50 and p95 of the client-side call time per mode, and each mode's p50 over rrf's (ratios measured in
the same rounds, so the shared machine's load cancels out). Writes FILE.json and FILE.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import numpy as np
import psycopg
from psycopg import sql

from _common import load_dataset, machine_info
from quality import TENANT, ingest, setup_database
from pyhybrid import connect
from pyhybrid.server import start_embedded

MODES: dict[str, dict[str, Any]] = {
    "rrf": {"fusion": "rrf"},
    "convex": {"fusion": "convex"},
    "dbsf": {"fusion": "dbsf"},
    "convex_psk100": {"fusion": "convex", "per_source_k": 100},
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir", default="/tmp/pyhybrid-bench-fusion-cost")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    admin = start_embedded(Path(args.data_dir))
    out: dict[str, Any] = {"machine": machine_info(), "modes": MODES, "datasets": {}}
    dbs: list[str] = []
    try:
        for dpath in args.dataset:
            ds = load_dataset(dpath)
            qids = ds.judged_query_ids()[: args.queries]
            dbname = "pyhybrid_fusion_cost_" + re.sub(r"[^a-z0-9_]", "_", ds.name.lower())
            db, tenant_dsn, _ = setup_database(admin, dbname, None)
            dbs.append(dbname)
            ingest(db, ds, 5000)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                client = connect(tenant_dsn)
            times: dict[str, list[float]] = {m: [] for m in MODES}
            names = list(MODES)
            for rnd in range(args.rounds):
                for i, q in enumerate(qids):
                    vec = ds.query_vector(q).astype(np.float32)
                    order = names[(i + rnd) % len(names):] + names[:(i + rnd) % len(names)]
                    for m in order:
                        t0 = time.perf_counter()
                        with client.tenant(TENANT) as t:
                            t.retrieve(query_embedding=vec, query_text=ds.query_text[q], top_k=10, graph_weight=0.0,
                                       **MODES[m])
                        times[m].append(1000 * (time.perf_counter() - t0))
            client.close()
            p50 = {m: float(np.median(v)) for m, v in times.items()}
            out["datasets"][ds.name] = {
                m: {"p50_ms": round(p50[m], 2), "p95_ms": round(float(np.percentile(v, 95)), 2),
                    "p50_over_rrf": round(p50[m] / p50["rrf"], 3), "calls": len(v)} for m, v in times.items()}
            print(ds.name, json.dumps(out["datasets"][ds.name]))
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            for n in dbs:
                c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(n)))
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    lines = ["# Cost of the fusion methods per hybrid_retrieve call", "",
             f"Run {out['machine']['date']} on {out['machine']['nproc']} x {out['machine']['cpu_model']}; top_k 10, "
             f"dense + BM25, {args.rounds} rounds of up to {args.queries} queries, modes interleaved; client-side ms.",
             "", "| collection | mode | p50 ms | p95 ms | p50 / rrf p50 |", "| --- | --- | ---: | ---: | ---: |"]
    for n, res in out["datasets"].items():
        for m, r in res.items():
            lines.append(f"| {n} | {m} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {r['p50_over_rrf']:.3f} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
