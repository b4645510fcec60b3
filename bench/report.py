"""Render bench/RESULTS.md and the latency plot from the stored results: python bench/report.py [--results DIR] [--out FILE]."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
METHODS = {"dense": "(a) search_dense alone", "lexical_bm25": "(a) search_lexical bm25 alone",
           "graph": "(a) search_graph alone", "branch_sum": "(a) sum of the three (per query)",
           "hybrid_retrieve": "(b) hybrid_retrieve", "client_fusion": "(c) 3 calls + client RRF + hydrate",
           "pgvector_rrf_cte": "(d) pgvector-python RRF CTE", "branch_max": "(a) slowest of the three (per query)",
           "aio_one_call": "(e) async read-only session, one call (dense + lexical since graph_decay)",
           "aio_parallel": "(e) the same, parallel=True"}
Table = list[list[Any]]


def md_table(head: list[str], rows: Table) -> list[str]:
    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.3f}" if abs(x) < 1 else f"{x:,.2f}"
        return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else str(x)
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + \
        ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows] + [""]


def provenance(meta: dict[str, Any], name: str) -> list[str]:
    e, m = meta.get("engine", {}), meta.get("machine", {})
    cmd = meta.get("command")
    load = meta.get("loadavg_start")
    lines = [f"Engine pyhybrid {e.get('version', '?')} at git `{e.get('git_head', '?')}`"
             + (f" ({e['note']})" if e.get("note") else "") + f"; machine {m.get('nproc', '?')} cores "
             f"({m.get('cpu_model', '?')}), {m.get('mem_gb', '?')} GB; date {meta.get('date', '?')}"
             + (f"; 1-min load average {load[0]:.2f} at the start (a shared machine)" if load else "")
             + (f"; wall {meta['wall_s']:.0f} s" if meta.get("wall_s") else "") + f". File `results/{name}`.", ""]
    lines += [f"Command: `{cmd}`" if cmd else "Command: not recorded in the result.", ""]
    return lines


def quality(d: dict[str, Any]) -> list[str]:
    names = list(d["datasets"])
    modes = list(d["datasets"][names[0]])
    out: list[str] = []
    for metric in ("ndcg@10", "recall@100", "mrr@10"):
        counts = ", ".join(f"{n} {d['datasets'][n][modes[0]]['queries']} q" for n in names)
        out += [f"**{metric}** ({counts})", ""]
        out += md_table(["mode", *names], [[m, *(d["datasets"][n].get(m, {}).get(metric, "-") for n in names)]
                                           for m in modes])
    if d.get("abstention"):  # quality.py --abstention: each collection a tenant, the others' queries off topic
        out += ["Abstention (`abstain => true` at the floor `hybrid.calibrate_abstention()` stores):", ""]
        out += md_table(["tenant", "floor", "on-topic answered", "off-topic abstained", "off-topic queries",
                         "abstained on-topic with a relevant hit in the top 10"],
                        [[n, a["floor"], a["on_topic_answered"], a["off_topic_abstained"], a["off_topic_queries"],
                          f"{a['abstained_with_a_relevant_hit_in_top_10']} of {a['on_topic_abstained']}"]
                         for n, a in d["abstention"].items()])
    tuned = d.get("tuned", {})
    if tuned:
        out += ["Tuned settings (grid on these same collections: optimistic):", ""]
        out += md_table(["mode", "fusion", "vector_weight", "keyword_weight", "rrf_k", "per_source_k", "grid mean nDCG@10"],
                        [[k, t["fusion"], t["vector_weight"], t["keyword_weight"], t["rrf_k"], t["per_source_k"],
                          t["grid_mean_ndcg@10"]] for k, t in tuned.items()])
    return out


def peers(d: dict[str, Any]) -> list[str]:
    names = list(d["datasets"])
    modes = list(d["datasets"][names[0]]["modes"])

    def cell(n: str, m: str) -> str:
        r = d["datasets"][n]["modes"].get(m)
        if r is None:
            return "-"
        lat = r.get("latency", {}).get("main") or next(iter(r.get("latency", {}).values()), {})
        return f"{r['ndcg@10']:.3f} / {lat.get('p50_ms', '-')} ms"
    return ["nDCG@10 / p50 per call (client side):", ""] + md_table(["mode", *names], [[m, *(cell(n, m) for n in names)]
                                                                                    for m in modes])


def graph_quality(d: dict[str, Any]) -> list[str]:
    out = [f"{d['dataset']}: {d['queries']} judged queries, {d['docs']} docs, {d['edges_load']['edges']:,} edges "
           f"({', '.join(d['edges_load']['rels'])}).", "", "Without the graph (graph_weight 0):", ""]
    out += md_table(["base", "nDCG@10", "recall@100", "MRR@10", "p50 ms"],
                    [[b, r["ndcg@10"], r["recall@100"], r["mrr@10"], r["p50_ms"]] for b, r in d["baselines"].items()])
    grid = d["engine_grid"]
    best = sorted(grid, key=lambda r: -r["delta_ndcg@10"])[:8]
    out += [f"With the graph: {sum(r['delta_ndcg@10'] >= 0 for r in grid)} of {len(grid)} engine settings reach the "
            "nDCG@10 of the same call without it; the best 8 and the named calls:", ""]
    rows = [[r["base"], r["edge_types"], r["graph_expand"], r["graph_weight"], r.get("graph_decay", "-"), r["ndcg@10"],
             r["delta_ndcg@10"], f"{r['wins']}/{r['losses']}", r["p_value"], r["null_delta"]] for r in best]
    rows += [[f"{k}: {r['base']}", r["edge_types"], r["graph_expand"], r["graph_weight"], r.get("graph_decay", "-"),
              r["ndcg@10"], r["delta_ndcg@10"], f"{r['wins']}/{r['losses']}", r["p_value"], r["null_delta"]]
             for k, r in d.get("named_engine", {}).items()]
    return out + md_table(["base", "edge types", "graph_expand", "graph_weight", "graph_decay", "nDCG@10", "delta", "+/-",
                           "p", "random-edges delta"], rows)


def latency(d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for r in d["runs"]:
        picks = r["tenants"].get("picks", {})
        labels = list(r["latency"])
        out += [f"**{r['size']:,} chunks**, {r['tenants']['count']} tenants; measured: "
                + ", ".join(f"{lb} {picks.get(lb, {}).get('tenant_id', '')} ({r['latency'][lb]['chunks']:,} chunks)"
                            for lb in labels)
                + f"; {d['config']['queries']} queries a tenant, methods interleaved; ms end to end from Python.", ""]
        out += md_table(["method", *(f"{lb} {s}" for lb in labels for s in ("p50", "p95", "p99"))],
                        [[METHODS[m], *(r["latency"][lb][m][s] for lb in labels for s in ("p50_ms", "p95_ms", "p99_ms"))]
                         for m in METHODS if m in r["latency"][labels[0]]])
        paired = {lb: raw for lb in labels if (raw := r["latency"][lb].get("_raw_ms", {})).get("client_fusion")
                  and raw.get("hybrid_retrieve")}
        if paired:  # the same queries, methods in a random order per query: each query's own ratio
            out += ["`hybrid_retrieve` over client-side fusion, query by query: "
                    + "; ".join(f"{lb} median x{statistics.median(h / c for h, c in zip(raw['hybrid_retrieve'], raw['client_fusion'])):.2f}, "
                                f"faster on {sum(h < c for h, c in zip(raw['hybrid_retrieve'], raw['client_fusion']))} of "
                                f"{len(raw['client_fusion'])} queries" for lb, raw in paired.items()) + ".", ""]
        out += md_table(["tenant", "search_dense recall@10", "min", "queries at 0", "plain ORDER BY <=> under RLS"],
                        [[lb, x["search_dense_mean"], x["search_dense_min"], x["search_dense_zero_recall_queries"],
                          x["naive_hnsw_under_rls_mean"]] for lb in labels for x in [r["latency"][lb]["recall_at_10"]]])
        # results written before "built_with" was recorded: HNSW kinds at pgvector's defaults
        built = {k: x.get("built_with", "vectorscale defaults" if k == "diskann" else "m 16, ef_construction 64")
                 for k, x in r.get("index_kinds", {}).items()}
        out += md_table(["dense index kind (--index-kinds)", "built with", "p50 ms", "p95 ms", "recall@10", "min", "queries at 0",
                         "build s", "core-s", "MB"], [[k, built[k], x["p50_ms"], x["p95_ms"], x["recall_at_10_mean"], x["recall_at_10_min"],
                                                      x["zero_recall_queries"], x["build_s"], x.get("build_core_s", "-"), x["size_mb"]]
                                            for k, x in r["index_kinds"].items()]
                        ) if r.get("index_kinds") else []
        ing, st = r.get("ingest", {}), r.get("storage", {})
        rows: Table = []
        if r.get("resumed"):
            rows.append(["ingest", "not re-measured: a kept database measured again (--resume)"])
        if r.get("rebuild"):  # --resume --rebuild
            rows.append([f"its indexes rebuilt first (bulk_load, build_workers {r['rebuild']['build_workers']})",
                         f"{r['rebuild']['s']} s; the same indexes as before: {r['rebuild']['same_indexes_as_before']}"])
        if ing:
            held = "HNSW, GIN, BM25" if "index_rebuild_s" in ing else "HNSW"  # before 92ee358: HNSW alone
            rows.append(["ingest (TenantSession.ingest)", f"{ing['chunks_per_s']:,} chunks/s, " + (f"inside bulk_load() ({held} dropped, rebuilt after)" if ing.get("bulk_load") else "HNSW present")])
            if ing.get("bulk_load"):
                rows.append([f"{held} rebuild; load + rebuild", f"{ing.get('index_rebuild_s', ing.get('hnsw_rebuild_s'))} s; {ing['load_plus_rebuild_chunks_per_s']:,} chunks/s"])
        if b := ing.get("index_builds") or r.get("rebuild", {}).get("index_builds"):
            names = {"gin": "GIN", "bm25": "BM25", "hnsw_largest_partition": f"the dense index (HNSW or IVFFlat) of {b['hnsw_largest_partition'].get('partition')}",
                     "hnsw_other_partitions": "the other partitions' dense indexes", "other": "the rest", "all": "the whole rebuild"}
            rows.append(["the rebuild by part (s while one ran: builds on several connections overlap; CPU busy)",
                         "; ".join(f"{n} {b[k]['s']} s, {b[k]['cpu_busy_pct']}%" for k, n in names.items() if b.get(k, {}).get("s"))])
        if ing.get("edges_per_s"):
            rows.append(["add_edges", f"{ing['edges_per_s']:,} edges/s ({ing['edges_submitted']:,} edges)"])
        if st:
            rows.append(["storage", ", ".join(f"{k[:-3]} {v:,} MB" for k, v in st.items())])
        if r.get("memory"):
            rows.append(["server peak RSS / PSS", f"{r['memory']['peak_rss_mb']:,} / {r['memory']['peak_pss_mb']:,} MB"])
        if r.get("explain_file"):
            rows.append(["EXPLAIN (ANALYZE, BUFFERS) of every statement", f"`{r['explain_file'].removeprefix('bench/')}`"])
        out += md_table(["what", "value"], rows)
    return out


def tenants(d: dict[str, Any]) -> list[str]:
    rows = []
    for s in d["steps"]:
        rt = s.get("retrieve", {})
        drops = s.get("drop_tenant_with_chunks") or []
        drop_ms = [x["s"] for x in drops if isinstance(x, dict) and isinstance(x.get("s"), (int, float))]
        rows.append([s["tenants"], s["create_s"]["median"] * 1000, s["create_s"]["p95"] * 1000,
                     rt.get("warm_ms", {}).get("median", "-"), rt.get("warm_ms", {}).get("p95", "-"),
                     rt.get("cold_ms", {}).get("median", "-"), s["catalog_mb"], s["database_mb"],
                     s.get("memory", {}).get("pss_mb", "-"), rt.get("partitions_locked_max", "-"),
                     f"{max(drop_ms):.3f}" if drop_ms else "-"])
    return [f"{d['config']['rows']} chunks a tenant; hybrid_retrieve as tenant login roles, {d['config']['sample']} "
            "tenants sampled a step.", ""] + md_table(
        ["tenants", "create_tenant p50 ms", "p95 ms", "retrieve warm p50 ms", "warm p95 ms", "first call p50 ms",
         "catalog MB", "database MB", "server PSS MB", "partitions locked", "drop_tenant max s"], rows)


def load(d: dict[str, Any]) -> list[str]:
    out = [f"{d['clients']} clients x {d['seconds']} s over {d['tenants']} tenants: {d['operations']:,} operations, "
           f"{d['throughput_ops_per_s']} per s, {len(d['errors'])} errors, {d['retries']} retries, "
           f"{d['missing_chunks']} missing and {d['unexpected_chunks']} unexpected chunks.", ""]
    out += md_table(["operation", "n", "p50 ms", "p99 ms"],
                    [[op, v.get("n", "-"), v.get("p50"), v.get("p99")] for op, v in d["latency_ms"].items()])
    rs = d.get("restart")
    if rs:  # --restart
        out += [f"Then a clean restart: start with the BM25 heal {rs['start_with_bm25_heal_s']} s; chunks intact: "
                f"{rs['intact']}.", ""]
        out += md_table(["tenant", "live / expected chunks", "first retrieve ms", "rows ranked by BM25"],
                        [[t, f"{v['live_chunks']} / {v['expected']}", v["first_retrieve_ms"], v["rows_ranked_by_bm25"]]
                         for t, v in rs["tenants"].items()])
    return out


def replicas(d: dict[str, Any]) -> list[str]:
    return [f"{d['chunks']:,} chunks, {d['tenants']} tenants; every server on the same machine.", ""] + md_table(
        ["standbys", "readers", "queries/s", "p50 ms", "p99 ms", "vs primary only"],
        [[r["replicas"], r["readers"], r["qps"], r["p50_ms"], r["p99_ms"], x]
         for r, x in zip(d["runs"], d["qps_ratio_to_primary_only"])])


def ingest(d: dict[str, Any]) -> list[str]:
    f, rs, sw = d["folder"], d["rounds"], d.get("sweep")
    stages = sorted({k for r in rs for k in r["ingest"]["stages_s"]})
    out = [f"{f['docs_pages'] + f['composed']} documents ({f['bytes']:,} bytes: {f['docs_pages']} docs pages, "
           f"{f['composed']} composed of demo data and the shared collections' texts), {d['chunks']:,} chunks of "
           f"{d['tokens_per_chunk']['mean']} "
           f"tokens on average (about {d['gflop_per_passage']} GFLOP a passage). A round: the control, the embedder alone on "
           "every chunk, `pyhybrid ingest` of the folder into a new tenant. Stage seconds add up over threads (a batch is "
           f"written while the next is embedded). Median ingest / embedder ratio: **{d['median_ratio']}**.", ""]
    head = ["round", "control ms", "embedder passages/s", "ingest chunks/s", "ratio", "ingest wall s", "not embedding s",
            "embedding share of the wall", *[f"{k} s" for k in stages]]
    out += md_table(head, [[i, r["control_ms"], r["embedder_passages_per_s"], r["ingest"]["chunks_per_s"], r["ratio"],
                            r["ingest"]["wall_s"], r["ingest"]["not_embedding_s"],
                            round(1 - r["ingest"]["not_embedding_s"] / r["ingest"]["wall_s"], 3),
                            *[r["ingest"]["stages_s"].get(k, "-") for k in stages]] for i, r in enumerate(rs)])
    if sw:
        out += [f"onnxruntime settings on {sw['passages']} of these passages, {sw['rounds']} rounds in a shuffled order; "
                "ratio: median of the per-round ratios to the first row (the embedder's settings); each other row changes "
                "one setting.", ""] + md_table(
            ["threads", "inter_op", "mode", "graph level", "batch", "token budget", "bucketing", "passages/s", "ratio"],
            [[c["threads"] or "per core", c["inter"], c["mode"], c["level"], c["batch"], c["budget"] or "-",
              "on" if c["bucket"] else "off", c["passages_per_s"], round(c["ratio_to_default"], 3)] for c in sw["configs"]])
    return out


RUN = {"replicas": "python bench/load.py --replicas 0 1 2", "ingest": "python bench/load.py --ingest-docs 200 --embedder-sweep"}
SECTIONS: dict[str, tuple[str, Callable[[dict[str, Any]], list[str]]]] = {
    "quality": ("Retrieval quality on the shared collections", quality),
    "peers": ("Beside the peers: langchain-postgres PGVectorStore", peers),
    "graph_quality": ("The graph branch on a real citation graph", graph_quality),
    "latency": ("Latency and recall", latency), "tenants": ("Scale in tenants", tenants),
    "load": ("Load: concurrent clients, every operation", load), "replicas": ("Read replicas", replicas),
    "ingest": ("Ingest: documents through `pyhybrid ingest`, beside the embedder", ingest),
}


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_latency(runs: list[tuple[dict[str, Any], str]], out: Path) -> Path | None:
    runs = sorted({x[0]["size"]: x for x in reversed(runs)}.values(), key=lambda x: x[0]["size"])  # a size's first file
    if not runs:
        return None
    labels = list(runs[0][0]["latency"])
    runs = [x for x in runs if set(labels) <= set(x[0]["latency"])]  # runs over the same tenants
    fig, axes = plt.subplots(1, len(labels), figsize=(6 * len(labels), 4.5), squeeze=False)
    sizes = [r["size"] for r, _ in runs]
    for ax, lb in zip(axes[0], labels):
        for m in ("dense", "lexical_bm25", "graph", "hybrid_retrieve", "client_fusion"):
            ax.plot(sizes, [r["latency"][lb][m]["p95_ms"] for r, _ in runs], "o-", label=METHODS[m] + " p95")
        ax.set(xscale="log", title=f"{lb} tenant", ylabel="ms")
        ax.set_xticks(sizes, [f"{s:,}\n(git {g})" for s, g in zip(sizes, (g for _, g in runs))])
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("p95 latency by corpus size (2 shared cores; each size measured at its own commit)", fontsize=10)
    return _save(fig, out / "latency_vs_size.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = ap.parse_args(argv)
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for p in sorted(args.results.glob("*.json")):
        d = json.loads(p.read_text())
        if "meta" in d and d["meta"].get("benchmark") in SECTIONS:
            found.setdefault(d["meta"]["benchmark"], []).append((p.name, d))
    lat_runs = [(r, d["meta"]["engine"].get("git_head", "?")) for _, d in found.get("latency", []) for r in d["runs"]]
    plot = plot_latency(lat_runs, args.results)
    lines = ["# Benchmark results", "",
             "Rendered by `python bench/report.py` from the JSON files in `bench/results/`; do not edit by hand. Each "
             "section names the engine commit, the machine, the date and the command of its result file; re-running a "
             "benchmark rewrites its own file only (bench/README.md). One-off investigations: bench/FINDINGS.md.", ""]
    for key, (title, render) in SECTIONS.items():
        lines += [f"## {title}", ""]
        if key not in found:
            lines += [f"No result of the current engine stored yet: run `{RUN.get(key, 'python bench/' + key + '.py')}` (bench/README.md).", ""]
        for name, d in found.get(key, []):
            lines += provenance(d["meta"], name) + render(d)
    lines += ["## Plots", "", f"![{plot.stem}](results/{plot.name})", ""] if plot else []
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(args.out, *[plot] if plot else [], sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
