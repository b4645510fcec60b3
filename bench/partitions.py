"""How far a partition per tenant scales on this machine: the facts the per-tenant storage design needs.

A scratch database holds a prototype of the chunk table, LIST-partitioned by an integer tenant key, with
the product's per-chunk indexes defined on the parent (HNSW on vector(384), BM25 through pg_textsearch,
GIN on the tsvector, a btree on (tenant key, chunk id)). For each step of --steps tenant counts, the
script adds partitions up to that count, each created as a plain table with its rows and then attached
(ATTACH PARTITION, SHARE UPDATE EXCLUSIVE on the parent), and measures:

- create: seconds per tenant to create, fill (--rows rows) and attach one partition;
- catalog: relations in pg_class, size of the catalogs, database size;
- memory: summed RSS and PSS of the server processes, after querying --sample tenants;
- planning and execution of a tenant's dense, BM25 and ts_rank statements with the key as a literal
  (plan-time pruning), from EXPLAIN (ANALYZE, SUMMARY), medians over the sample;
- locks: how many relation locks one pruned statement takes, and one with the key as a parameter of a
  generic plan (where plan-time pruning cannot happen);
- BM25 scores: the same word in two tenants' partitions scored on each partition's own statistics.

    python bench/partitions.py --steps 1 100 1000 --out bench/results/partitions.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
from psycopg import conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import machine_info  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DIM = 384
WORDS = [f"w{i}" for i in range(2000)]

SCHEMA = f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_textsearch;
CREATE TABLE proto (
    tenant_key integer NOT NULL,
    chunk_id   text NOT NULL,
    content    text NOT NULL,
    embedding  vector({DIM}),
    tsv        tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    superseded boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_key, chunk_id)
) PARTITION BY LIST (tenant_key);
CREATE INDEX proto_hnsw ON proto USING hnsw (embedding vector_cosine_ops) WHERE NOT superseded;
CREATE INDEX proto_bm25 ON proto USING bm25 (content) WITH (text_config = 'english');
CREATE INDEX proto_gin ON proto USING gin (tsv) WHERE NOT superseded;
"""


def server_memory(data_dir: Path) -> dict[str, float]:
    pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    rss = pss = 0
    for p in procs:
        try:
            m = p.memory_full_info()
            rss += m.rss
            pss += getattr(m, "pss", 0)
        except psutil.Error:
            pass
    return {"rss_mb": round(rss / 2**20, 1), "pss_mb": round(pss / 2**20, 1), "processes": len(procs)}


def vec(rng: np.random.Generator) -> str:
    v = rng.standard_normal(DIM).astype(np.float32)
    v /= np.linalg.norm(v)
    return "[" + ",".join(f"{x:.5f}" for x in v) + "]"


def add_partition(conn: psycopg.Connection[Any], key: int, rows: int, rng: np.random.Generator) -> float:
    t0 = time.perf_counter()
    with conn.transaction():
        conn.execute(f"CREATE TABLE proto_p{key} (LIKE proto INCLUDING DEFAULTS INCLUDING GENERATED)")
        with conn.cursor() as cur, cur.copy(f"COPY proto_p{key} (tenant_key, chunk_id, content, embedding) FROM STDIN") as cp:
            for i in range(rows):
                words = " ".join(rng.choice(WORDS, 12))
                cp.write_row((key, f"c{i}", f"{words} tenant{key}", vec(rng)))
        conn.execute("SET LOCAL lock_timeout = '5s'")
        conn.execute(f"ALTER TABLE proto ATTACH PARTITION proto_p{key} FOR VALUES IN ({key})")
    return time.perf_counter() - t0


