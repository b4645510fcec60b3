"""Dense-only retrieval quality and embedding speed of embedder specs on the shared collections, side by side.

For each --embedder spec (pyhybrid.embedders) and each --dataset folder (../shared/datasets/* layout): embeds the
documents as passages and the judged queries as queries, ranks by exact cosine (bench/_common.exact_cosine_run,
the benchmarks' baseline) and scores nDCG@10, recall@100 and MRR@10; also the passages embedded a second, and the
reference run on the dataset's own MiniLM embeddings. Prints JSON (and writes it to --out).

    python tools/embedder_quality.py --embedder minilm --embedder e5-multilingual \\
        --dataset ../shared/datasets/cranfield --out /tmp/embedders.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import evaluate, exact_cosine_run, load_dataset  # noqa: E402

from pyhybrid.embedders import load_embedder  # noqa: E402


def measure(spec: str, path: str) -> dict[str, object]:
    ds = load_dataset(path)
    queries = ds.judged_query_ids()
    e = load_embedder(spec)
    t0 = time.perf_counter()
    docs = np.concatenate([e([ds.doc_text[d] for d in ds.doc_ids[i:i + 32]]) for i in range(0, len(ds.doc_ids), 32)])
    seconds = time.perf_counter() - t0
    by_id = {q: e.embed_query(ds.query_text[q]) for q in queries}
    own = dataclasses.replace(ds, doc_emb=docs, query_ids=queries, query_emb=np.stack([by_id[q] for q in queries]))
    scores = evaluate(exact_cosine_run(own, queries), ds.qrels, queries)
    return {"embedder": spec, "dataset": ds.name, "docs": len(ds.doc_ids), "passages_per_s": round(len(docs) / seconds, 2),
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embedder", action="append", required=True, help="an embedder spec (repeatable)")
    ap.add_argument("--dataset", action="append", required=True, help="a dataset folder (repeatable)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    for path in args.dataset:
        ds = load_dataset(path)
        ref = evaluate(exact_cosine_run(ds, ds.judged_query_ids()), ds.qrels, ds.judged_query_ids())
        rows.append({"embedder": "reference MiniLM embeddings", "dataset": ds.name, "ndcg@10": round(ref["ndcg@10"], 4)})
        rows += [measure(spec, path) for spec in args.embedder]
    text = json.dumps(rows, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
