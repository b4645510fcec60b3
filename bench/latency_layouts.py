"""Side-by-side latency of two tenant layouts that bench/latency.py --keep-db left (e.g. 1M chunks over 100
and over 1,000 tenants), measured alternately in one process so background load hits both alike.

Each layout is a data directory of the embedded server holding the database bench_latency_<size> that
`latency.py --sizes <size> --tenants <n> --keep-db --data-dir <dir>` built with the same --seed. The tenants
nearest each --picks row share are regenerated (the same generator and seed as latency.py, so the same
chunks and vectors as loaded), and for each query index i the layouts take turns (the first of them
alternates with i), each running every method (order rotated per query) for each picked tenant, as the app
role under RLS, with latency.py's Runner. Queries are drawn per pick label from a generator seeded by
(--seed, label), so a tenant whose data is the same in both layouts (t000, the 50% tenant: it is generated
first) gets the same queries in both. Reported per layout, tenant and method: p50/p95/p99, and the ratio
layout B / layout A of each with a bootstrap 95% interval (query indices resampled, paired), plus the median
of the per-query ratios; dense recall@10 of hybrid.search_dense against exact numpy search.

    python bench/latency_layouts.py --size 1000000 --layout 100t /tmp/d100 100 --layout 1000t /tmp/d1000 1000 \\
        --queries 400 --out bench/results/latency_1m_tenants_side_by_side.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402

from pyhybrid import connect  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

METHODS = ["dense", "lexical_bm25", "graph", "hybrid_retrieve"]


def regenerate(seed: int, size: int, n_tenants: int, picks: list[float]) -> dict[str, L.TenantData]:
    """The picked tenants' data exactly as latency.py generated it (tenants are drawn in order from one stream)."""
    L.N_TENANTS = n_tenants
    sizes = L.tenant_sizes(size)
    chosen = L.choose_picks(sizes, picks)
    last = max(i for _, i in chosen)
    world = L.World(seed)
    rng = np.random.default_rng(seed + size)
    out: dict[str, L.TenantData] = {}
    want = {i: lb for lb, i in chosen}
    for i in range(last + 1):
        td = L.make_tenant(world, L.tenant_name(i), sizes[i], rng)
        if i in want:
            out[want[i]] = td
    return dict(sorted(out.items(), key=lambda kv: len(kv[1].chunk_ids)))


