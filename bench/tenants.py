"""How the engine scales in tenants (pooled, or a partition of hybrid.chunk each); bench/README.md, docs/benchmarks.md.

At each of --steps tenant counts: create_tenant (--placement) and ingest (--rows each, or --zipf sizes with the
--large-rows tenants first), the due tenants moved to partitions of their own, catalogs, memory, cold and warm
retrieval of pooled and dedicated tenants, locks, drop_tenant and every admin command timed (admin_commands). A
failing step records its error and ends the run; --budget-min bounds tenant creation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
from psycopg import conninfo

from _common import (ROOT, ensure_role, fresh_database, installed_versions, pct, server_processes, start_meta,
                     unit_vectors, write_result)
from latency import World, make_tenant
from pyhybrid import Chunk, HybridClient, connect, doctor, maintenance, migrate
from pyhybrid.server import start_embedded
from pyhybrid.transfer import export_tenant, import_tenant

DB = "bench_tenants"
APP = "bt_app"
WORDS = [f"w{i}" for i in range(200)]
WORDS_PER_CHUNK = 24
LOCKS_SQL = ("SELECT relation::regclass::text AS rel, mode FROM pg_locks "
             "WHERE pid = pg_backend_pid() AND locktype = 'relation'")


def stats_s(xs: list[float], ms: bool = False) -> dict[str, float] | None:
    """n, median, p95, max, mean of seconds (4 digits); with ms, the first four in milliseconds (2 digits)."""
    if not xs:
        return None
    v, d = ([x * 1000 for x in xs], 2) if ms else (xs, 4)
    out = {"n": len(v), "median": round(statistics.median(v), d), "p95": round(pct(v, 95), d), "max": round(max(v), d)}
    return out if ms else {**out, "mean": round(statistics.fmean(v), d)}


def server_memory(data_dir: Path) -> dict[str, Any]:
    """Summed RSS / PSS of the server's processes."""
    rss = pss = 0
    procs = server_processes(data_dir)
    for p in procs:
        with suppress(psutil.Error):
            m = p.memory_full_info()
            rss, pss = rss + m.rss, pss + getattr(m, "pss", 0)
    return {"rss_mb": round(rss / 2**20, 1), "pss_mb": round(pss / 2**20, 1), "processes": len(procs)}


def make_chunks(tid: str, rows: int, rng: np.random.Generator, world: World | None = None) -> list[Chunk]:
    """200 words, isotropic vectors; with world (--large-rows tenants) latency.py's topics, as tools/largest_tenants.py's."""
    if world is not None:
        td = make_tenant(world, tid, rows, rng)
        return [Chunk(chunk_id=c, document_id=d, position=int(p), content=x, embedding=v)
                for c, d, p, x, v in zip(td.chunk_ids, td.doc_ids, td.positions, td.texts, td.vectors)]
    vecs = unit_vectors(rng, rows)
    return [Chunk(chunk_id=f"{tid}-c{i:04d}", document_id=f"{tid}-d{i // 5:04d}", position=i % 5,
                  content=" ".join(rng.choice(WORDS, WORDS_PER_CHUNK)), embedding=vecs[i])
            for i in range(rows)]


def error_text(exc: BaseException) -> str:
    sqlstate = getattr(exc, "sqlstate", None) or getattr(exc.__cause__ or exc.__context__, "sqlstate", None)
    return f"{type(exc).__name__}{f' [{sqlstate}]' if sqlstate else ''}: {str(exc).strip()}"


