"""Fusion in pure Python, with the arithmetic of SQL: hybrid.rrf_fuse (weighted RRF) and hybrid.fuse
(RRF, convex combination of min-max normalized scores, DBSF, blend), written as hybrid._fusion_term is."""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from typing import Any, Sequence

from ._paths import sql_dir
from .errors import InvalidParameterError, RetrievalError
from .types import BRANCH, BRANCHES, ChunkRef, _check_rrf_k, _check_weight


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
    ws = [_check_weight(f"weights[{i}]", w) for i, w in enumerate(ws, start=1)]
    _check_rrf_k(rrf_k)
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 1000):
        raise InvalidParameterError(f"top_k must be between 1 and 1000, got {top_k!r}")
    return [float(w) for w in ws]


def rrf_scores(
    rankings: Sequence[Sequence[str]], weights: Sequence[float] | None = None, rrf_k: float = 60,
    top_k: int | None = None,
) -> list[tuple[str, float, list[int | None]]]:
    """Fuse ranked id lists: (id, score, rank in each list) by score desc, then id; as hybrid.rrf_fuse."""
    # an id scores > 0 exactly when a list of weight > 0 holds it: fuse_scores' rule for rrf
    return fuse_scores(rankings, weights, "rrf", rrf_k, top_k)


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
    return _fuse_refs("rrf_fuse", rankings, weights, "rrf", rrf_k, top_k)


def _fusion_methods() -> tuple[tuple[str, bool], ...]:
    """(name, needs_scores) of each fusion method, read from the one list SQL's hybrid.fusion_methods() holds
    (sql/idempotent/004_registry.sql)."""
    text = sql_dir().joinpath("idempotent", "004_registry.sql").read_text(encoding="utf-8")
    rows = text.split("-- fusion methods:", 1)[1].split("-- end of fusion methods", 1)[0]
    return tuple((name, flag == "true") for name, flag in re.findall(r"^\s*\('(\w+)', (true|false),", rows, re.M))


FUSIONS = tuple(name for name, _ in _fusion_methods())
"""The fusion methods of hybrid_retrieve and hybrid.fuse, in the registry's order (the default, convex, first)."""
RANK_ONLY = frozenset(name for name, needs_scores in _fusion_methods() if not needs_scores)
"""The methods that fuse ranks alone (no scores needed): rrf."""


def shown(value: Any) -> str:
    """A caller's value as SQL's hybrid._shown echoes it in an error: quoted, at most 64 characters whole."""
    if value is None:
        return "NULL"
    text = str(value)
    if len(text) <= 64:
        return "'" + text.replace("'", "''") + "'"
    return "'" + text[:40].replace("'", "''") + f"'... ({len(text)} characters)"


def no_such(what: str, value: Any) -> InvalidParameterError:
    """The error SQL's hybrid._no_such raises: what ('fusion' or 'branch') must be one of the registry's names."""
    names = FUSIONS if what == "fusion" else tuple(b.name for b in BRANCHES)
    return InvalidParameterError(f"{what} must be one of {', '.join(shown(n) for n in names)}, got {shown(value)}")


def check_fusion(fusion: Any) -> str:
    """fusion, if it is one of FUSIONS (else 22023 with SQL's words)."""
    if not isinstance(fusion, str) or fusion not in FUSIONS:
        raise no_such("fusion", fusion)
    return fusion

# the largest score (in size) fusion accepts, as SQL's hybrid._check_scores: weights times scores summed stay finite
MAX_SCORE = 1e12

# blend's saturation constant for lexical scores: the lexical branch's blend_k (hybrid.branch), chosen on the shared
# collections (bench/quality.py's leave-one-collection-out grid at top_k 10)
BLEND_K = float(BRANCH["lexical"].blend_k or 0)


def blend_score(branch: str, value: float, k: float | None = None) -> float:
    """A branch hit's score on blend's absolute 0..1 scale, as hybrid._blend_score, by the branch's scale:
    a distance (dense: the cosine distance) gives the similarity 1 - d, 0 if negative; a score s (lexical: BM25 or
    ts_rank) gives s / (s + k), k the branch's blend_k (BLEND_K for lexical) unless given; hops give 1 / hops."""
    b = BRANCH.get(branch)
    if b is None:
        raise no_such("branch", branch)
    if b.scale == "distance":
        return max(0.0, 1 - value)
    if b.scale == "score":
        s = max(0.0, value)
        return s / (s + (k if k is not None else b.blend_k or BLEND_K))
    return 1 / value


