#!/usr/bin/env python
"""What reranking and several query formulations add to hybrid_retrieve, on IR test collections.

    python bench/rerank.py --dataset DIR [--dataset DIR ...] --out FILE.json [--fusion F --vector-weight W ...]

For each collection (layout of ../shared/datasets/*), a fresh database on the embedded server holds the
corpus for one tenant (as bench/quality.py loads it); every judged query runs as that tenant's login role:

  hybrid            hybrid_retrieve with dense + BM25 and the given fusion settings (default: the engine's)
  hybrid_rerank     the same call with rerank='maxsim' (pyhybrid.rerank.MaxSimReranker: the best MiniLM
                    cosine between the query and any 64-word passage of a row, offline) over the best
                    --rerank-depth rows
  many_keywords     hybrid.retrieve_many with two formulations: the query, and its content words alone
                    (the query's words minus a stopword list), each embedded with the offline MiniLM

top_k is --rerank-depth for every mode, so nDCG@10 and MRR@10 compare like with like (recall@100 is then
recall over that many rows: reported, but read it as recall@depth). Writes FILE.json and FILE.md, with the
p50 latency of a call in each mode (the reranker's embedding included).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import numpy as np
import psycopg
from psycopg import sql
from tqdm import tqdm

from _common import evaluate, load_dataset, machine_info
from quality import CORPUS, TENANT, ingest, setup_database
from pyhybrid import connect
from pyhybrid.embed import default_embedder
from pyhybrid.rerank import MaxSimReranker
from pyhybrid.server import start_embedded

STOPWORDS = set("""a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves also may might must shall""".split())


def keywords(text: str) -> str:
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9\-']*", text)
    kept = [w for w in words if w.lower() not in STOPWORDS]
    return " ".join(kept) or text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir", default="/tmp/pyhybrid-bench-rerank")
    ap.add_argument("--rerank-depth", type=int, default=30)
    ap.add_argument("--fusion", default=None, help="hybrid_retrieve's fusion (default: the engine's)")
    ap.add_argument("--vector-weight", type=float, default=None)
    ap.add_argument("--keyword-weight", type=float, default=None)
    ap.add_argument("--rrf-k", type=float, default=None)
    ap.add_argument("--per-source-k", type=int, default=None)
    ap.add_argument("--limit-queries", type=int, default=0)
    args = ap.parse_args(argv)
    settings = {k: v for k, v in (("fusion", args.fusion), ("vector_weight", args.vector_weight),
                                  ("keyword_weight", args.keyword_weight), ("rrf_k", args.rrf_k),
                                  ("per_source_k", args.per_source_k)) if v is not None}
    admin = start_embedded(Path(args.data_dir))
    embedder = default_embedder()
    reranker = MaxSimReranker(embedder)
    results: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    dbs: list[str] = []
    t_start = time.perf_counter()
    try:
        for dpath in args.dataset:
            ds = load_dataset(dpath)
            qids = ds.judged_query_ids()[: args.limit_queries or None]
            dbname = "pyhybrid_rerank_" + re.sub(r"[^a-z0-9_]", "_", ds.name.lower())
            db, tenant_dsn, _ = setup_database(admin, dbname, None)
            dbs.append(dbname)
            ingest(db, ds, 5000)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                client = connect(tenant_dsn)
            runs: dict[str, dict[str, list[str]]] = {"hybrid": {}, "hybrid_rerank": {}, "many_keywords": {}}
            ms: dict[str, list[float]] = {m: [] for m in runs}
            for q in tqdm(qids, desc=ds.name, unit="q"):
                text = ds.query_text[q]
                vec = ds.query_vector(q).astype(np.float32)
                kw = dict(query_embedding=vec, query_text=text, top_k=args.rerank_depth, graph_weight=0.0, **settings)
                with client.tenant(TENANT) as t:
                    t0 = time.perf_counter()
                    runs["hybrid"][q] = [r.chunk_id for r in t.retrieve(**kw)]
                    ms["hybrid"].append(1000 * (time.perf_counter() - t0))
                    t0 = time.perf_counter()
                    runs["hybrid_rerank"][q] = [r.chunk_id for r in t.retrieve(**kw, rerank=reranker,
                                                                               rerank_depth=args.rerank_depth)]
                    ms["hybrid_rerank"].append(1000 * (time.perf_counter() - t0))
                    t0 = time.perf_counter()
                    kwd = keywords(text)
                    many = {k: v for k, v in kw.items() if k not in ("query_embedding", "query_text")}
                    runs["many_keywords"][q] = [r.chunk_id for r in t.retrieve_many(
                        query_texts=[text, kwd], query_embeddings=[vec, embedder.embed_query(kwd)], **many)]
                    ms["many_keywords"].append(1000 * (time.perf_counter() - t0))
            client.close()
            results[ds.name] = {m: {k: (round(v, 5) if isinstance(v, float) else v)
                                    for k, v in evaluate(r, ds.qrels, qids).items()} for m, r in runs.items()}
            latency[ds.name] = {m: round(float(np.median(v)), 2) for m, v in ms.items()}
            print(ds.name, json.dumps(results[ds.name]), json.dumps(latency[ds.name]))
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            for n in dbs:
                c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(n)))
    out = {"datasets": results, "p50_ms": latency, "settings": {**settings, "rerank_depth": args.rerank_depth,
           "top_k": args.rerank_depth}, "machine": machine_info(), "seconds": round(time.perf_counter() - t_start, 1)}
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    names = list(results)
    lines = ["# Reranking and several formulations", "",
             f"Run {out['machine']['date']} on {out['machine']['nproc']} x {out['machine']['cpu_model']}; hybrid_retrieve "
             f"settings {settings or 'the engine defaults'} (dense + BM25, no graph); top_k = rerank depth = "
             f"{args.rerank_depth}. p50: one call, client side, the reranker's and keyword embedding included.", ""]
    for metric in ("ndcg@10", "mrr@10"):
        lines += [f"## {metric}", "", "| mode | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
        for m in ("hybrid", "hybrid_rerank", "many_keywords"):
            lines.append(f"| {m} | " + " | ".join(f"{results[n][m][metric]:.3f}" for n in names) + " |")
        lines.append("")
    lines += ["## p50 ms per call", "", "| mode | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for m in ("hybrid", "hybrid_rerank", "many_keywords"):
        lines.append(f"| {m} | " + " | ".join(f"{latency[n][m]:.1f}" for n in names) + " |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {path} and {path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
