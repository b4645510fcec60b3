"""Weighted Reciprocal Rank Fusion in pure Python, with the arithmetic of hybrid.rrf_fuse."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Sequence

from .errors import InvalidParameterError, RetrievalError
from .types import ChunkRef


def check_fusion_args(n_lists: int, weights: Sequence[float] | None, rrf_k: float, top_k: int | None) -> list[float]:
    """Validate like SQL's hybrid.rrf_fuse; return the weights (default 1 each)."""
    if weights is None:
        ws = [1.0] * n_lists
    else:
        ws = list(weights)
        if len(ws) != n_lists:
            raise InvalidParameterError(
                f"weights has {len(ws)} entries but rankings has {n_lists} lists; they must match"
            )
    for i, w in enumerate(ws, start=1):
        if isinstance(w, bool) or not isinstance(w, (int, float)) or math.isnan(w) or math.isinf(w) or w < 0:
            raise InvalidParameterError(f"weights[{i}] must be a finite number >= 0, got {w!r}")
    if isinstance(rrf_k, bool) or not isinstance(rrf_k, (int, float)) or not math.isfinite(rrf_k) or rrf_k <= 0:
        raise InvalidParameterError(f"rrf_k must be a finite number > 0, got {rrf_k!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 1000):
        raise InvalidParameterError(f"top_k must be between 1 and 1000, got {top_k!r}")
    return [float(w) for w in ws]


def rrf_scores(
    rankings: Sequence[Sequence[str]], weights: Sequence[float] | None = None, rrf_k: float = 60,
    top_k: int | None = None,
) -> list[tuple[str, float, list[int | None]]]:
    """Fuse ranked id lists: (id, score, rank in each list) by score desc, then id; as hybrid.rrf_fuse."""
    ws = check_fusion_args(len(rankings), weights, rrf_k, top_k)
    ranks: dict[str, list[int | None]] = {}
    for i, ranking in enumerate(rankings):
        for r, item in enumerate(ranking, start=1):
            slot = ranks.setdefault(item, [None] * len(rankings))
            if slot[i] is None:
                slot[i] = r
    out: list[tuple[str, float, list[int | None]]] = []
    for item, rs in ranks.items():
        score = 0.0
        first = True
        for i, rank in enumerate(rs):
            if rank is None:
                continue
            term = ws[i] / (rrf_k + rank)
            # hybrid.rrf_fuse's sum() of hybrid._rrf_term starts from its first term, not from 0.0
            score = term if first else score + term
            first = False
        if score > 0:
            out.append((item, score, rs))
    out.sort(key=lambda t: (-t[1], t[0]))
    return out[:top_k] if top_k is not None else out


def rrf_fuse(
    rankings: Sequence[Sequence[ChunkRef]],
    weights: Sequence[float] | None = None,
    rrf_k: float = 60,
    top_k: int | None = None,
    **deprecated: Any,
) -> list[ChunkRef]:
    """Fuse ranked ChunkRef lists by weighted RRF: score(d) = sum_i w_i / (rrf_k + rank_i(d)).

    rankings: lists, best first, all of one tenant (else RetrievalError).
    weights: one per list, >= 0 (default 1 each). rrf_k: > 0 (0.1 called it k: still accepted, with a
    DeprecationWarning). top_k: 1..1000 or None for all.
    The returned refs carry the fused score; a chunk keeps the content and metadata of the
    first list that holds it. Ties are broken by chunk_id.
    """
    if "k" in deprecated:
        warnings.warn("rrf_fuse(k=...) is deprecated: use rrf_k=...", DeprecationWarning, stacklevel=2)
        rrf_k = deprecated.pop("k")
    if deprecated:
        raise InvalidParameterError(f"rrf_fuse() got unknown parameter(s) {sorted(deprecated)}")
    tenants = {ref.tenant_id for ranking in rankings for ref in ranking}
    if len(tenants) > 1:
        raise RetrievalError(f"rrf_fuse: all refs must share one tenant_id, got {sorted(tenants)}")
    first_ref: dict[str, ChunkRef] = {}
    for ranking in rankings:
        for ref in ranking:
            first_ref.setdefault(ref.chunk_id, ref)
    fused = rrf_scores([[ref.chunk_id for ref in ranking] for ranking in rankings], weights, rrf_k, top_k)
    return [dataclasses.replace(first_ref[item], score=score) for item, score, _ in fused]