# graph_decay's default: hybrid.retrieve's, chosen on CACM's citation graph with bench/graph_quality.py (docs/graph.md)
GRAPH_DECAY = 0.4


def graph_score(own: float, weight: float, seed_score: float, decay: float, hops: int) -> float:
    """A graph hit's fused score, as hybrid._graph_score: the greater of its own fused (dense + lexical) score
    own (0 if none) and weight * the fused score of the seed that reached it * decay ^ hops."""
    return max(own, weight * seed_score * decay ** hops)


# term_coverage's default: a lexical list none of whose three best hits holds two of the query's terms weighs half; on the
# four shared collections it changes no ranking at top_k 10 (docs/searching.md)
TERM_COVERAGE = 2


def lexical_strength(query_terms: int, best_terms: int, term_coverage: int = TERM_COVERAGE) -> float:
    """The factor hybrid_retrieve multiplies keyword_weight by, as hybrid._lexical_strength: 1 when the query has
    no term or term_coverage is 1, else min(1, max(best_terms, 1) / min(query_terms, term_coverage)), where
    best_terms is the most distinct query terms one of the lexical list's three best hits holds. SQL's
    hybrid.lexical_strength(query_text, chunk_ids, term_coverage) counts the terms for a list of chunk ids."""
    if query_terms <= 0 or term_coverage <= 1:
        return 1.0
    return min(1.0, max(best_terms, 1) / min(query_terms, term_coverage))


def list_stats(scores: Sequence[float]) -> tuple[float, float, float, float]:
    """(lowest, highest, mean, population standard deviation) of one list's scores, best first, computed as
    PostgreSQL's min, max, avg and stddev_pop over float8 are (Youngs-Cramer), in the same order."""
    n = 0.0
    sx = 0.0
    sxx = 0.0
    for x in scores:
        old = n
        n += 1.0
        sx += x
        if old > 0.0:
            tmp = x * n - sx
            sxx += tmp * tmp / (n * old)
    if n == 0.0:
        raise InvalidParameterError("list_stats needs at least one score")
    sd = 0.0 if sxx <= 0.0 else math.sqrt(sxx / n)
    return min(scores), max(scores), sx / n, sd


def fusion_term(fusion: str, weight: float, rrf_k: float, rank: int, score: float | None,
                stats: tuple[float, float, float, float] | None) -> float:
    """One list's term in an item's fused score: hybrid._fusion_term's arithmetic."""
    if fusion == "rrf":
        return weight / (rrf_k + rank)
    if fusion == "blend":
        assert score is not None
        return weight * score
    assert score is not None and stats is not None
    lo, hi, mean, sd = stats
    if fusion == "convex":
        return weight * ((score - lo) / (hi - lo) if hi > lo else 1.0)
    if fusion == "dbsf":
        return weight * (min(1.0, max(0.0, (score - (mean - 3 * sd)) / (6 * sd))) if sd > 0 else 1.0)
    raise no_such("fusion", fusion)


