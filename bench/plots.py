"""Plots of the benchmark results: latency vs corpus size per method, and quality by mode per dataset.

    python bench/plots.py [--latency bench/results/latency.json] [--quality bench/results/quality.json]
                          [--tenants bench/results/tenants_54b06f3.json] [--outdir bench/results]

Writes latency_vs_size.png (p50 and p95 per method, the ~1% and the 50% tenant side by side) and,
when the quality results exist, quality_by_mode.png (grouped bars: one group per dataset, one bar per
retrieval mode, one panel per metric) and, when the tenants results exist, latency_vs_tenants.png
(hybrid_retrieve warm p50/p95 and a new connection's first call, create_tenant, against the number of
tenants).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

METHODS = [
    ("dense", "search_dense alone", "tab:blue", "o"),
    ("lexical_bm25", "search_lexical bm25 alone", "tab:orange", "s"),
    ("graph", "search_graph alone", "tab:green", "^"),
    ("branch_sum", "sum of the three branches", "tab:gray", "."),
    ("hybrid_retrieve", "hybrid_retrieve (one call)", "tab:red", "D"),
    ("client_fusion", "3 calls + client-side RRF", "tab:purple", "v"),
    ("pgvector_rrf_cte", "pgvector-python RRF CTE", "tab:brown", "x"),
]
TENANTS = [("1pct", "~1% tenant"), ("50pct", "50% tenant")]
FUSED = ("hybrid_retrieve", "client_fusion", "pgvector_rrf_cte")
METHOD_NAMES = {m: label for m, label, _, _ in METHODS}


def plot_tenants(data: dict[str, Any], out: Path) -> Path:
    steps = data["steps"]
    n = [s["tenants"] for s in steps]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(n, [s["retrieve"]["warm_ms"]["median"] for s in steps], "o-", color="tab:red", label="warm p50")
    ax1.plot(n, [s["retrieve"]["warm_ms"]["p95"] for s in steps], "o--", color="tab:red", label="warm p95")
    ax1.plot(n, [s["retrieve"]["cold_ms"]["median"] for s in steps], "s-", color="tab:gray",
             label="a new connection's first call, p50")
    ax1.set_xscale("log")
    ax1.set_xlabel("tenants (a partition each)")
    ax1.set_ylabel("hybrid_retrieve ms")
    ax1.set_title("hybrid_retrieve vs number of tenants")
    ax1.legend(fontsize=8)
    ax2.plot(n, [1000 * s["create_s"]["median"] for s in steps], "o-", color="tab:blue", label="create_tenant p50")
    ax2.plot(n, [1000 * s["create_s"]["p95"] for s in steps], "o--", color="tab:blue", label="create_tenant p95")
    ax2.set_xscale("log")
    ax2.set_xlabel("tenants")
    ax2.set_ylabel("ms")
    ax2.set_title("creating a tenant (its partition and indexes)")
    ax2.legend(fontsize=8)
    fig.suptitle(f"engine {data.get('engine_commit', '?')[:7]}, {data['config'].get('rows', 20) if isinstance(data.get('config'), dict) else 20} chunks a tenant, 2 shared cores", fontsize=9)
    fig.tight_layout()
    path = out / "latency_vs_tenants.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_latency(data: dict[str, Any], out: Path) -> Path:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    runs = sorted(data["runs"], key=lambda r: r["size"])
    sizes = [r["size"] for r in runs]
    fig, axes = plt.subplots(2, 2, figsize=(13, 10), sharex=True)
    for col, (key, title) in enumerate(TENANTS):
        for row, stat in enumerate(("p50_ms", "p95_ms")):
            ax = axes[row][col]
            for m, label, color, marker in METHODS:
                ys = [r["latency"][key][m][stat] for r in runs]
                ls = ":" if m == "branch_sum" else "-"
                lw = 2.4 if m == "hybrid_retrieve" else 1.5
                ax.plot(sizes, ys, ls, color=color, marker=marker, label=label, linewidth=lw, markersize=6)
                if m in FUSED:  # circled: the method returned fewer rows than the 10 asked for
                    short = [(x, y) for x, y, r in zip(sizes, ys, runs) if r["latency"][key][m]["rows_mean"] < 9.95]
                    if short:
                        ax.plot(*zip(*short), "o", markersize=13, markerfacecolor="none", markeredgecolor=color,
                                markeredgewidth=1.5, zorder=5)
            if stat == "p95_ms" and any(s >= 1_000_000 for s in sizes):
                ax.axhline(50, color="black", linestyle="--", linewidth=1, alpha=0.7,
                           label="target at 1M: hybrid_retrieve p95 <= 50 ms")
            chunks = ", ".join(f"{r['latency'][key]['chunks']:,}" for r in runs)
            ax.set_title(f"{title} ({chunks} chunks): {stat.split('_')[0]}", fontsize=11)
            ax.set_xscale("log")
            ax.set_yscale("log")
            # readable values on the log axis: 1, 2, 5, 10, 20, 50, ... ms
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(sizes)
            ax.set_xticklabels([f"{s:,}" + ("\n(bulk load)" if r["ingest"].get("bulk_load") else "")
                                for s, r in zip(sizes, runs)])
            ax.set_xlim(sizes[0] / 1.6, sizes[-1] * 1.6)
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.tick_params(axis="x", which="minor", bottom=False)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_ylabel("latency (ms, log scale)")
            if row == 1:
                ax.set_xlabel("corpus size (chunks, 100 tenants)")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=9, ncol=4, loc="lower center", frameon=False, bbox_to_anchor=(0.5, 0.025))
    short = [f"{METHOD_NAMES[m]}, {title} at {r['size']:,}: {r['latency'][key][m]['rows_mean']:.1f}"
             for r in runs for key, title in TENANTS for m in FUSED if r["latency"][key][m]["rows_mean"] < 9.95]
    if short:
        fig.text(0.5, 0.008, "circled points returned fewer than the 10 rows asked for (mean rows: " + "; ".join(short) + ")",
                 ha="center", fontsize=8.5)
    m = data.get("machine", {})
    eng = data.get("engine_at_start", {}).get("git_head", "?")
    fig.suptitle(f"pyhybrid query latency vs corpus size, end to end from Python, as the app role under RLS "
                 f"(engine {eng}; {m.get('nproc', '?')} cores, {m.get('cpu_model', '?')})", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 0.97))
    path = out / "latency_vs_size.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _quality_table(data: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """{dataset: {mode: {metric: value}}} from quality.json ({"datasets": {...}} or a bare mapping)."""
    ds = data.get("datasets", data)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, modes in ds.items():
        if not isinstance(modes, dict):
            continue
        for mode, metrics in modes.items():
            if isinstance(metrics, dict):
                nums = {k: float(v) for k, v in metrics.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "queries"}
                if nums:
                    table.setdefault(name, {})[mode] = nums
    return table


def plot_quality(data: dict[str, Any], out: Path) -> Path | None:
    table = _quality_table(data)
    if not table:
        return None
    datasets = list(table)
    modes: list[str] = []
    for d in datasets:
        for mode in table[d]:
            if mode not in modes:
                modes.append(mode)
    metrics: list[str] = []
    for d in datasets:
        for mode in table[d]:
            for k in table[d][mode]:
                if k not in metrics:
                    metrics.append(k)
    preferred = [k for k in ("ndcg@10", "recall@100", "mrr@10") if k in metrics]
    metrics = preferred or metrics[:3]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(8, 1.6 * len(datasets) * max(1, len(modes)) / 4), 4 * len(metrics)),
                             squeeze=False)
    width = 0.8 / max(1, len(modes))
    cmap = plt.get_cmap("tab20" if len(modes) > 10 else "tab10")
    for ax, metric in zip(axes[:, 0], metrics):
        for j, mode in enumerate(modes):
            xs = [i + (j - (len(modes) - 1) / 2) * width for i in range(len(datasets))]
            ys = [table[d].get(mode, {}).get(metric, float("nan")) for d in datasets]
            ax.bar(xs, ys, width, label=mode, color=cmap(j % cmap.N))
        ax.set_xticks(range(len(datasets)))
        ax.set_xticklabels(datasets)
        ax.set_xlim(-0.5, len(datasets) - 0.5)
        ax.set_ylabel(metric)
        ax.set_ylim(0, 1)
        ax.grid(True, axis="y", alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    rows = -(-len(modes) // 5)
    fig.legend(handles, labels, fontsize=9, ncol=min(5, len(modes)), loc="upper center",
               bbox_to_anchor=(0.5, 1 - 0.35 / fig.get_figheight()))
    fig.suptitle("pyhybrid retrieval quality by mode per dataset", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.45 + 0.22 * rows) / fig.get_figheight()))
    path = out / "quality_by_mode.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=Path, default=RESULTS / "latency.json")
    ap.add_argument("--quality", type=Path, default=RESULTS / "quality.json")
    ap.add_argument("--tenants", type=Path, default=RESULTS / "tenants_54b06f3.json")
    ap.add_argument("--outdir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    wrote = []
    if args.latency.exists():
        wrote.append(plot_latency(json.loads(args.latency.read_text()), args.outdir))
    else:
        print(f"no {args.latency}: latency plot skipped", file=sys.stderr)
    if args.quality.exists():
        p = plot_quality(json.loads(args.quality.read_text()), args.outdir)
        if p is not None:
            wrote.append(p)
    else:
        print(f"no {args.quality}: quality plot skipped", file=sys.stderr)
    if args.tenants.exists():
        wrote.append(plot_tenants(json.loads(args.tenants.read_text()), args.outdir))
    else:
        print(f"no {args.tenants}: tenants plot skipped", file=sys.stderr)
    for p in wrote:
        print(p)
    return 0 if wrote else 1


if __name__ == "__main__":
    sys.exit(main())
