"""Online ingest into a partition whose HNSW graph is dense (m 24, ef_construction 128) against pgvector's default one.

A partition of at least hnsw_dense_rows live chunks gets the denser graph (hybrid._hnsw_density), and every
chunk ingested into it afterwards is inserted into that graph. Two tenants, A and B, on one embedded server
(a database of their own) get the same --base chunks of bench/latency.py's generator, loaded through the
API inside HybridClient(admin).bulk_load() with hnsw_dense_rows above their size, so resume_vector_index
builds both at (16, 64). Both partitions are vacuumed and analyzed; then, hnsw_dense_rows lowered below
their size, B's index alone is rebuilt at (24, 128) by the product's own path
(pyhybrid.maintenance.densify_vector_indexes: ALTER INDEX ... SET, REINDEX INDEX CONCURRENTLY), the
setting is deleted again (the engine's default) and a checkpoint taken.

Then the same --online new chunks go to both through TenantSession.ingest as the app role, with every
index present, in batches of --batch chunks cut at document boundaries: A and B alternate batch by batch,
the order swapped every other round, after --warmup-rounds untimed rounds. Each batch is timed end to
end (tenant transaction, ingest, commit), and within it hybrid.finish_ingest (where the staged rows are
inserted into the partition and its indexes) apart from the rest (payload, COPY into the stage, commit),
by a thin timing wrapper around the session's connection. Afterwards dense recall@10 of
hybrid.search_dense for both tenants on the same queries, against exact numpy search over all the
tenant's vectors.

    python bench/hnsw_insert_cost.py --base 200000 --online 20000 --batch 500 \
        --out bench/results/hnsw_insert_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402  (puts the checkout on sys.path when pyhybrid is not importable)

from pyhybrid import Chunk, connect  # noqa: E402
from pyhybrid.maintenance import densify_vector_indexes  # noqa: E402
from pyhybrid.server import start_embedded, stop_embedded  # noqa: E402

DB = "bench_hnsw_insert_cost"
A, B = "t000", "t001"  # the names latency.setup_database gives two tenants
INDEX_SQL = """SELECT i.relname AS index_name, c.reloptions, pg_relation_size(i.oid) AS bytes, p.relname AS partition,
       (SELECT count(*) FROM hybrid.chunk k WHERE k.tenant_id = %(t)s AND NOT k.superseded) AS live_chunks
FROM pg_class p
JOIN pg_index x ON x.indrelid = p.oid
JOIN pg_inherits h ON h.inhrelid = x.indexrelid AND h.inhparent = 'hybrid.chunk_embedding_hnsw'::regclass
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class c ON c.oid = i.oid
WHERE p.oid = hybrid._chunk_partition(hybrid._tenant_key(%(t)s))"""


def put_setting(conn: psycopg.Connection[Any], key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM hybrid.setting WHERE key = %s", (key,))
    else:
        conn.execute("INSERT INTO hybrid.setting (key, value) VALUES (%s, %s) "
                     "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value))


def part_of(td: L.TenantData, lo: int, hi: int) -> L.TenantData:
    return replace(td, chunk_ids=td.chunk_ids[lo:hi], doc_ids=td.doc_ids[lo:hi], positions=td.positions[lo:hi],
                   clusters=td.clusters[lo:hi], vectors=td.vectors[lo:hi], texts=td.texts[lo:hi])


def doc_boundary(td: L.TenantData, i: int) -> int:
    """The first index >= i that starts a document."""
    while 0 < i < len(td.doc_ids) and td.doc_ids[i] == td.doc_ids[i - 1]:
        i += 1
    return i


def chunks_of(td: L.TenantData, lo: int, hi: int) -> list[Chunk]:
    return [Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j], embedding=td.vectors[j],
                  position=int(td.positions[j]),
                  metadata={"title": f"{td.doc_ids[j]} part {int(td.positions[j])}", "topic": int(td.clusters[j])})
            for j in range(lo, hi)]


class TimedConn:
    """The session's connection, timing the hybrid.finish_ingest statement (a benchmark's device)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.finish_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        cur = self._conn.execute(query, *args, **kwargs)
        if isinstance(query, str) and "finish_ingest" in query:
            self.finish_s += time.perf_counter() - t0
        return cur


