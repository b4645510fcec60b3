"""Per-document nDCG@10 of 0.2's word chunker against the structure-aware chunker at several token sizes.

Each document of a sample is chunked, every chunk embedded with the project's embedder, and a document
is scored by its best chunk (cosine with the query). The sample is the same for every setting: documents
longer than --min-tokens, the relevant ones of --queries sampled queries plus --distractors others.
Embeddings are cached on disk (keyed by the chunk's whitespace-normalised text).

The figures of the commit that set pyhybrid.chunking's defaults came from (cache in /tmp/chunk-eval/):

    python tools/chunk_eval.py --collection cisi --queries 76 --distractors 1000
    python tools/chunk_eval.py --collection scifact --queries 150 --distractors 500
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

from pyhybrid.chunking import chunk_document, chunk_text, count_tokens
from pyhybrid.embed import MiniLMEmbedder

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"


class Cache:
    """Embeddings by text hash, in one .npz per collection."""

    def __init__(self, path: Path, embedder: MiniLMEmbedder) -> None:
        self.path, self.embedder = path, embedder
        self.vectors: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path) as z:
                self.vectors = {k: z[k] for k in z.files}
        self.embedded = 0

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(" ".join(text.split()).encode()).hexdigest()

    def get(self, texts: list[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts) if k not in self.vectors}.items())
        for start in range(0, len(todo), 256):
            part = todo[start:start + 256]
            vecs = self.embedder([t for _, t in part])
            for (k, _), v in zip(part, vecs):
                self.vectors[k] = v.astype(np.float32)
            self.embedded += len(part)
            self.save()
        return np.stack([self.vectors[k] for k in keys])

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, **self.vectors)
        tmp.replace(self.path)


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collection", required=True)
    p.add_argument("--queries", type=int, default=150, help="queries sampled (all if fewer)")
    p.add_argument("--distractors", type=int, default=500, help="unjudged documents added (all if fewer)")
    p.add_argument("--min-tokens", type=int, default=128, help="documents longer than this many tokens only")
    p.add_argument("--sizes", default="128:16,192:24,254:32", help="chunk_tokens:overlap_tokens settings")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=24)
    p.add_argument("--cache", default="/tmp/chunk-eval")
    a = p.parse_args()
    folder = DATA / a.collection
    docs = {d["_id"]: d for d in map(json.loads, (folder / "corpus.jsonl").open())}
    texts = {i: (d["title"] + "\n\n" + d["text"]).strip() for i, d in docs.items()}
    lengths = dict(zip(texts, count_tokens(list(texts.values()))))
    pool = {i for i, n in lengths.items() if n > a.min_tokens}
    qrels: dict[str, set[str]] = {}
    for line in list((folder / "qrels.tsv").open())[1:]:
        q, d, _ = line.rstrip("\n").split("\t")
        if d in pool:
            qrels.setdefault(q, set()).add(d)
    rng = random.Random(a.seed)
    qids = sorted(qrels)
    qids = sorted(rng.sample(qids, min(a.queries, len(qids))))
    judged = sorted({d for q in qids for d in qrels[q]})
    others = sorted(pool - set(judged))
    sample = sorted(set(judged) | set(rng.sample(others, min(a.distractors, len(others)))))
    queries = {q["_id"]: q["text"] for q in map(json.loads, (folder / "queries.jsonl").open())}
    print(f"{a.collection}: {len(qids)} queries, {len(judged)} judged + {len(sample) - len(judged)} distractor "
          f"documents (> {a.min_tokens} tokens; median {int(np.median([lengths[d] for d in sample]))}), seed {a.seed}",
          flush=True)
    cache_dir = Path(a.cache)
    cache_dir.mkdir(parents=True, exist_ok=True)
    embedder = MiniLMEmbedder(threads=a.threads)
    cache = Cache(cache_dir / f"{a.collection}.npz", embedder)
    qvec = cache.get([queries[q] for q in qids])
    settings: list[tuple[str, object]] = [("0.2 words 180/30", None)]
    for s in a.sizes.split(","):
        size, overlap = (int(x) for x in s.split(":"))
        settings.append((f"tokens {size}/{overlap}", (size, overlap)))
    results = []
    for name, setting in settings:
        t0 = time.monotonic()
        before = cache.embedded
        owner: list[str] = []
        chunks: list[str] = []
        for d in sample:
            if setting is None:
                pieces = chunk_text(texts[d], max_words=180, overlap_words=30)
            else:
                size, overlap = setting  # type: ignore[misc]
                pieces = [c.content for c in chunk_document(texts[d], "text", chunk_tokens=size,
                                                            overlap_tokens=overlap)[1]]
            owner.extend([d] * len(pieces))
            chunks.extend(pieces)
        vecs = cache.get(chunks)
        sims = qvec @ vecs.T
        index = {d: i for i, d in enumerate(sample)}
        owner_idx = np.array([index[d] for d in owner])
        scores = np.full((len(qids), len(sample)), -np.inf, dtype=np.float32)
        for j in range(len(chunks)):
            np.maximum(scores[:, owner_idx[j]], sims[:, j], out=scores[:, owner_idx[j]])
        per_q = []
        for qi, q in enumerate(qids):
            top = np.argsort(-scores[qi])[:10]
            per_q.append(ndcg10([sample[i] for i in top], qrels[q]))
        row = {"collection": a.collection, "setting": name, "ndcg@10": round(float(np.mean(per_q)), 4),
               "chunks": len(chunks), "chunks_per_doc": round(len(chunks) / len(sample), 2),
               "embedded_now": cache.embedded - before, "seconds": round(time.monotonic() - t0, 1),
               "queries": len(qids), "documents": len(sample), "judged": len(judged), "seed": a.seed,
               "per_query": [round(x, 4) for x in per_q]}
        results.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "per_query"}), flush=True)
    out = cache_dir / f"{a.collection}.results.json"
    out.write_text(json.dumps(results, indent=1))
    base = np.array(results[0]["per_query"])
    for r in results[1:]:
        diff = np.array(r["per_query"]) - base
        boot = [float(np.mean(rng.choices(list(diff), k=len(diff)))) for _ in range(2000)]
        lo, hi = np.percentile(boot, [2.5, 97.5])
        print(f"{r['setting']}: {r['ndcg@10']:.4f} vs {results[0]['ndcg@10']:.4f}: diff {diff.mean():+.4f} "
              f"(95% bootstrap {lo:+.4f} .. {hi:+.4f}; better on {(diff > 0).sum()}, worse on {(diff < 0).sum()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
