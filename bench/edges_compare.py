"""add_edges on a database bench/edges.py left (1M chunks of tenant 'big' and its edges): the current
hybrid.finish_edges against the one of git revision --before, alternating, each batch rolled back.

Two batches: 50,000 edges among big's existing nodes (its statistics know them), and 30,000 edges of a
tenant created here with 30,000 chunks and no nodes yet (the case that went quadratic: the nodes the call
creates are unknown to hybrid.graph_node's statistics). Run as the superuser, as the app role inside.

    python bench/edges_compare.py --dsn "host=/tmp/pyh-edges-main dbname=bench_edges user=postgres" --before c078980
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.edges import APP, edges_for, finish_edges_sql, insert_chunks  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--before", required=True, help="git revision whose finish_edges is BEFORE")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    bodies = {"before": finish_edges_sql(args.before), "after": finish_edges_sql(None)}
    admin = psycopg.connect(args.dsn, autocommit=True)
    if admin.execute("SELECT count(*) FROM hybrid.tenant WHERE tenant_id = 'probe_a'").fetchone() == (0,):
        admin.execute("SELECT hybrid.create_tenant('probe_a')")
        insert_chunks(admin, "probe_a", 30000)
    conn = psycopg.connect(args.dsn)

    def run(body: str, tenant: str, edges: list[dict[str, str]]) -> tuple[Any, float]:
        conn.execute(body)
        conn.execute(f"SET ROLE {APP}")
        conn.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (tenant,))
        conn.execute("SELECT hybrid.begin_edges()")
        with conn.cursor().copy("COPY pg_temp.hybrid_edge_stage (ord, src, dst, rel) FROM STDIN") as cp:
            for i, e in enumerate(edges):
                cp.write_row((i, e["src"], e["dst"], e["rel"]))
        t0 = time.perf_counter()
        res = conn.execute("SELECT * FROM hybrid.finish_edges()").fetchone()
        dt = time.perf_counter() - t0
        conn.rollback()
        return res, dt

    cases = {"big, 50,000 edges among existing nodes": ("big", edges_for("big", 1_000_000, 50_000, salt=424242)),
             "new tenant, 30,000 edges, 30,050 new nodes": ("probe_a", edges_for("probe_a", 30_000, 30_000, salt=7))}
    for rnd in range(args.rounds):
        for label, body in bodies.items():
            for case, (tenant, edges) in cases.items():
                res, dt = run(body, tenant, edges)
                print(f"round {rnd} | {label} | {case} | {dt:.2f} s | {len(edges) / dt:,.0f} edges/s | {res}", flush=True)
    conn.execute(bodies["after"])
    conn.commit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