def catalog_facts(admin: psycopg.Connection[Any]) -> dict[str, Any]:
    row = admin.execute(
        "SELECT (SELECT count(*) FROM pg_class), "
        "(SELECT count(*) FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass), "
        "(SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relnamespace = 'pg_catalog'::regnamespace "
        "AND c.relkind = 'r'), pg_database_size(current_database())").fetchone()
    top = admin.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c WHERE c.relnamespace = 'pg_catalog'::regnamespace "
        "AND c.relkind = 'r' ORDER BY 2 DESC LIMIT 5").fetchall()
    # the database's bytes per chunk over those of the largest partition (its indexes too): the same chunks in one tenant
    big = admin.execute("SELECT c.oid::regclass::text, pg_total_relation_size(c.oid) FROM pg_inherits i JOIN pg_class c "
                        "ON c.oid = i.inhrelid WHERE i.inhparent = 'hybrid.chunk'::regclass AND c.relkind = 'r' "
                        "ORDER BY 2 DESC LIMIT 1").fetchone()
    per = [int(row[3]) / max(1, admin.execute("SELECT count(*) FROM hybrid.chunk").fetchone()[0])]  # type: ignore[index]
    if big:
        per.append(int(big[1]) / max(1, admin.execute(f"SELECT count(*) FROM {big[0]}").fetchone()[0]))  # type: ignore[index]
    return {"pg_class_rows": int(row[0]), "partitions": int(row[1]), "catalog_mb": round(int(row[2]) / 2**20, 1),
            "database_mb": round(int(row[3]) / 2**20, 1), "bytes_per_chunk": round(per[0]),
            "size_ratio_vs_one_tenant": {"ratio": round(per[0] / per[1], 2), "partition": big[0],
                                         "its_bytes_per_chunk": round(per[1])} if big else None,
            "largest_catalogs_mb": {r[0]: round(int(r[1]) / 2**20, 1) for r in top}}


def retrieve_kwargs(rng: np.random.Generator) -> dict[str, Any]:
    return {"query_embedding": unit_vectors(rng, 1)[0], "query_text": " ".join(rng.choice(WORDS, 3)),
            "top_k": 10, "lexical": "bm25"}


def timed_retrieve(client: Any, tid: str, rng: np.random.Generator) -> float:
    """Seconds of one retrieval for tid (its arguments drawn before the clock starts)."""
    kw = retrieve_kwargs(rng)
    t0 = time.perf_counter()
    with client.tenant(tid) as t:
        t.retrieve(**kw)
    return time.perf_counter() - t0


def measure_tenant(dsn: str, admin: psycopg.Connection[Any], tid: str, calls: int,
                   rng: np.random.Generator) -> dict[str, Any]:
    """A fresh connection as tid's login role: its first retrieval, then `calls` more; locks; backend USS."""
    role = "bt_r_" + tid
    ensure_role(admin, role)
    admin.execute("SELECT hybrid.grant_tenant(%s, %s)", (role, tid))
    t0 = time.perf_counter()
    client = connect(conninfo.make_conninfo(dsn, user=role)).open()
    connect_s = time.perf_counter() - t0
    try:
        cold_s = timed_retrieve(client, tid, rng)
        warm = [timed_retrieve(client, tid, rng) for _ in range(calls)]
        with client.tenant(tid) as t:
            base = t.conn.execute(LOCKS_SQL).fetchall()
        with client.tenant(tid) as t:
            refs = t.retrieve(**retrieve_kwargs(rng))
            held = t.conn.execute(LOCKS_SQL).fetchall()
            pid = t.conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
        uss_mb = None
        with suppress(psutil.Error):
            uss_mb = round(psutil.Process(pid).memory_full_info().uss / 2**20, 1)
    finally:
        client.close()
    partitions = sorted({r["rel"] for r in held if re.fullmatch(r"hybrid\.chunk_p\d+", r["rel"])})
    return {"tenant": tid, "connect_s": connect_s, "cold_s": cold_s, "warm_s": warm,
            "rows": len(refs),
            "rows_with_keyword_rank": sum(1 for r in refs if getattr(r, "keyword_rank", None) is not None),
            "rows_with_vector_rank": sum(1 for r in refs if getattr(r, "vector_rank", None) is not None),
            "locks_held": len(held), "locks_baseline": len(base), "locks_retrieve": len(held) - len(base),
            "partitions_locked": partitions, "relations_locked": sorted({r["rel"] for r in held}),
            "backend_uss_mb": uss_mb}


def tenant_sizes(args: argparse.Namespace, n: int, rng: np.random.Generator) -> list[int]:
    """Chunks per tenant: --rows, or --zipf: a Pareto tail (5 to --max-rows, mean ~20) after the --large-rows ones."""
    if args.zipf is None:
        return [args.rows] * n
    tail = np.minimum(args.max_rows, np.ceil(5 * (1 + rng.pareto(args.zipf, n)))).astype(int).tolist()
    return (list(args.large_rows) + tail)[:n]