def fuse_scores(
    rankings: Sequence[Sequence[str]], weights: Sequence[float] | None = None, fusion: str = "rrf",
    rrf_k: float = 60, top_k: int | None = None, scores: Sequence[Sequence[float]] | None = None,
) -> list[tuple[str, float, list[int | None]]]:
    """Fuse ranked id lists: (id, score, rank in each list) by score desc, then id; as SQL's hybrid.fuse.

    fusion (one of FUSIONS): 'rrf' (ranks), 'convex' (each list's scores min-max normalized) or 'dbsf' (normalized by
    mean +- 3 population standard deviations, clipped to 0..1) or 'blend' (the scores as given, weighted: bring
    them on an absolute, bounded scale, e.g. by blend_score). scores: one number per id of each
    ranking, higher is better (needed by convex, dbsf and blend). A repeated id keeps its best rank and the score
    there; ids found only in lists of weight 0 are dropped.
    """
    check_fusion(fusion)
    if fusion not in RANK_ONLY:
        if scores is None:
            raise InvalidParameterError(
                f"scores must be given for fusion '{fusion}': one list of numbers (higher is better) per ranking")
        if len(scores) != len(rankings) or any(len(s) != len(r) for s, r in zip(scores, rankings)) or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                for s in scores for x in s):
            raise InvalidParameterError(
                "scores must be a JSON array of arrays of numbers, one number for each id of rankings")
        for i, s in enumerate(scores, start=1):
            for j, x in enumerate(s, start=1):
                if abs(x) > MAX_SCORE:
                    raise InvalidParameterError(
                        f"scores[{i}][{j}] must be a finite number between -1e12 and 1e12, got {x!r}")
    ws = check_fusion_args(len(rankings), weights, rrf_k, top_k)
    entries: list[dict[str, tuple[int, float | None]]] = []
    stats: list[tuple[float, float, float, float] | None] = []
    for i, ranking in enumerate(rankings):
        seen: dict[str, tuple[int, float | None]] = {}
        for r, item in enumerate(ranking, start=1):
            if item not in seen:
                seen[item] = (r, float(scores[i][r - 1]) if scores is not None and fusion not in RANK_ONLY else None)
        entries.append(seen)
        if fusion not in RANK_ONLY and seen:
            # in rank order, as hybrid.fuse's window aggregates read them
            stats.append(list_stats([sc for _, sc in sorted(seen.values(), key=lambda e: e[0])]))  # type: ignore[misc]
        else:
            stats.append(None)
    order: dict[str, None] = {}
    for seen in entries:
        order.update(dict.fromkeys(seen))
    out: list[tuple[str, float, list[int | None]]] = []
    for item in order:
        total = 0.0
        first = True
        live = False
        ranks: list[int | None] = []
        for i, seen in enumerate(entries):
            hit = seen.get(item)
            ranks.append(hit[0] if hit else None)
            if hit is None:
                continue
            term = fusion_term(fusion, ws[i], rrf_k, hit[0], hit[1], stats[i])
            total = term if first else total + term
            first = False
            live = live or ws[i] > 0
        if live:
            out.append((item, total, ranks))
    out.sort(key=lambda t: (-t[1], t[0]))
    return out[:top_k] if top_k is not None else out


def fuse(
    rankings: Sequence[Sequence[ChunkRef]],
    weights: Sequence[float] | None = None,
    fusion: str = "rrf",
    rrf_k: float = 60,
    top_k: int | None = None,
) -> list[ChunkRef]:
    """Fuse ranked ChunkRef lists by fusion ('rrf', 'convex', 'dbsf' or 'blend'), with hybrid.fuse's arithmetic.

    Each ref's score is its list's score (higher is better): what convex and dbsf normalize and blend adds
    as it is. All refs share one tenant (else RetrievalError). The returned refs carry the fused score; a
    chunk keeps the content and metadata of the first list that holds it. Ties are broken by chunk_id.
    """
    return _fuse_refs("fuse", rankings, weights, fusion, rrf_k, top_k)


def _fuse_refs(caller: str, rankings: Sequence[Sequence[ChunkRef]], weights: Sequence[float] | None, fusion: str,
               rrf_k: float, top_k: int | None) -> list[ChunkRef]:
    """fuse_scores over ChunkRef lists (scores: each ref's score); a chunk keeps the first list's ref."""
    tenants = {ref.tenant_id for ranking in rankings for ref in ranking}
    if len(tenants) > 1:
        raise RetrievalError(f"{caller}: all refs must share one tenant_id, got {sorted(tenants)}")
    first_ref: dict[str, ChunkRef] = {}
    for ranking in rankings:
        for ref in ranking:
            first_ref.setdefault(ref.chunk_id, ref)
    fused = fuse_scores([[ref.chunk_id for ref in ranking] for ranking in rankings], weights, fusion, rrf_k, top_k,
                        [[ref.score for ref in ranking] for ranking in rankings])
    return [dataclasses.replace(first_ref[item], score=score) for item, score, _ in fused]
