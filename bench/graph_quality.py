#!/usr/bin/env python
"""Does the graph branch help retrieval on a real citation graph? hybrid_retrieve with and without it.

    python bench/graph_quality.py --dataset ../shared/datasets/cacm --out bench/results/graph_quality_cacm.json

DIR has the layout of ../shared/datasets/* plus edges.jsonl ({"src", "dst", "rel", "properties"?} a line, corpus
ids). One tenant as bench/quality.py sets it up, the edges loaded through add_edges, every judged query as the
tenant's login role. The engine grid: per base (fusion, weights, rrf_k) the call without the graph and with it over
graph_expand x graph_weight x graph_decay x edge types (dense + BM25, 1 hop), each call mirrored in Python
(pyhybrid.fusion and a copy of the 1-hop walk: the two must agree call for call), which makes the null control (the
same edges randomly rewired) exact; sign-flip p-values; a check of the adjacency against hybrid.graph_context; an
interleaved latency pass (the call without and with the graph alternating).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import (  # noqa: E402  (bench/quality.py; importing it makes pyhybrid importable from a checkout)
    DENSE_SQL, LEX_SQL, METRICS, TENANT, Runner, bm25_index_params, ingest, quiet_connect, setup_database)
from _common import (Dataset, drop_databases, evaluate, load_dataset, mrr_at_k, ndcg_at_k, read_jsonl,  # noqa: E402
                     recall_at_k, start_meta, vector_literal, write_result)

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from tqdm import tqdm  # noqa: E402

from pyhybrid.fusion import GRAPH_DECAY, fuse_scores, graph_score  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

# base calls: name -> (fusion, vector_weight, keyword_weight, rrf_k)
BASES: dict[str, tuple[str, float, float, float]] = {
    "rrf": ("rrf", 1.0, 1.0, 60.0), "convex": ("convex", 1.0, 1.0, 60.0), "rrf_tuned": ("rrf", 0.75, 1.0, 10.0)}
# named engine calls outside the grid: name -> (base, edge set, graph_expand, graph_weight)
NAMED_ENGINE = {"cli_default (weights 1,1,2, --graph-expand 1)": ("rrf", "all", 1, 2.0)}
ALL = "all"


# ---------------------------------------------------------------- data

def read_edges(path: Path) -> list[dict[str, Any]]:
    return [{"src": str(o["src"]), "dst": str(o["dst"]), "rel": o["rel"], "properties": o.get("properties") or {}}
            for o in read_jsonl(path)]


def null_edges(edges: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """A random graph with (nearly) the degree sequence of each edge type: its edge ends shuffled and paired
    again (a pair that is a self-loop or a repeat is dropped), properties kept in order."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for rel in sorted({e["rel"] for e in edges}):
        es = [e for e in edges if e["rel"] == rel]
        stubs = [x for e in es for x in (e["src"], e["dst"])]
        rng.shuffle(stubs)
        seen: set[tuple[str, str]] = set()
        for i in range(0, len(stubs) - 1, 2):
            a, b = stubs[i], stubs[i + 1]
            key = (min(a, b), max(a, b))
            if a == b or key in seen:
                continue
            seen.add(key)
            out.append({"src": a, "dst": b, "rel": rel, "properties": es[i // 2]["properties"]})
    return out


def load_edges(db: str, edges: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    """Load the edges for TENANT through the client (loading registers the tenant's edge types)."""
    t0 = time.perf_counter()
    totals = {"edges_added": 0, "edges_present": 0, "nodes_added": 0}
    with quiet_connect(db) as client:
        for s in range(0, len(edges), batch):
            with client.tenant(TENANT) as t:
                res = t.add_edges(edges[s:s + batch])
            for k in totals:
                totals[k] += getattr(res, k)
    with psycopg.connect(db, autocommit=True) as c:
        kinds: dict[str, int] = dict(c.execute("SELECT kind, count(*) FROM hybrid.graph_node WHERE tenant_id = %s GROUP BY kind",
                               (TENANT,)).fetchall())
    return {"rels": sorted({e["rel"] for e in edges}), "edges": len(edges), **totals, "graph_nodes": kinds,
            "seconds": round(time.perf_counter() - t0, 2)}


class Adjacency:
    """Undirected neighbours per edge set, all edges or one edge type (the engine walks edges both ways)."""

    def __init__(self, edges: list[dict[str, Any]]) -> None:
        self.rels = sorted({e["rel"] for e in edges})
        self.by_rel: dict[str, dict[str, set[str]]] = {r: defaultdict(set) for r in self.rels}
        for e in edges:
            self.by_rel[e["rel"]][e["src"]].add(e["dst"])
            self.by_rel[e["rel"]][e["dst"]].add(e["src"])
        self.sets = [ALL, *self.rels]  # the edge sets the engine can be asked for
        self._cache: dict[str, dict[str, frozenset[str]]] = {}

    def nb(self, edge_set: str) -> dict[str, frozenset[str]]:
        if edge_set not in self._cache:
            acc: dict[str, set[str]] = defaultdict(set)
            for r in self.rels if edge_set == ALL else [edge_set]:
                for a, nbs in self.by_rel[r].items():
                    acc[a] |= nbs
            self._cache[edge_set] = {a: frozenset(b) for a, b in acc.items()}
        return self._cache[edge_set]


def engine_types(edge_set: str) -> list[str] | None:
    return None if edge_set == ALL else [edge_set]


# ---------------------------------------------------------------- the engine's arithmetic, in Python

Lists = tuple[list[str], list[float], list[str], list[float]]  # dense ids, scores, lexical ids, scores


def base_fused(lists: Lists, base: str) -> list[tuple[str, float]]:
    d_ids, d_sc, l_ids, l_sc = lists
    fusion, wv, wk, k = BASES[base]
    return [(i, s) for i, s, _ in fuse_scores([d_ids, l_ids], [wv, wk], fusion, k, None, [d_sc, l_sc])]


def engine_run(lists: Lists, base: str, expand: int, gw: float, nb: dict[str, frozenset[str]], psk: int, top_k: int,
               decay: float = GRAPH_DECAY) -> list[str]:
    """hybrid.retrieve's arithmetic: the dense and lexical lists fused (B); seeds: B's best `expand`; the 1-hop
    list (neighbours not among the seeds, by the position of their first seed, then id; cut at per_source_k);
    a neighbour scores graph_score(its own fused score or 0, gw, its first seed's fused score, decay, 1)."""
    B = base_fused(lists, base)
    score = dict(B)
    seeds = [i for i, _ in B[:expand]]
    seen, first = set(seeds), {}
    for s in seeds:
        for n in sorted(nb.get(s, ()), key=lambda n: n):
            if n not in seen and n not in first:
                first[n] = s
    g = sorted(first, key=lambda n: (seeds.index(first[n]), n))[:psk]
    fused = {i: graph_score(score.get(i, 0.0), gw, score[first[i]], decay, 1) for i in g}
    out = {**score, **fused}
    return sorted(out, key=lambda i: (-out[i], i))[:top_k]


# ---------------------------------------------------------------- statistics

def per_query(run: dict[str, list[str]], ds: Dataset, qids: list[str]) -> dict[str, list[float]]:
    return {"ndcg@10": [ndcg_at_k(run[q], ds.qrels[q], 10) for q in qids],
            "recall@100": [recall_at_k(run[q], ds.qrels[q], 100) for q in qids],
            "mrr@10": [mrr_at_k(run[q], ds.qrels[q], 10) for q in qids]}


def sign_flip_p(diff: Sequence[float], n: int = 20000, seed: int = 7) -> float:
    """Two-sided paired randomization test (random sign flips) of mean(diff) = 0."""
    d = np.asarray(diff, dtype=float)
    if not np.any(np.abs(d) > 1e-12):
        return 1.0
    rng = np.random.default_rng(seed)
    obs = abs(d.mean())
    flips = rng.choice([-1.0, 1.0], size=(n, len(d)))
    return float((np.abs((flips * d).mean(axis=1)) >= obs - 1e-12).mean())


def summarize(run: dict[str, list[str]], ds: Dataset, qids: list[str], base_pq: list[float] | None) -> dict[str, Any]:
    ev = evaluate(run, ds.qrels, qids)
    out: dict[str, Any] = {k: round(float(ev[k]), 5) for k in METRICS}
    if base_pq is not None:
        pq = per_query(run, ds, qids)["ndcg@10"]
        diff = [a - b for a, b in zip(pq, base_pq)]
        out["delta_ndcg@10"] = round(float(np.mean(diff)), 5)
        out["wins"], out["losses"] = sum(d > 1e-12 for d in diff), sum(d < -1e-12 for d in diff)
        out["p_value"] = round(sign_flip_p(diff), 4)
    return out


def latency_pass(call: Callable[..., tuple[list[str], float]], qids: list[str], bases: Sequence[str], rounds: int,
                 setting: tuple[str, int, float]) -> dict[str, Any]:
    """Per base, per query and round: the call without and with the graph branch, in alternating order."""
    es, expand, gw = setting
    out: dict[str, Any] = {"graph_setting": {"edges": es, "graph_expand": expand, "graph_weight": gw}, "rounds": rounds}
    for b in bases:
        t_off: list[float] = []
        t_on: list[float] = []
        for r in range(rounds):
            for i, q in enumerate(qids):
                order = (False, True) if (i + r) % 2 == 0 else (True, False)
                for on in order:
                    _, ms = call(q, b, gw if on else 0.0, expand if on else 0, engine_types(es) if on else None)
                    (t_on if on else t_off).append(ms)
        out[b] = {"no_graph_p50_ms": round(float(np.median(t_off)), 2), "graph_p50_ms": round(float(np.median(t_on)), 2),
                  "p50_of_paired_difference_ms": round(float(np.median(np.asarray(t_on) - np.asarray(t_off))), 2),
                  "calls_each": len(t_off)}
    return out


# ---------------------------------------------------------------- report

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="dataset folder with edges.jsonl")
    ap.add_argument("--edges", help="edges file (default DIR/edges.jsonl)")
    ap.add_argument("--out", required=True, help="output JSON file")
    ap.add_argument("--data-dir", default="/tmp/pyhybrid-bench-graph", help="embedded server data directory")
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--per-source-k", type=int, default=100)
    ap.add_argument("--bases", nargs="+", default=list(BASES), choices=list(BASES))
    ap.add_argument("--expand", type=int, nargs="+", default=[1, 3, 5, 10], help="graph_expand values")
    ap.add_argument("--graph-weights", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    ap.add_argument("--graph-decay", type=float, nargs="+", default=[GRAPH_DECAY], help="graph_decay values")
    ap.add_argument("--edge-sets", nargs="+", help="only these edge sets ('all' or an edge type; default: every one)")
    ap.add_argument("--exact-threshold", default="0", help="as bench/quality.py (0: dense through HNSW)")
    ap.add_argument("--batch-size", type=int, default=5000, help="chunks / edges per transaction")
    ap.add_argument("--null-graphs", type=int, default=2, help="random rewirings of the edges for the null control")
    ap.add_argument("--latency-rounds", type=int, default=3, help="0 skips the interleaved latency pass")
    ap.add_argument("--limit-queries", type=int, default=0, help="only the first N judged queries (smoke tests)")
    ap.add_argument("--keep-db", action="store_true")
    args = ap.parse_args(argv)
    meta = start_meta("graph_quality", argv)
    exact_threshold = None if args.exact_threshold == "engine" else int(args.exact_threshold)

    t_start = time.perf_counter()
    ds = load_dataset(args.dataset)
    edges_path = Path(args.edges) if args.edges else ds.path / "edges.jsonl"
    edges = read_edges(edges_path)
    adj = Adjacency(edges)
    nulls = [null_edges(edges, seed=1000 + i) for i in range(args.null_graphs)]
    null_adjs = [Adjacency(e) for e in nulls]
    qids = ds.judged_query_ids()
    if args.limit_queries:
        qids = qids[: args.limit_queries]
    out_path = Path(args.out)
    admin_dsn = start_embedded(Path(args.data_dir))
    print(f"embedded server: {admin_dsn}\n== {ds.name}: {len(ds.doc_ids)} docs, {len(qids)} judged queries, "
          f"{len(edges)} edges ({edges_path})")
    dbname = ("pyhybrid_graph_" + re.sub(r"[^a-z0-9_]", "_", ds.name.lower()))[:63]
    timings: dict[str, Any] = {}
    psk, top_k = args.per_source_k, args.top_k
    engine_sets = [e for e in adj.sets if not args.edge_sets or e in args.edge_sets]
    ok = False
    try:
        db, tenant_dsn, server_info = setup_database(admin_dsn, dbname, exact_threshold)
        timings["ingest"] = ingest(db, ds, args.batch_size)
        edges_load = load_edges(db, edges, args.batch_size)
        print(f"  edges: {edges_load}")
        runner = Runner(tenant_dsn, top_k)

        # the branch lists, once per query
        lists: dict[str, Lists] = {}
        for q in qids:
            vec = ds.query_vector(q).astype(np.float32)
            dr = runner.rows(DENSE_SQL, (vector_literal(vec), psk))
            lr = runner.rows(LEX_SQL, (ds.query_text[q], psk, "bm25"))
            lists[q] = ([i for i, _ in dr], [1 - v for _, v in dr], [i for i, _ in lr], [v for _, v in lr])
        Bn = {b: {q: base_fused(lists[q], b) for q in qids} for b in BASES}  # each base's fused list, in Python

        def call(q: str, base: str, gw: float, expand: int, types: list[str] | None,
                 decay: float = GRAPH_DECAY) -> tuple[list[str], float]:
            fusion, wv, wk, k = BASES[base]
            t1 = time.perf_counter()
            with runner.client.tenant(TENANT) as t:
                refs = t.retrieve(query_embedding=ds.query_vector(q).astype(np.float32), query_text=ds.query_text[q],
                                  top_k=top_k, per_source_k=psk, vector_weight=wv, keyword_weight=wk,
                                  graph_weight=gw, graph_expand=expand, graph_hops=1, graph_edge_types=types,
                                  rrf_k=k, lexical="bm25", fusion=fusion, graph_decay=decay)
            return [r.chunk_id for r in refs], 1000 * (time.perf_counter() - t1)

        # 1. the engine: baselines, the graph grid, the named calls
        t0 = time.perf_counter()
        baselines: dict[str, Any] = {}
        base_pq: dict[str, list[float]] = {}
        bmirror = {"matches": 0, "calls": 0}
        for b in args.bases:
            run, ms = {}, []
            for q in qids:
                run[q], t = call(q, b, 0.0, 0, None)
                ms.append(t)
                bmirror["matches"] += run[q] == [i for i, _ in Bn[b][q][:top_k]]
                bmirror["calls"] += 1
            base_pq[b] = per_query(run, ds, qids)["ndcg@10"]
            baselines[b] = {**summarize(run, ds, qids, None), "p50_ms": round(float(np.median(ms)), 2)}
            print(f"  baseline {b}: {baselines[b]}")
        emirror: dict[str, Any] = {"matches": 0, "calls": 0, "first_mismatch": None}

        def engine_rows(grid: list[tuple[str, str, int, float, float]], desc: str) -> list[dict[str, Any]]:
            rows = []
            for b, es, ex, gw, dc in tqdm(grid, desc=desc, unit="setting", mininterval=5):
                run, ms = {}, []
                for q in qids:
                    run[q], t = call(q, b, gw, ex, engine_types(es), dc)
                    ms.append(t)
                    mine = engine_run(lists[q], b, ex, gw, adj.nb(es), psk, top_k, dc)
                    emirror["calls"] += 1
                    if run[q] == mine:
                        emirror["matches"] += 1
                    elif emirror["first_mismatch"] is None:
                        emirror["first_mismatch"] = {"q": q, "setting": [b, es, ex, gw, dc], "engine": run[q][:10],
                                                     "mirror": mine[:10]}
                null_delta = float(np.mean([np.mean(per_query({x: engine_run(lists[x], b, ex, gw, na.nb(es), psk, top_k, dc)
                                                               for x in qids}, ds, qids)["ndcg@10"]) - np.mean(base_pq[b])
                                            for na in null_adjs])) if null_adjs else float("nan")
                rows.append({"base": b, "edge_types": es, "edge_types_order": engine_sets.index(es), "graph_expand": ex,
                             "graph_weight": gw, "graph_decay": dc, **summarize(run, ds, qids, base_pq[b]),
                             "null_delta": round(null_delta, 5), "p50_ms": round(float(np.median(ms)), 2)})
            return rows

        grid = [(b, es, ex, gw, dc) for b in args.bases for es in engine_sets for ex in args.expand
                for gw in args.graph_weights for dc in args.graph_decay]
        engine_grid = engine_rows(grid, "engine grid")
        named = {}
        for name, setting in NAMED_ENGINE.items():
            if setting[0] in args.bases:
                named[name] = engine_rows([(*setting, GRAPH_DECAY)], name)[0]
        timings["engine_grid_s"] = round(time.perf_counter() - t0, 1)
        print(f"  engine == mirror: {emirror['matches']}/{emirror['calls']}; baseline {bmirror}")

        # 2. latency
        latency = latency_pass(call, qids, args.bases, args.latency_rounds, (ALL, 5, 0.25)) \
            if args.latency_rounds > 0 else {}
        runner.close()
        timings["total_s"] = round(time.perf_counter() - t_start, 1)

        res = {
            "dataset": ds.name, "docs": len(ds.doc_ids), "queries": len(qids), "edges_file": str(edges_path),
            "edges_load": edges_load,
            "settings": {"top_k": top_k, "per_source_k": psk, "graph_hops": 1, "lexical": "bm25",
                         "exact_threshold": args.exact_threshold, "server": server_info,
                         "bm25_index": bm25_index_params(db), "bases": BASES,
                         "data_dir": args.data_dir},
            "null_graphs": {"count": len(nulls), "seeds": [1000 + i for i in range(len(nulls))],
                            "edges_kept": [len(e) for e in nulls]},
            "baselines": baselines, "baseline_mirror": bmirror, "engine_mirror": emirror, "engine_grid": engine_grid,
            "named_engine": named, "latency": latency, "timings": timings}
        write_result(out_path, meta, res)
        print(f"\nwrote {out_path} in {timings['total_s']:.0f} s")
        ok = emirror["matches"] == emirror["calls"] and bmirror["matches"] == bmirror["calls"]
    finally:
        if not args.keep_db:
            drop_databases(admin_dsn, [dbname])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