def admin_commands(dsn: str, created: list[str], rng: np.random.Generator) -> dict[str, Any]:
    """Each admin command once, its seconds (or its error): listings, doctor, re-apply, export, import, drop."""
    out: dict[str, Any] = {}
    tid = created[int(rng.integers(len(created)))]

    def timed(name: str, fn: Any) -> None:
        t0 = time.perf_counter()
        try:
            fn()
            out[name] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # record it, go on
            out[name] = {"s": round(time.perf_counter() - t0, 3), "error": error_text(exc)}

    with HybridClient(dsn) as admin, psycopg.connect(dsn, autocommit=True) as conn, tempfile.TemporaryDirectory() as tmp:
        timed("tenant_list_paged", admin.tenants)
        timed("tenants_one_statement", lambda: conn.execute("SELECT count(*) FROM hybrid.tenants()").fetchone())
        timed("doctor", lambda: list(doctor.check(conn)))
        timed("migrate_reapply", lambda: migrate.upgrade(dsn, reapply=True))
        timed("bm25_stats_drift", lambda: conn.execute("SELECT count(*) FROM hybrid.bm25_stats_drift()").fetchone())
        timed("refresh_audit_samples", lambda: conn.execute("SELECT count(*) FROM hybrid.refresh_audit_samples()").fetchone())
        timed("count_all_chunks", lambda: conn.execute("SELECT count(*) FROM hybrid.chunk").fetchone())
        timed("export_tenant", lambda: export_tenant(admin, tid, Path(tmp) / "t.jsonl"))
        timed("import_tenant", lambda: import_tenant(admin, Path(tmp) / "t.jsonl", tid + "-copy"))
        timed("drop_tenant", lambda: admin.drop_tenant(tid + "-copy"))
        timed("pool_due", admin.pool_due)
    return out


def measure_step(args: argparse.Namespace, dsn: str, admin: psycopg.Connection[Any], have: int,
                 created: list[str], rng: np.random.Generator, out: dict[str, Any]) -> None:
    """Fills out as it goes (what was measured before an error stays)."""
    out.update(catalog_facts(admin))
    out["memory"] = server_memory(args.data_dir)
    # the sample: the first and the last created, and random others
    n = min(args.sample, have)
    idx = [0, have - 1] if have > 1 else [0]
    others = list(range(1, have - 1))
    idx += sorted(int(i) for i in rng.choice(others, size=min(len(others), n - len(idx)), replace=False)) if n > len(idx) else []
    sample = [created[i] for i in idx]
    per = [measure_tenant(dsn, admin, tid, args.calls, rng) for tid in sample]
    pooled = {r[0] for r in admin.execute("SELECT tenant_id FROM hybrid.tenant WHERE tenant_key >= 1073741824 "
                                          "AND tenant_id = ANY(%s)", (sample,)).fetchall()}
    out["memory_after_queries"] = server_memory(args.data_dir)
    each: dict[str, list[Any]] = {k: [p[k] for p in per] for k in per[0]}
    uss = [x for x in each["backend_uss_mb"] if x is not None]
    out["retrieve"] = {
        "sampled": len(per), "calls_per_tenant": args.calls,
        "connect_ms": stats_s(each["connect_s"], ms=True), "cold_ms": stats_s(each["cold_s"], ms=True),
        "warm_ms": stats_s([x for p in per for x in p["warm_s"]], ms=True),
        "warm_ms_first_tenant": stats_s(per[0]["warm_s"], ms=True),
        **{f"{k}_ms_{where}": stats_s([x for p in per if (p["tenant"] in pooled) == (where == "pooled")
                                       for x in (p[f"{k}_s"] if k == "warm" else [p[f"{k}_s"]])], ms=True)
           for k in ("warm", "cold") for where in ("pooled", "dedicated")},
        "rows_min": min(each["rows"]), "rows_with_keyword_rank_min": min(each["rows_with_keyword_rank"]),
        "rows_with_vector_rank_min": min(each["rows_with_vector_rank"]),
        "locks_retrieve": sorted(set(each["locks_retrieve"])), "locks_held": sorted(set(each["locks_held"])),
        "locks_baseline": sorted(set(each["locks_baseline"])),
        "partitions_locked_max": max(len(x) for x in each["partitions_locked"]),
        "relations_locked_example": per[-1]["relations_locked"],
        "backend_uss_mb_median": statistics.median(uss) if uss else None,
        "per_tenant": [{k: (round(v, 4) if isinstance(v, float) else [round(x, 4) for x in v] if k == "warm_s" else v)
                        for k, v in p.items() if k != "relations_locked"} for p in per],
    }
    out["admin_s"] = admin_commands(dsn, created, rng)
    if args.drops:
        pool = [t for t in created if t not in set(sample)]
        victims = [pool[int(i)] for i in rng.choice(len(pool), size=min(args.drops, len(pool)), replace=False)] if pool else []
        drops: list[dict[str, Any]] = []  # in out as it fills
        out["drop_tenant_with_chunks"] = drops
        for tid in victims:
            t0 = time.perf_counter()
            try:
                removed = admin.execute("SELECT what, removed FROM hybrid.drop_tenant(%s)", (tid,)).fetchall()
                drops.append({"tenant": tid, "s": round(time.perf_counter() - t0, 4), "removed": dict(removed)})
                created.remove(tid)
            except psycopg.Error as exc:
                drops.append({"tenant": tid, "s": round(time.perf_counter() - t0, 4), "error": error_text(exc)})