def explain_ms(conn: psycopg.Connection[Any], stmt: str) -> tuple[float, float]:
    plan = conn.execute("EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + stmt).fetchone()[0][0]  # type: ignore[index]
    return float(plan["Planning Time"]), float(plan["Execution Time"])


def relation_locks(conn: psycopg.Connection[Any], stmt: str, params: tuple[Any, ...] = ()) -> int:
    with conn.transaction():
        conn.execute(stmt, params).fetchall()
        n = conn.execute("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'").fetchone()
    return int(n[0])  # type: ignore[index]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 100, 1000])
    ap.add_argument("--rows", type=int, default=50, help="rows per partition")
    ap.add_argument("--sample", type=int, default=20, help="tenants queried at each step")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-partitions"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "partitions.json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(7)
    server = start_embedded(args.data_dir)
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS bench_partitions WITH (FORCE)")
        c.execute("CREATE DATABASE bench_partitions")
        settings = {r[0]: r[1] for r in c.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('max_locks_per_transaction', 'max_connections', "
            "'shared_buffers', 'pg_textsearch.memory_limit')").fetchall()}
    dsn = conninfo.make_conninfo(server, dbname="bench_partitions")
    report: dict[str, Any] = {"machine": machine_info(), "settings": settings, "rows_per_partition": args.rows, "steps": []}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        have = 0
        for step in sorted(args.steps):
            times = [add_partition(conn, key, args.rows, rng) for key in range(have + 1, step + 1)]
            have = step
            conn.execute("ANALYZE proto")
            keys = sorted({int(k) for k in rng.integers(1, have + 1, size=args.sample)})
            q = vec(rng)
            plans: dict[str, list[tuple[float, float]]] = {"dense": [], "bm25": [], "ts_rank": []}
            for key in keys:
                plans["dense"].append(explain_ms(conn, f"SELECT chunk_id FROM proto WHERE tenant_key = {key} AND NOT superseded "
                                                       f"ORDER BY embedding <=> '{q}' LIMIT 30"))
                # as the engine does: the partition by name, through its own BM25 index (through the
                # parent, pg_textsearch 1.0 scores against the first partition's index)
                plans["bm25"].append(explain_ms(conn, f"SELECT chunk_id FROM proto_p{key} "
                                                      f"ORDER BY content <@> to_bm25query('w1 w2 w3', 'proto_p{key}_content_idx') LIMIT 30"))
                plans["ts_rank"].append(explain_ms(conn, f"SELECT chunk_id FROM proto WHERE tenant_key = {key} AND NOT superseded "
                                                         "AND tsv @@ 'w1 | w2'::tsquery ORDER BY ts_rank(tsv, 'w1 | w2'::tsquery) DESC LIMIT 30"))
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute("PREPARE g(integer) AS SELECT chunk_id FROM proto WHERE tenant_key = $1 ORDER BY content <@> 'w1 w2' LIMIT 30")
            try:
                generic_locks: int | str = relation_locks(conn, "EXECUTE g(%s)" % keys[0])
            except psycopg.Error as e:
                generic_locks = f"error: {e.sqlstate} {str(e).splitlines()[0]}"
            conn.execute("DEALLOCATE g")
            conn.execute("RESET plan_cache_mode")
            catalog = conn.execute(
                "SELECT (SELECT count(*) FROM pg_class), pg_size_pretty(pg_total_relation_size('pg_class') "
                "+ pg_total_relation_size('pg_attribute') + pg_total_relation_size('pg_index') "
                "+ pg_total_relation_size('pg_depend') + pg_total_relation_size('pg_inherits')), "
                "pg_size_pretty(pg_database_size(current_database()))").fetchone()
            row: dict[str, Any] = {
                "tenants": have,
                "create_s_per_tenant": {"median": round(statistics.median(times), 4), "max": round(max(times), 4)} if times else None,
                "pg_class_rows": catalog[0], "catalog_size": catalog[1], "database_size": catalog[2],  # type: ignore[index]
                "memory": server_memory(args.data_dir),
                "locks_pruned_bm25": relation_locks(conn, f"SELECT chunk_id FROM proto_p{keys[0]} ORDER BY content <@> "
                                                          f"to_bm25query('w1 w2', 'proto_p{keys[0]}_content_idx') LIMIT 30"),
                "locks_generic_plan": generic_locks,
            }
            for name, xs in plans.items():
                row[f"{name}_plan_ms"] = round(statistics.median(p for p, _ in xs), 3)
                row[f"{name}_exec_ms"] = round(statistics.median(e for _, e in xs), 3)
            report["steps"].append(row)
            print(json.dumps(row), file=sys.stderr)
        # per-partition statistics: a word 5 rows of tenant 2 hold, scored there before and after tenant 1
        # adds 500 rows with it (tenant 2: not the first partition)
        conn.execute("INSERT INTO proto (tenant_key, chunk_id, content) SELECT 2, 'x' || g, 'zebra' FROM generate_series(1, 5) g")
        q2 = "SELECT content <@> to_bm25query('zebra', 'proto_p2_content_idx') FROM proto_p2 ORDER BY 1 LIMIT 1"
        s1 = conn.execute(q2).fetchone()
        conn.execute("INSERT INTO proto (tenant_key, chunk_id, content) SELECT 1, 'x' || g, 'zebra' FROM generate_series(1, 500) g")
        s1b = conn.execute(q2).fetchone()
        report["bm25_per_partition"] = {"tenant2_score_before": s1[0], "tenant2_score_after_tenant1_adds_500": s1b[0]}  # type: ignore[index]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# A partition per tenant: scale on this machine", "",
             f"Prototype table, {args.rows} rows per partition, HNSW + BM25 + GIN + btree per partition; "
             f"server settings {settings}.", "",
             "| tenants | create s/tenant (median, max) | pg_class rows | catalogs | database | server RSS / PSS MB | "
             "dense plan / exec ms | bm25 plan / exec ms | ts_rank plan / exec ms | locks (pruned) | locks (generic plan) |",
             "|---:|---|---:|---|---|---|---|---|---|---:|---|"]
    for r in report["steps"]:
        cs = r["create_s_per_tenant"]
        lines.append(f"| {r['tenants']} | {cs['median'] if cs else '-'}, {cs['max'] if cs else '-'} | {r['pg_class_rows']} | "
                     f"{r['catalog_size']} | {r['database_size']} | {r['memory']['rss_mb']} / {r['memory']['pss_mb']} | "
                     f"{r['dense_plan_ms']} / {r['dense_exec_ms']} | {r['bm25_plan_ms']} / {r['bm25_exec_ms']} | "
                     f"{r['ts_rank_plan_ms']} / {r['ts_rank_exec_ms']} | {r['locks_pruned_bm25']} | {r['locks_generic_plan']} |")
    b = report["bm25_per_partition"]
    lines += ["", f"BM25 statistics per partition: tenant 2's top score for 'zebra' {b['tenant2_score_before']:.4f} before, "
                  f"{b['tenant2_score_after_tenant1_adds_500']:.4f} after tenant 1 added 500 documents holding it."]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
