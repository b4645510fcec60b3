"""Edge loading at scale: add_edges for a tenant the planner's statistics have not seen yet.

A database holds --chunks chunks of one large tenant and --edges edges among them (loaded through
add_edges, then VACUUM ANALYZE). Then, for each of --rounds new tenants, --batch-chunks chunks are
written and one add_edges batch of --batch edges between them is timed: the case that went quadratic
(hybrid.finish_edges joined the unanalyzed staging table by a nested loop). The same run times the
engine's current hybrid.finish_edges and the one of git revision --before (swapped in with CREATE OR
REPLACE), alternating tenants, so the two are compared side by side on the same database.

Chunks are written by SQL as the superuser (no embeddings; the BM25 and GIN indexes dropped first: no
part of edge loading reads them), edges through the API (TenantSession.add_edges) as an app role.

    python bench/edges.py --chunks 1000000 --edges 2000000 --out bench/results/edges.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import machine_info  # noqa: E402
from pyhybrid import HybridClient, migrate  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = "bench_edges_app"


def finish_edges_sql(rev: str | None) -> str:
    """The CREATE OR REPLACE of hybrid.finish_edges at a git revision (None: the working tree)."""
    path = "sql/idempotent/030_graph.sql"
    text = (ROOT / path).read_text() if rev is None else subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"CREATE OR REPLACE FUNCTION hybrid\.finish_edges\(.*?\n\$\$;", text, re.S)
    if not m:
        raise SystemExit(f"no hybrid.finish_edges in {path} at {rev}")
    return m.group(0)


def insert_chunks(admin: psycopg.Connection[Any], tenant: str, n: int) -> float:
    t0 = time.perf_counter()
    admin.execute("INSERT INTO hybrid.corpus (tenant_id, corpus_id) VALUES (%s, 'c') ON CONFLICT DO NOTHING", (tenant,))
    # tenant_key: the partition key where the schema has per-tenant partitions (0.3), absent before
    keyed = admin.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = 'hybrid.chunk'::regclass "
                          "AND attname = 'tenant_key'").fetchone() == (1,)
    admin.execute(f"""INSERT INTO hybrid.chunk (tenant_id, chunk_id, corpus_id, document_id, content, content_hash
                                                {", tenant_key" if keyed else ""})
                     SELECT %(t)s, %(t)s || '-' || g, 'c', %(t)s || '-d' || (g / 10), 'chunk ' || g, 'h' || g
                            {", hybrid._tenant_key(%(t)s)" if keyed else ""}
                     FROM generate_series(0, %(n)s - 1) g""", {"t": tenant, "n": n})
    return time.perf_counter() - t0


def edges_for(tenant: str, n_chunks: int, n_edges: int, salt: int) -> list[dict[str, str]]:
    """n_edges distinct edges between the tenant's chunks (and a few entities), deterministic."""
    out = []
    for i in range(n_edges):
        a = (i * 7919 + salt) % n_chunks
        b = (a + 1 + (i // n_chunks) + (i * 31) % 97) % n_chunks
        dst = f"{tenant}:entity:e{i % 500}" if i % 10 == 0 else f"{tenant}-{b}"
        out.append({"src": f"{tenant}-{a}", "dst": dst, "rel": "CITES" if i % 3 else "MENTIONS"})
    return out


def add_edges_timed(client: HybridClient, tenant: str, edges: list[dict[str, str]], timeout_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        with client.connection() as conn:
            conn.execute(f"SET statement_timeout = '{int(timeout_s)}s'")
        with client.tenant(tenant) as t:
            res = t.add_edges(edges)
        dt = time.perf_counter() - t0
        return {"seconds": round(dt, 3), "edges_per_s": round(len(edges) / dt, 1), "edges_added": res.edges_added}
    except Exception as e:  # a timeout: report the bound, not a number we did not measure
        return {"seconds": None, "timed_out_after_s": timeout_s, "error": type(e).__name__}
    finally:
        with client.connection() as conn:
            conn.execute("RESET statement_timeout")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=2_000_000)
    ap.add_argument("--batch", type=int, default=30_000, help="edges in each timed batch")
    ap.add_argument("--batch-chunks", type=int, default=30_000, help="chunks of each new tenant")
    ap.add_argument("--rounds", type=int, default=2, help="new tenants per version")
    ap.add_argument("--load-batch", type=int, default=50_000, help="edges per add_edges call while loading")
    ap.add_argument("--before", default="8724c12~1", help="git revision whose finish_edges is BEFORE")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="bound on one timed batch")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-edges"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "edges.json")
    args = ap.parse_args(argv)

    server = start_embedded(args.data_dir)
    db = "bench_edges"
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {db}")
        if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP,)).fetchone() is None:
            c.execute(f"CREATE ROLE {APP} LOGIN")
    dsn = conninfo.make_conninfo(server, dbname=db)
    migrate.upgrade(dsn)
    versions = {"before": finish_edges_sql(args.before), "after": finish_edges_sql(None)}
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine_info(),
                              "before_rev": args.before}
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DROP INDEX IF EXISTS hybrid.chunk_content_bm25")
        admin.execute("DROP INDEX IF EXISTS hybrid.chunk_tsv_gin")
        admin.execute("SELECT hybrid.create_tenant('big')")
        admin.execute("SELECT hybrid.grant_app(%s)", (APP,))
        admin.execute("SELECT hybrid.register_edge_type('CITES'), hybrid.register_edge_type('MENTIONS')")
        admin.execute(versions["after"])
        report["load_chunks_s"] = round(insert_chunks(admin, "big", args.chunks), 1)
        admin.execute("VACUUM ANALYZE hybrid.chunk")
    app = conninfo.make_conninfo(dsn, user=APP)
    with HybridClient(app) as client:
        t0 = time.perf_counter()
        loaded = 0
        edges = edges_for("big", args.chunks, args.edges, 0)
        for i in range(0, len(edges), args.load_batch):
            with client.tenant("big") as t:
                loaded += t.add_edges(edges[i:i + args.load_batch]).edges_added
            print(f"loaded {loaded} edges, {loaded / (time.perf_counter() - t0):.0f}/s", file=sys.stderr)
        report["load_edges"] = {"edges_added": loaded, "seconds": round(time.perf_counter() - t0, 1),
                                "edges_per_s": round(loaded / (time.perf_counter() - t0), 1)}
        del edges
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("VACUUM ANALYZE")
        report["graph_before_batches"] = {
            "chunks": admin.execute("SELECT count(*) FROM hybrid.chunk").fetchone()[0],  # type: ignore[index]
            "edges": admin.execute("SELECT count(*) FROM hybrid_graph._ag_label_edge").fetchone()[0]}  # type: ignore[index]
    runs: list[dict[str, Any]] = []
    order = ["after", "before"] * args.rounds
    with HybridClient(app) as client:
        for i, version in enumerate(order):
            tenant = f"new{i}"
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("SELECT hybrid.create_tenant(%s)", (tenant,))
                insert_chunks(admin, tenant, args.batch_chunks)  # no ANALYZE: the planner has not seen them
                admin.execute(versions[version])
            res = add_edges_timed(client, tenant, edges_for(tenant, args.batch_chunks, args.batch, i), args.timeout_s)
            runs.append({"version": version, "tenant": tenant, **res})
            print(json.dumps(runs[-1]), file=sys.stderr)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(versions["after"])
    report["batches"] = runs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"# Edge loading at scale ({report['graph_before_batches']['chunks']:,} chunks, "
             f"{report['graph_before_batches']['edges']:,} edges already loaded)", "",
             f"Before = hybrid.finish_edges of `{args.before}`; after = the working tree's. Each timed batch: "
             f"{args.batch:,} edges among {args.batch_chunks:,} chunks of a tenant the statistics have not seen.", "",
             f"Bulk edge load (after): {report['load_edges']['edges_per_s']:,.0f} edges/s "
             f"({report['load_edges']['edges_added']:,} edges in {report['load_edges']['seconds']} s).", "",
             "| batch | version | seconds | edges/s |", "|---|---|---:|---:|"]
    for r in runs:
        secs = f"{r['seconds']:.2f}" if r.get("seconds") is not None else f"> {r['timed_out_after_s']:.0f} (stopped)"
        rate = f"{r['edges_per_s']:,.0f}" if r.get("seconds") is not None else f"< {args.batch / r['timed_out_after_s']:,.0f}"
        lines.append(f"| {r['tenant']} | {r['version']} | {secs} | {rate} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