class Filler:
    """Creates and fills tenants on --workers threads (a connection each); with --place-at-create, a tenant planned past
    pool_max_chunks starts dedicated. one() returns (create s, ingest s), or a RuntimeError(during) from a failure."""

    def __init__(self, dsn: str, app_dsn: str, args: argparse.Namespace) -> None:
        self.dsn, self.app_dsn, self.args, self.local = dsn, app_dsn, args, threading.local()
        self.conns: list[Any] = []
        self.pool, self.world = ThreadPoolExecutor(args.workers), World(args.seed)
        with psycopg.connect(dsn) as c:
            self.limit = int(c.execute("SELECT coalesce((SELECT value::int FROM hybrid.setting "
                                       "WHERE key = 'pool_max_chunks'), 2000)").fetchone()[0])  # type: ignore[index]

    def close(self) -> None:
        self.pool.shutdown()
        for c in self.conns:
            c.close()

    def one(self, job: tuple[str, int]) -> tuple[float, float] | BaseException:
        tid, rows = job
        if not hasattr(self.local, "app"):
            self.local.admin, self.local.app = psycopg.connect(self.dsn, autocommit=True), connect(self.app_dsn).open()
            self.conns += [self.local.admin, self.local.app]
        during = "create_tenant"
        try:
            placement = "dedicated" if self.args.place_at_create and rows > self.limit else self.args.placement
            t0 = time.perf_counter()
            self.local.admin.execute("SELECT hybrid.create_tenant(%s, NULL, %s)", (tid, placement))
            create_s, during = time.perf_counter() - t0, "ingest"
            chunks = make_chunks(tid, rows, np.random.default_rng([self.args.seed, int(tid[1:])]),
                                 self.world if int(tid[1:]) <= len(self.args.large_rows) else None)
            t0 = time.perf_counter()
            with self.local.app.tenant(tid) as t:
                res = t.ingest(chunks, corpus_id="main")
            assert res.inserted == len(chunks), res
            return create_s, time.perf_counter() - t0
        except Exception as exc:
            traceback.print_exc()
            err = RuntimeError(during)
            err.__cause__ = exc
            return err


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 100, 1000, 10000])
    ap.add_argument("--rows", type=int, default=20, help="chunks per tenant")
    ap.add_argument("--placement", choices=["pool", "dedicated"], default="pool", help="where new tenants go")
    ap.add_argument("--zipf", type=float, default=None, help="tenant sizes from a Pareto tail of this alpha (1.35)")
    ap.add_argument("--large-rows", type=int, nargs="*", default=[], help="sizes of the first tenants, with --zipf")
    ap.add_argument("--max-rows", type=int, default=5000, help="the Pareto tail's largest size")
    ap.add_argument("--sample", type=int, default=20, help="tenants whose retrieval is measured at each step")
    ap.add_argument("--calls", type=int, default=5, help="warm retrievals per sampled tenant")
    ap.add_argument("--drops", type=int, default=2, help="tenants holding chunks dropped at each step (hybrid.drop_tenant)")
    ap.add_argument("--budget-min", type=float, default=90.0, help="stop creating tenants after this many minutes")
    ap.add_argument("--workers", type=int, default=1, help="threads creating and filling tenants")
    ap.add_argument("--place-at-create", action="store_true", help="tenants planned past pool_max_chunks start dedicated")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-tenants"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tenants.json")
    args = ap.parse_args(argv)
    meta = start_meta("tenants", argv)
    t_all = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    server = start_embedded(args.data_dir)
    fresh_database(server, DB, APP)
    with psycopg.connect(server, autocommit=True) as c:
        settings = {r[0]: r[1] for r in c.execute(  # current_setting: 128MB, not the setting 16384 and the unit 8kB
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('max_locks_per_transaction', 'max_connections', "
            "'shared_buffers', 'dynamic_shared_memory_type', 'min_dynamic_shared_memory', 'work_mem') "
            "OR name LIKE 'pg_textsearch%' ORDER BY name").fetchall()}
    dsn = conninfo.make_conninfo(server, dbname=DB)
    app_dsn = conninfo.make_conninfo(dsn, user=APP)
    migrate.upgrade(dsn)
    report: dict[str, Any] = {
        "settings": settings,
        "config": {k: v for k, v in vars(args).items() if k not in ("data_dir", "out")},
        "steps": [], "series": {"create_s": [], "ingest_s": []},
    }
    created: list[str] = []
    sizes = tenant_sizes(args, max(args.steps) + args.drops * len(args.steps), rng)
    series: dict[str, list[float]] = report["series"]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT hybrid.grant_app(%s)", (APP,))
        report["versions"] = installed_versions(dsn)
        fill = Filler(dsn, app_dsn, args)
        t_create_start = time.perf_counter()
        have = next_id = 0  # have: live tenants (drops at each step lower it)
        steps = sorted(args.steps)
        for step in steps:
            creates, ingests, stop = [], [], False
            while have < step and not stop:
                if (time.perf_counter() - t_create_start) / 60 > args.budget_min:
                    report["stopped_by_budget"] = {"budget_min": args.budget_min, "tenants_reached": have, "step_asked": step}
                    stop = True
                    break
                batch = [(f"t{i + 1:05d}", sizes[i]) for i in range(next_id, next_id + min(250, step - have))]
                for tid, res in zip([b[0] for b in batch], fill.pool.map(fill.one, batch)):
                    if isinstance(res, BaseException):  # record it; measure what exists and stop
                        report["failure"] = {"tenants_reached": have, "tenant": tid, "during": res.args[0],
                                             "error": error_text(res.__cause__ or res)}
                        stop = True
                        break
                    have, next_id = have + 1, next_id + 1
                    created.append(tid)
                    for into, key, v in ((creates, "create_s", res[0]), (ingests, "ingest_s", res[1])):
                        into.append(v)
                        series[key].append(round(v, 4))
                print(f"{have} tenants, {(time.perf_counter() - t_create_start) / 60:.1f} min: last 250 create median "
                      f"{statistics.median(series['create_s'][-250:] or [0]):.3f} s, ingest median "
                      f"{statistics.median(series['ingest_s'][-250:] or [0]):.3f} s", file=sys.stderr, flush=True)
            if have == 0 or (report["steps"] and report["steps"][-1]["tenants_after_drops"] == have):
                break
            row: dict[str, Any] = {"tenants": have, "chunks": sum(sizes[:next_id]), "create_s": stats_s(creates),
                                   "ingest_s": stats_s(ingests)}
            t_p = time.perf_counter()
            row["placed"] = len(maintenance.place_tenants(dsn))  # the due tenants to partitions of their own
            row["place_s"], t_m = round(time.perf_counter() - t_p, 3), time.perf_counter()
            try:
                measure_step(args, dsn, admin, have, created, rng, row)
            except Exception as exc:
                traceback.print_exc()
                row["measure_error"] = error_text(exc)
                report.setdefault("failure", {"tenants_reached": have, "tenant": None, "during": "measuring",
                                              "error": error_text(exc)})
                stop = True
            have = len(created)
            row.update(tenants_after_drops=have, measure_s=round(time.perf_counter() - t_m, 1), loadavg=[
                round(x, 2) for x in os.getloadavg()], elapsed_min=round((time.perf_counter() - t_all) / 60, 1))
            report["steps"].append(row)
            write_result(args.out, meta, report)
            rt = row.get("retrieve", {})
            print(json.dumps({"tenants": row.get("tenants"), "create_s": row.get("create_s"), "warm_ms": rt.get("warm_ms"),
                              "cold_ms": rt.get("cold_ms"), "measure_s": row.get("measure_s")}), file=sys.stderr, flush=True)
            if stop:
                break
        fill.close()
    write_result(args.out, meta, report)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