def ingest_batch(client: Any, tenant: str, chunks: list[Chunk]) -> dict[str, float]:
    t0 = time.perf_counter()
    with client.tenant(tenant) as t:
        t.conn = timed = TimedConn(t.conn)
        t1 = time.perf_counter()
        r = t.ingest(chunks, corpus_id="main")
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    assert r.inserted == len(chunks) and r.superseded == 0, r
    return {"total_s": t3 - t0, "finish_ingest_s": timed.finish_s, "ingest_call_s": t2 - t1}


def indexes(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Each tenant's partition and HNSW index: reloptions, size, live chunks, and the m and ef_construction
    pgvector wrote in the index's metapage (read from its file after a CHECKPOINT)."""
    conn.execute("CHECKPOINT")
    out = {}
    for label, t in (("A", A), ("B", B)):
        row = conn.execute(INDEX_SQL, {"t": t}).fetchone()
        assert row is not None, t
        (page,) = conn.execute("SELECT pg_read_binary_file(pg_relation_filepath(%s::regclass), 0, 64)",
                               (f"hybrid.{row[0]}",)).fetchone() or (b"",)
        # pgvector 0.8's HnswMetaPageData after the 24-byte page header: magic, version, dimensions, m, ef_construction
        magic, _, dim, m, efc = struct.unpack_from("<IIIHH", page, 24)
        assert magic == 0xA953A953, hex(magic)
        out[label] = {"tenant_id": t, "partition": row[3], "index": row[0], "reloptions": row[1],
                      "metapage": {"m": m, "ef_construction": efc, "dimensions": dim},
                      "index_mb": round(row[2] / 2**20, 1), "live_chunks": row[4]}
    return out


def dist(xs: list[float], nd: int = 1) -> dict[str, float]:
    return {"median": round(statistics.median(xs), nd), "p10": round(L.pct(xs, 10), nd),
            "p90": round(L.pct(xs, 90), nd), "min": round(min(xs), nd), "max": round(max(xs), nd)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=int, default=200_000, help="chunks each tenant holds before the measurement")
    ap.add_argument("--online", type=int, default=20_000, help="chunks each tenant ingests online, measured")
    ap.add_argument("--batch", type=int, default=500, help="chunks per online ingest call")
    ap.add_argument("--warmup-rounds", type=int, default=2, help="untimed A+B rounds of --batch before the measured ones")
    ap.add_argument("--load-batch", type=int, default=10_000, help="chunks per ingest call of the bulk load")
    ap.add_argument("--queries", type=int, default=100, help="recall@10 queries after the ingest (0: skip)")
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/hnsw-insert-cost"))
    ap.add_argument("--stop-server", action="store_true", help="stop the embedded server at the end")
    ap.add_argument("--out", type=Path, default=Path("bench/results/hnsw_insert_cost.json"))
    args = ap.parse_args(argv)
    t_all = time.perf_counter()
    L.N_TENANTS = 2

    admin_dsn = L.configure_server(args.data_dir, start_embedded(args.data_dir))
    res: dict[str, Any] = {
        "command": (f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else "") + "python "
                   + " ".join([os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]),
        "machine": L.machine_info(admin_dsn), "engine_at_start": L.engine_state(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    db_dsn = L.setup_database(admin_dsn, DB)
    app_dsn = L.dsn_for(admin_dsn, DB, L.APP_ROLE)
    res["versions"] = L.installed_versions(db_dsn)

    t0 = time.perf_counter()
    world = L.World(args.seed)
    rng = np.random.default_rng(args.seed + 1)
    warm = args.warmup_rounds * args.batch
    td = L.make_tenant(world, "c", args.base + warm + args.online + 200, rng)
    cut1 = doc_boundary(td, args.base)
    cut2 = doc_boundary(td, cut1 + warm)
    cut3 = doc_boundary(td, cut2 + args.online)
    base, warm_td, online = part_of(td, 0, cut1), part_of(td, cut1, cut2), part_of(td, cut2, cut3)
    res["generate_s"] = round(time.perf_counter() - t0, 1)
    res["chunks"] = {"base": cut1, "warmup": cut2 - cut1, "online": cut3 - cut2}
    print(f"generated {cut3:,} chunks in {res['generate_s']} s: base {cut1:,}, warm-up {cut2 - cut1:,}, "
          f"online {cut3 - cut2:,}", file=sys.stderr)

    timings: dict[str, float] = {}
    with psycopg.connect(db_dsn, autocommit=True) as ctl, connect(db_dsn) as admin, connect(app_dsn) as client:
        # both partitions below hnsw_dense_rows: resume_vector_index builds both at pgvector's (16, 64)
        put_setting(ctl, "hnsw_dense_rows", "999999999999")
        t0 = time.perf_counter()
        with admin.bulk_load():
            for tenant in (A, B):
                for lo, hi in L.doc_batches(base, args.load_batch):
                    with client.tenant(tenant) as t:
                        r = t.ingest(chunks_of(base, lo, hi), corpus_id="main")
                    assert r.inserted == hi - lo and r.superseded == 0, r
                print(f"{tenant}: {cut1:,} chunks loaded ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        timings.update(bulk_load_s=t1 - t0, hnsw_rebuild_both_16_64_s=t2 - t1)
        print(f"HNSW of both rebuilt in {t2 - t1:.0f} s", file=sys.stderr)
        ctl.execute("VACUUM (ANALYZE) hybrid.chunk")  # exact reltuples, read by vector_index_density
        res["indexes_after_bulk_load"] = indexes(ctl)

        # the threshold lowered below both, B alone densified the way pyhybrid doctor --densify does it
        put_setting(ctl, "hnsw_dense_rows", str(cut1 // 2))
        t0 = time.perf_counter()
        done = densify_vector_indexes(db_dsn, tenants=[B])
        timings["densify_b_24_128_s"] = time.perf_counter() - t0
        assert [d.tenant_id for d in done] == [B], done
        put_setting(ctl, "hnsw_dense_rows", None)
        print(f"{B} densified in {timings['densify_b_24_128_s']:.0f} s", file=sys.stderr)
        res["indexes_before_online"] = before = indexes(ctl)
        res["vector_index_density_before_online"] = [
            {k: v for k, v in zip(("tenant_id", "index_name", "live_rows", "m", "ef_construction", "due_m",
                                   "due_ef_construction", "build_memory"), row)}
            for row in ctl.execute("SELECT * FROM hybrid.vector_index_density()").fetchall()]
        assert before["A"]["reloptions"] is None and before["B"]["reloptions"] == ["m=24", "ef_construction=128"], before
        assert [before[x]["metapage"]["m"] for x in "AB"] == [16, 24], before
        print(json.dumps(before), file=sys.stderr)

        # the measurement: the same batches to A and B, alternating, the order swapped every other round
        for lo, hi in L.doc_batches(warm_td, args.batch):
            for tenant in (A, B):
                ingest_batch(client, tenant, chunks_of(warm_td, lo, hi))
        rounds = []
        load = [os.getloadavg()[0]]
        t0 = time.perf_counter()
        for i, (lo, hi) in enumerate(L.doc_batches(online, args.batch)):
            chunks = chunks_of(online, lo, hi)
            order = (A, B) if i % 2 == 0 else (B, A)
            rnd: dict[str, Any] = {"round": i, "chunks": hi - lo, "first": "A" if order[0] == A else "B"}
            for tenant in order:
                rnd["A" if tenant == A else "B"] = {k: round(v, 4) for k, v in ingest_batch(client, tenant, chunks).items()}
            rounds.append(rnd)
            if i % 10 == 9:
                load.append(os.getloadavg()[0])
                print(f"round {i + 1}: {sum(r['chunks'] for r in rounds):,} chunks each "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        timings["online_s"] = time.perf_counter() - t0
        load.append(os.getloadavg()[0])
        res["loadavg_1min_during_online"] = [round(x, 2) for x in load]
        res["rounds"] = rounds
        res["indexes_after_online"] = indexes(ctl)

        # recall@10 of search_dense over everything each tenant now holds (the same for both)
        if args.queries:
            held = part_of(td, 0, cut3)
            queries = L.make_queries(world, held, args.queries, np.random.default_rng(args.seed + 2))
            ids = np.array(held.chunk_ids, dtype=object)
            runs = {A: L.Runner(client, A), B: L.Runner(client, B)}
            rec: dict[str, list[float]] = {A: [], B: []}
            ms: dict[str, list[float]] = {A: [], B: []}
            for j, q in enumerate(queries):
                sims = held.vectors @ (q.vector / np.linalg.norm(q.vector))
                exact = set(ids[np.argpartition(-sims, L.TOP_K - 1)[:L.TOP_K]])
                for tenant in ((A, B) if j % 2 == 0 else (B, A)):
                    tq = time.perf_counter()
                    got = runs[tenant].dense_ids(q, k=L.PER_SOURCE_K)
                    ms[tenant].append((time.perf_counter() - tq) * 1000.0)
                    rec[tenant].append(len(exact & set(got[:L.TOP_K])) / L.TOP_K)
            res["recall_at_10"] = {
                lab: {"queries": len(rec[t]), "mean": round(statistics.fmean(rec[t]), 4), "min": round(min(rec[t]), 4),
                      "zero_recall_queries": sum(1 for r in rec[t] if r == 0),
                      "search_dense_top30_ms_p50": round(L.pct(ms[t], 50), 2)}
                for lab, t in (("A", A), ("B", B))}
    res["timings_s"] = {k: round(v, 1) for k, v in timings.items()}

    summary: dict[str, Any] = {}
    for lab in ("A", "B"):
        rates = [r["chunks"] / r[lab]["total_s"] for r in rounds]
        n = sum(r["chunks"] for r in rounds)
        tot = sum(r[lab]["total_s"] for r in rounds)
        fin = sum(r[lab]["finish_ingest_s"] for r in rounds)
        summary[lab] = {"batches": len(rounds), "chunks": n, "chunks_per_s": dist(rates),
                        "total_s": round(tot, 1), "total_chunks_per_s": round(n / tot, 1),
                        "ms_per_chunk_total": round(1000 * tot / n, 3),
                        "finish_ingest_s": round(fin, 1), "finish_ingest_share": round(fin / tot, 3),
                        "ms_per_chunk_finish_ingest": round(1000 * fin / n, 3),
                        "ms_per_chunk_rest": round(1000 * (tot - fin) / n, 3)}
    paired = [r["B"]["total_s"] / r["A"]["total_s"] for r in rounds]
    paired_fin = [r["B"]["finish_ingest_s"] / r["A"]["finish_ingest_s"] for r in rounds]
    by_first = {f: [r["B"]["total_s"] / r["A"]["total_s"] for r in rounds if r["first"] == f] for f in ("A", "B")}
    summary["B_over_A"] = {
        "median_chunks_per_s": round(summary["B"]["chunks_per_s"]["median"] / summary["A"]["chunks_per_s"]["median"], 3),
        "total_chunks_per_s": round(summary["B"]["total_chunks_per_s"] / summary["A"]["total_chunks_per_s"], 3),
        "batch_time_paired": dist(paired, 3),
        "finish_ingest_time_paired_median": round(statistics.median(paired_fin), 3),
        "batch_time_paired_median_by_first": {f: round(statistics.median(v), 3) for f, v in by_first.items() if v},
        "extra_ms_per_chunk": round(summary["B"]["ms_per_chunk_total"] - summary["A"]["ms_per_chunk_total"], 3),
    }
    res["summary"] = summary
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["engine_at_end"] = L.engine_state()
    res["wall_s"] = round(time.perf_counter() - t_all, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    args.out.with_suffix(".md").write_text(markdown(res))
    print(args.out.with_suffix(".md").read_text())
    if args.stop_server:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        stop_embedded(args.data_dir)
    return 0


def markdown(res: dict[str, Any]) -> str:
    s, c, m = res["summary"], res["chunks"], res["machine"]
    ix = res["indexes_before_online"]
    eng = res["engine_at_start"]

    def dens(lab: str) -> str:
        return ", ".join(ix[lab]["reloptions"]) if ix[lab]["reloptions"] else "none (pgvector's defaults m 16, ef_construction 64)"

    lines = [
        "# Online ingest into a dense HNSW graph (m 24, ef_construction 128) against pgvector's default (16, 64)", "",
        f"`{res['command']}`", "",
        f"{res['machine']['date']}, {m['nproc']} cores ({m['cpu_model']}), {res['versions'].get('postgresql')}, "
        f"pgvector {res['versions'].get('vector')}. Engine: git `{eng['git_head']}` (sql/ + pyhybrid/ digest "
        f"{eng['sql_and_pyhybrid_sha256']}, local changes: {len(eng['local_changes_in_sql_or_pyhybrid'])}; at the end "
        f"`{res['engine_at_end']['git_head']}`, {res['engine_at_end']['sql_and_pyhybrid_sha256']}). "
        f"1-minute load average: {m['loadavg_start'][0]:.2f} at the start, "
        f"{min(res['loadavg_1min_during_online']):.2f} to {max(res['loadavg_1min_during_online']):.2f} during the online "
        f"ingest, {res['loadavg_end'][0]:.2f} at the end (the machine is shared: read the paired ratios). "
        f"Wall time {res['wall_s']:.0f} s.", "",
        f"Two tenants with the same chunks of bench/latency.py's generator: {c['base']:,} loaded through "
        f"`bulk_load()` ({res['timings_s']['bulk_load_s']:.0f} s for both, HNSW rebuild of both at (16, 64) "
        f"{res['timings_s']['hnsw_rebuild_both_16_64_s']:.0f} s), then B's index rebuilt at (24, 128) by "
        f"`densify_vector_indexes` ({res['timings_s']['densify_b_24_128_s']:.0f} s). Then {c['online']:,} new chunks "
        f"each through `TenantSession.ingest` as the app role, every index present, {s['A']['batches']} batches of "
        f"~{res['config']['batch']} (after {c['warmup']:,} untimed warm-up chunks each), A and B alternating, the order "
        f"swapped every other round.", "",
        "| | A | B |", "|---|---|---|",
        f"| HNSW reloptions | {dens('A')} | {dens('B')} |",
        f"| m, ef_construction in the index's metapage | {ix['A']['metapage']['m']}, {ix['A']['metapage']['ef_construction']} | "
        f"{ix['B']['metapage']['m']}, {ix['B']['metapage']['ef_construction']} |",
        f"| live chunks before / after the online ingest | {ix['A']['live_chunks']:,} / "
        f"{res['indexes_after_online']['A']['live_chunks']:,} | {ix['B']['live_chunks']:,} / "
        f"{res['indexes_after_online']['B']['live_chunks']:,} |",
        f"| HNSW index MB before / after | {ix['A']['index_mb']:,} / {res['indexes_after_online']['A']['index_mb']:,} | "
        f"{ix['B']['index_mb']:,} / {res['indexes_after_online']['B']['index_mb']:,} |",
    ]
    for key, label in (("median", "chunks/s per batch, median"), ("p10", "chunks/s per batch, p10"),
                       ("p90", "chunks/s per batch, p90")):
        lines.append(f"| {label} | {s['A']['chunks_per_s'][key]:,} | {s['B']['chunks_per_s'][key]:,} |")
    lines += [
        f"| total: chunks / s | {s['A']['chunks']:,} / {s['A']['total_s']} s = {s['A']['total_chunks_per_s']:,} | "
        f"{s['B']['chunks']:,} / {s['B']['total_s']} s = {s['B']['total_chunks_per_s']:,} |",
        f"| ms per chunk: all / in finish_ingest / the rest | {s['A']['ms_per_chunk_total']} / "
        f"{s['A']['ms_per_chunk_finish_ingest']} / {s['A']['ms_per_chunk_rest']} | {s['B']['ms_per_chunk_total']} / "
        f"{s['B']['ms_per_chunk_finish_ingest']} / {s['B']['ms_per_chunk_rest']} |",
    ]
    if "recall_at_10" in res:
        r = res["recall_at_10"]
        lines.append(f"| search_dense recall@10 after the ingest, {r['A']['queries']} queries: mean (min, queries at 0) | "
                     f"{r['A']['mean']} ({r['A']['min']}, {r['A']['zero_recall_queries']}) | "
                     f"{r['B']['mean']} ({r['B']['min']}, {r['B']['zero_recall_queries']}) |")
        lines.append(f"| search_dense (top 30) p50 ms, those queries | {r['A']['search_dense_top30_ms_p50']} | "
                     f"{r['B']['search_dense_top30_ms_p50']} |")
    ba = s["B_over_A"]
    lines += [
        "", "B / A:", "",
        f"- chunks/s, median batch: {ba['median_chunks_per_s']}; total: {ba['total_chunks_per_s']}",
        f"- batch time B / A, paired by round: median {ba['batch_time_paired']['median']} "
        f"(p10 {ba['batch_time_paired']['p10']}, p90 {ba['batch_time_paired']['p90']}); rounds with A first "
        f"{ba['batch_time_paired_median_by_first'].get('A')}, with B first {ba['batch_time_paired_median_by_first'].get('B')}",
        f"- hybrid.finish_ingest time B / A, paired: median {ba['finish_ingest_time_paired_median']}",
        f"- B costs {ba['extra_ms_per_chunk']} ms more per chunk (totals)", "",
        "finish_ingest is where the staged rows are inserted into the partition with its indexes (HNSW, BM25, "
        "GIN, ...); the rest is the payload, COPY into the stage, the tenant's transaction and its commit.", "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