def ratio_ci(a: list[float], b: list[float], q: float, rng: np.random.Generator, n_boot: int = 2000) -> list[float]:
    """Bootstrap 95% interval of pct(b, q) / pct(a, q), query indices resampled jointly (paired)."""
    A, B = np.asarray(a), np.asarray(b)
    n = min(len(A), len(B))
    A, B = A[:n], B[:n]
    idx = rng.integers(0, n, size=(n_boot, n))
    r = np.percentile(B[idx], q, axis=1) / np.percentile(A[idx], q, axis=1)
    return [round(float(np.percentile(r, 2.5)), 3), round(float(np.percentile(r, 97.5)), 3)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--layout", nargs=3, action="append", metavar=("NAME", "DATA_DIR", "TENANTS"), required=True,
                    help="twice: the baseline (A) first, then the layout compared with it (B)")
    ap.add_argument("--picks", type=float, nargs="+", default=[0.5, 0.01, 0.001])
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wait-pid", type=int, default=None,
                    help="after regenerating the data, wait for this process (e.g. the latency.py run building a "
                         "layout) to end before connecting")
    args = ap.parse_args(argv)
    if len(args.layout) != 2:
        ap.error("--layout twice")

    t_all = time.perf_counter()
    layouts: list[dict[str, Any]] = []
    generated: list[dict[str, L.TenantData]] = []
    for name, data_dir, n in args.layout:
        t0 = time.perf_counter()
        generated.append(regenerate(args.seed, args.size, int(n), args.picks))
        print(f"{name}: regenerated {', '.join(f'{lb} {td.tenant_id} ({len(td.chunk_ids)})' for lb, td in generated[-1].items())}"
              f" in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.wait_pid:
        print(f"waiting for pid {args.wait_pid}", file=sys.stderr)
        while True:
            try:
                os.kill(args.wait_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(5)
    for (name, data_dir, n), tds in zip(args.layout, generated):
        admin = start_embedded(Path(data_dir))
        db = f"bench_latency_{args.size}"
        import psycopg
        with psycopg.connect(L.dsn_for(admin, db)) as conn:
            live = dict(conn.execute("SELECT tenant_id, count(*) FROM hybrid.chunk WHERE NOT superseded "
                                     "AND tenant_id = ANY(%s) GROUP BY 1", ([td.tenant_id for td in tds.values()],)).fetchall())
            n_tenants_db = conn.execute("SELECT count(*) FROM hybrid.tenant").fetchone()[0]
            n_chunks_db = conn.execute("SELECT count(*) FROM hybrid.chunk WHERE NOT superseded").fetchone()[0]
        for lb, td in tds.items():
            assert live.get(td.tenant_id) == len(td.chunk_ids), (name, lb, td.tenant_id, live.get(td.tenant_id))
        layouts.append({"name": name, "data_dir": data_dir, "tenants": int(n), "tenants_in_db": n_tenants_db,
                        "chunks_in_db": n_chunks_db, "client": connect(L.dsn_for(admin, db, L.APP_ROLE)), "tds": tds,
                        "admin_dsn": admin})
    labels = list(layouts[0]["tds"])
    assert labels == list(layouts[1]["tds"])

    # queries per label, the same generator for both layouts
    queries: dict[str, list[list[L.Query]]] = {}
    world = L.World(args.seed)
    for lb in labels:
        per_layout = []
        for lay in layouts:
            rng = np.random.default_rng([args.seed, zlib.crc32(lb.encode())])
            per_layout.append(L.make_queries(world, lay["tds"][lb], args.queries + args.warmup, rng))
        queries[lb] = per_layout

    runners = [{lb: L.Runner(lay["client"], lay["tds"][lb].tenant_id) for lb in labels} for lay in layouts]
    ms = [{lb: {m: [] for m in METHODS} for lb in labels} for _ in layouts]
    rows = [{lb: {m: [] for m in METHODS} for lb in labels} for _ in layouts]
    load: list[float] = []
    t_q = time.perf_counter()
    for i in range(args.queries + args.warmup):
        if i % 50 == 0:
            load.append(os.getloadavg()[0])
            print(f"query {i}/{args.queries + args.warmup} ({time.perf_counter() - t_q:.0f} s)", file=sys.stderr)
        for k in ([0, 1] if i % 2 == 0 else [1, 0]):
            for lb in labels:
                q = queries[lb][k][i]
                order = METHODS[i % len(METHODS):] + METHODS[: i % len(METHODS)]
                for m in order:
                    el, n = getattr(runners[k][lb], m)(q)
                    if i >= args.warmup:
                        ms[k][lb][m].append(el * 1000.0)
                        rows[k][lb][m].append(n)
    queries_s = time.perf_counter() - t_q

    # dense recall@10 (after the timing, so it does not sit between the timed calls)
    recall: list[dict[str, Any]] = [{} for _ in layouts]
    for k, lay in enumerate(layouts):
        for lb in labels:
            td = lay["tds"][lb]
            ids = np.array(td.chunk_ids, dtype=object)
            rs = []
            for q in queries[lb][k][args.warmup:]:
                sims = td.vectors @ (q.vector / np.linalg.norm(q.vector))
                kk = min(L.TOP_K, len(ids))
                exact = set(ids[np.argpartition(-sims, kk - 1)[:kk]])
                got = runners[k][lb].dense_ids(q)
                rs.append(len(exact & set(got[:kk])) / kk)
            recall[k][lb] = {"search_dense_mean": round(statistics.fmean(rs), 4), "min": round(min(rs), 4),
                             "p05": round(L.pct(rs, 5), 4), "zero_recall_queries": sum(1 for r in rs if r == 0)}

    brng = np.random.default_rng(1)
    A, B = layouts
    result: dict[str, Any] = {
        "command": (f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else "")
        + "python " + " ".join([os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]),
        "date": L.dt.datetime.now(L.dt.timezone.utc).isoformat(timespec="seconds"),
        "engine": L.engine_state(),
        "size": args.size, "seed": args.seed, "queries": args.queries, "warmup": args.warmup,
        "loadavg_samples_1min": [round(x, 2) for x in load],
        "queries_s": round(queries_s, 1),
        "layouts": [{k: v for k, v in lay.items() if k not in ("client", "tds", "admin_dsn")}
                    | {"picked": {lb: {"tenant_id": td.tenant_id, "chunks": len(td.chunk_ids)} for lb, td in lay["tds"].items()}}
                    for lay in layouts],
        "latency": {},
    }
    for lb in labels:
        entry: dict[str, Any] = {}
        for m in [*METHODS, "branch_sum"]:
            if m == "branch_sum":
                a = [x + y + z for x, y, z in zip(ms[0][lb]["dense"], ms[0][lb]["lexical_bm25"], ms[0][lb]["graph"])]
                b = [x + y + z for x, y, z in zip(ms[1][lb]["dense"], ms[1][lb]["lexical_bm25"], ms[1][lb]["graph"])]
                ra = rb = []
            else:
                a, b, ra, rb = ms[0][lb][m], ms[1][lb][m], rows[0][lb][m], rows[1][lb][m]
            sa, sb = L.summarize(a, ra), L.summarize(b, rb)
            entry[m] = {
                A["name"]: sa, B["name"]: sb,
                "ratio": {f"p{q}": round(sb[f"p{q}_ms"] / sa[f"p{q}_ms"], 3) for q in (50, 95, 99)},
                "ratio_ci95": {f"p{q}": ratio_ci(a, b, q, brng) for q in (50, 95)},
                "median_per_query_ratio": round(float(np.median(np.asarray(b) / np.asarray(a))), 3),
            }
        entry["recall_at_10"] = {A["name"]: recall[0][lb], B["name"]: recall[1][lb]}
        entry["tenants"] = {A["name"]: f"{A['tds'][lb].tenant_id} ({len(A['tds'][lb].chunk_ids)} chunks)",
                            B["name"]: f"{B['tds'][lb].tenant_id} ({len(B['tds'][lb].chunk_ids)} chunks)"}
        entry["_raw_ms"] = {A["name"]: {m: [round(x, 3) for x in ms[0][lb][m]] for m in METHODS},
                            B["name"]: {m: [round(x, 3) for x in ms[1][lb][m]] for m in METHODS}}
        result["latency"][lb] = entry
    result["wall_s"] = round(time.perf_counter() - t_all, 1)
    for lay in layouts:
        lay["client"].close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(args.out.with_suffix(".md").read_text())
    return 0


def markdown(r: dict[str, Any]) -> str:
    a, b = (lay["name"] for lay in r["layouts"])
    lines = [f"# Side by side: {r['size']:,} chunks, {a} vs {b}", "",
             f"Date {r['date']}; engine git {r['engine']['git_head']}, digest {r['engine']['sql_and_pyhybrid_sha256']}.",
             f"Command: `{r['command']}`.",
             f"{r['queries']} queries per tenant after {r['warmup']} warm-up, the two layouts alternating query by query "
             f"(the first of them alternating too), methods rotated per query; as the app role under RLS. "
             f"Timed part {r['queries_s']:.0f} s; 1-min load average sampled during it: {r['loadavg_samples_1min']}.",
             ""]
    for lay in r["layouts"]:
        lines.append(f"- {lay['name']}: {lay['data_dir']}, {lay['tenants_in_db']:,} tenants, {lay['chunks_in_db']:,} live chunks; "
                     + ", ".join(f"{lb} {p['tenant_id']} ({p['chunks']:,} chunks)" for lb, p in lay["picked"].items()))
    lines += ["", f"Ratio = {b} / {a}; 95% interval by paired bootstrap over queries.", ""]
    for lb, e in r["latency"].items():
        lines += [f"## {lb[:-3]}% tenant: {a} {e['tenants'][a]}, {b} {e['tenants'][b]}", "",
                  f"| method | {a} p50 | p95 | p99 | {b} p50 | p95 | p99 | ratio p50 [95% CI] | ratio p95 [95% CI] | ratio p99 | median per-query ratio |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in [*METHODS, "branch_sum"]:
            x = e[m]
            sa, sb = x[a], x[b]
            lines.append(f"| {L.METHOD_LABELS[m]} | {sa['p50_ms']:.2f} | {sa['p95_ms']:.2f} | {sa['p99_ms']:.2f} | "
                         f"{sb['p50_ms']:.2f} | {sb['p95_ms']:.2f} | {sb['p99_ms']:.2f} | "
                         f"{x['ratio']['p50']:.2f} [{x['ratio_ci95']['p50'][0]:.2f}, {x['ratio_ci95']['p50'][1]:.2f}] | "
                         f"{x['ratio']['p95']:.2f} [{x['ratio_ci95']['p95'][0]:.2f}, {x['ratio_ci95']['p95'][1]:.2f}] | "
                         f"{x['ratio']['p99']:.2f} | {x['median_per_query_ratio']:.2f} |")
        ra, rb = e["recall_at_10"][a], e["recall_at_10"][b]
        lines += ["", f"Dense recall@10 (search_dense vs exact): {a} {ra['search_dense_mean']:.3f} (min {ra['min']:.1f}), "
                      f"{b} {rb['search_dense_mean']:.3f} (min {rb['min']:.1f}).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
