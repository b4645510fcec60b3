"""Reranking: re-order the best fused rows of one retrieve call by a scorer of (query, texts).

A reranker is any callable ``(query_text, [texts]) -> [scores]`` (higher is better), for example a
cross-encoder: pass it as retrieve(rerank=...). No registry package ships a cross-encoder with its weights
that runs offline (flashrank and sentence-transformers download theirs at run time). MaxSimReranker is an
example of the hook, not a ranking option: the offline MiniLM embedder's best cosine between the query and
any passage of a chunk. Measured, it LOWERS nDCG@10 on all four shared collections (CACM 0.555 -> 0.419,
CISI 0.451 -> 0.419, Cranfield 0.401 -> 0.359, SciFact 0.711 -> 0.679) at 1.8 to 5.5 s a call
(docs/benchmarks.md#reranking-and-several-formulations).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

from .errors import InvalidParameterError, RetrievalError
from .types import ChunkRef

Reranker = Callable[[str, Sequence[str]], Sequence[float]]
"""(query_text, texts) -> one score per text, higher is better."""

MAX_RERANK_DEPTH = 1000


class MaxSimReranker:
    """Scores a text by the best cosine similarity between the query and one of its passages
    (windows of `window` words every `stride` words), with the offline MiniLM embedder."""

    def __init__(self, embedder: Any = None, *, window: int = 64, stride: int = 48) -> None:
        if not 1 <= stride <= window:
            raise InvalidParameterError(f"stride must be between 1 and window ({window}), got {stride}")
        if embedder is None:
            from .embed import default_embedder

            embedder = default_embedder()
        self.embedder = embedder
        self.window = window
        self.stride = stride

    def passages(self, text: str) -> list[str]:
        """The windows of text this reranker compares with the query (the whole text if short)."""
        words = text.split()
        if len(words) <= self.window:
            return [" ".join(words)] if words else [""]
        out = []
        for start in range(0, len(words), self.stride):
            out.append(" ".join(words[start:start + self.window]))
            if start + self.window >= len(words):
                break
        return out

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        spans = [self.passages(t) for t in texts]
        flat = [p for ps in spans for p in ps]
        vectors = np.asarray(self.embedder([query, *flat]), dtype=np.float32)
        sims = vectors[1:] @ vectors[0]
        out: list[float] = []
        i = 0
        for ps in spans:
            out.append(float(sims[i:i + len(ps)].max()))
            i += len(ps)
        return out


def resolve(rerank: Any) -> Reranker:
    """A reranker from retrieve()'s rerank argument: a callable (query_text, [texts]) -> [scores]."""
    if callable(rerank):
        return rerank  # type: ignore[no-any-return]
    raise InvalidParameterError(f"rerank must be a callable (query_text, [texts]) -> [scores], got {rerank!r}")


def check_depth(rerank_depth: Any) -> int:
    if isinstance(rerank_depth, bool) or not isinstance(rerank_depth, int) or not 1 <= rerank_depth <= MAX_RERANK_DEPTH:
        raise InvalidParameterError(f"rerank_depth must be between 1 and {MAX_RERANK_DEPTH}, got {rerank_depth!r}")
    return rerank_depth


def apply(refs: Sequence[ChunkRef], query_text: str, reranker: Reranker, skip: int, top_k: int) -> list[ChunkRef]:
    """refs re-ordered by the reranker's score (ties: the fused order), then rows skip .. skip + top_k;
    each ref keeps its fused score and carries rerank_score."""
    if not refs:
        return []
    scores = list(reranker(query_text, [r.content or "" for r in refs]))
    if len(scores) != len(refs):
        raise RetrievalError(f"the reranker returned {len(scores)} scores for {len(refs)} texts")
    for s in scores:
        if isinstance(s, bool) or not isinstance(s, (int, float, np.floating)) or not math.isfinite(float(s)):
            raise RetrievalError(f"the reranker returned a score that is not a finite number: {s!r}")
    order = sorted(range(len(refs)), key=lambda i: (-float(scores[i]), i))
    return [dataclasses.replace(refs[i], rerank_score=float(scores[i])) for i in order][skip:skip + top_k]
