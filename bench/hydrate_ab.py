"""One-off: hybrid_retrieve against client-side fusion, on the engine before and after a change, one database.

The engines alternate round by round on a database that `latency.py --keep-db` left (each round applies
its engine's SQL with migrate.upgrade: the engine before from a git worktree of --before); within a round
the two methods alternate query by query, as latency.py measures them, for its 1% and 50% tenants.
The first round's figures warm the database and are left out of the summary.

    python bench/hydrate_ab.py --data-dir /tmp/lat1m --size 1000000 --before 575fba7
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import latency as L
from _common import ROOT, control_ms, start_meta, summarize, write_result
from pyhybrid import connect
from pyhybrid.server import start_embedded


def install(tree: Path, dsn: str) -> None:
    subprocess.run([sys.executable, "-c", f"from pyhybrid import migrate; migrate.upgrade({dsn!r})"],
                   cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1000000)
    ap.add_argument("--before", required=True, help="the engine's commit before the change")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("bench/results/hydrate_ab.json"))
    args = ap.parse_args()
    meta = start_meta("hydrate_ab")
    admin = start_embedded(args.data_dir)
    db_dsn, app_dsn = L.dsn_for(admin, f"bench_latency_{args.size}"), L.dsn_for(admin, f"bench_latency_{args.size}", L.APP_ROLE)
    world, _, sizes, tenants = L.generate(20240501, args.size)  # latency.py's default --seed: its database
    qrng = np.random.default_rng(11)
    picks = [(label, tenants[i], L.make_queries(world, tenants[i], args.queries + 10, qrng)) for label, i in L.choose_picks(sizes)]
    ms: dict[str, dict[str, dict[str, list[float]]]] = {}
    rounds: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.before], check=True)
        try:
            for r in range(args.rounds):  # the engines' order alternates, so neither always runs first
                for engine, tree in ((("before", old), ("after", ROOT))[:: 1 if r % 2 == 0 else -1]):  # ABBA...
                    install(tree, db_dsn)
                    row: dict[str, object] = {"round": r, "engine": engine}
                    with connect(app_dsn) as client:
                        for label, td, qs in picks:
                            run = L.Runner(client, td.tenant_id)
                            for q in qs[:10]:  # warm-up: the new functions' plans, the tenant's pages
                                run.hybrid_retrieve(q)
                                run.client_fusion(q)
                            got = ms.setdefault(engine, {}).setdefault(label, {"hybrid_retrieve": [], "client_fusion": []})
                            one, cli = [], []
                            for i, q in enumerate(qs[10:]):
                                for m in (("hybrid_retrieve", "client_fusion") if i % 2 else ("client_fusion", "hybrid_retrieve")):
                                    (one if m == "hybrid_retrieve" else cli).append(getattr(run, m)(q)[0] * 1000.0)
                            if r > 0:
                                got["hybrid_retrieve"] += one
                                got["client_fusion"] += cli
                            row[label] = {"one_call_p50": round(float(np.median(one)), 2), "client_p50": round(float(np.median(cli)), 2),
                                          "ratio_p50": round(float(np.median(one) / np.median(cli)), 3),
                                          "ratio_mean": round(float(np.mean(one) / np.mean(cli)), 3)}
                    row["control_ms"] = control_ms()
                    rounds.append(row)
                    print(row, flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
            install(ROOT, db_dsn)
    summary = {e: {lab: {m: summarize(v) for m, v in by.items()} for lab, by in t.items()} for e, t in ms.items()}
    write_result(args.out, meta, {"config": vars(args) | {"data_dir": str(args.data_dir), "out": str(args.out)},
                                  "rounds": rounds, "summary": summary})
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
