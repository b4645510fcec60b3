"""Value types: ChunkRef (a retrieved chunk), HybridWeights, and Chunk / Edge for ingestion."""

from __future__ import annotations

import math
import re
from datetime import datetime
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .errors import InvalidParameterError


@dataclass(frozen=True)
class Branch:
    """A retrieval branch, as SQL's registry hybrid.branch declares it (a test holds the two equal).

    stage: 'list' (searched from the query, fused) or 'graph' (expanded from the fused list's seeds). scale: what
    its own measure is: 'distance' (lower is better; its score is 1 - d), 'score' (higher is better) or 'hops'
    (its score is 1 / hops). blend_k: blend's saturation constant for a score, s / (s + blend_k). query_param,
    weight_param, floor_param: its hybrid_retrieve parameters; search: its search function, whose first four
    parameters are the query, top_k, corpus_ids and filter (extra: the RetrieveQuery fields it also takes, by
    name); rank_column, value_column: its columns in hybrid_retrieve's rows (the branches of 0.3); label: its
    column heading in the CLI's tables.
    """

    name: str
    position: int
    stage: str
    scale: str
    blend_k: float | None
    query_param: str
    weight_param: str
    floor_param: str
    search: str
    rank_column: str | None = None
    value_column: str | None = None
    label: str = ""
    extra: tuple[str, ...] = ()


BRANCHES: tuple[Branch, ...] = (
    Branch("dense", 1, "list", "distance", None, "query_embedding", "vector_weight", "min_vector_score",
           "hybrid.search_dense", "vector_rank", "vector_distance", "dense"),
    Branch("lexical", 2, "list", "score", 10.0, "query_text", "keyword_weight", "min_keyword_score",
           "hybrid.search_lexical", "keyword_rank", "keyword_score", "lex", ("lexical",)),
    Branch("sparse", 3, "list", "score", 10.0, "query_sparse", "sparse_weight", "min_sparse_score",
           "hybrid.search_sparse", None, None, "sparse"),
    Branch("graph", 100, "graph", "hops", None, "graph_seeds", "graph_weight", "min_graph_score",
           "hybrid.search_graph", "graph_rank", "graph_distance", "graph"),
)
"""The retrieval branches in hybrid.branch's order: the Python mirror of that registry."""

BRANCH = {b.name: b for b in BRANCHES}


def shown_branches(refs: Sequence[ChunkRef]) -> list[Branch]:
    """The branches a results table shows a rank column for: those of 0.3 always, a later one where a row has it."""
    return [b for b in BRANCHES if b.rank_column or any(b.name in r.ranks for r in refs)]


@dataclass(frozen=True)
class ChunkRef:
    """A chunk returned by retrieval, with its fused score and each source's rank and raw score."""

    chunk_id: str
    tenant_id: str
    corpus_id: str | None = None
    document_id: str | None = None
    score: float = 0.0
    content: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    acl_labels: tuple[str, ...] = ()
    vector_rank: int | None = None
    keyword_rank: int | None = None
    graph_rank: int | None = None
    vector_distance: float | None = None
    keyword_score: float | None = None
    graph_distance: int | None = None
    position: int | None = None
    graph_context: tuple[Mapping[str, Any], ...] | None = None
    siblings: tuple[Mapping[str, Any], ...] | None = None
    rerank_score: float | None = None
    ranks: Mapping[str, int] = field(default_factory=dict)
    """The row's rank in each branch that found it, by branch name (hybrid.branch), 1 = best."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """The row's own measure in each branch that found it, by branch name, as the branch's search function returns
    it (dense: the cosine distance; lexical: the BM25 or ts_rank score; graph: hops)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ChunkRef:
        """Build from a hybrid_retrieve row mapped by column name."""
        ctx = row.get("graph_context")
        sib = row.get("siblings")
        return cls(
            chunk_id=row["chunk_id"],
            tenant_id=row["tenant_id"],
            corpus_id=row.get("corpus_id"),
            document_id=row.get("document_id"),
            score=float(row["score"]),
            content=row.get("content"),
            metadata=row.get("metadata") or {},
            acl_labels=tuple(row.get("acl_labels") or ()),
            vector_rank=row.get("vector_rank"),
            keyword_rank=row.get("keyword_rank"),
            graph_rank=row.get("graph_rank"),
            vector_distance=row.get("vector_distance"),
            keyword_score=row.get("keyword_score"),
            graph_distance=row.get("graph_distance"),
            position=row.get("position"),
            graph_context=tuple(ctx) if ctx is not None else None,
            siblings=tuple(sib) if sib is not None else None,
            ranks=dict(row.get("ranks") or {}),
            scores={k: float(v) for k, v in (row.get("scores") or {}).items()},
        )


def _number(name: str, value: str, text: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InvalidParameterError(f"{name} must be numbers, got {value.strip()!r} in {text!r}") from None


# the accepted ranges of fusion weights and rrf_k, as SQL's hybrid._check_number: every fusion sum
# stays finite
MAX_WEIGHT = 1_000_000
MAX_RRF_K = 1_000_000


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _check_weight(name: str, value: Any) -> float:
    if not _finite(value) or not 0 <= value <= MAX_WEIGHT:
        raise InvalidParameterError(f"{name} must be a finite number between 0 and {MAX_WEIGHT}, got {value!r}")
    return float(value)


def _check_rrf_k(value: Any) -> float:
    if not _finite(value) or not 0 < value <= MAX_RRF_K:
        raise InvalidParameterError(f"rrf_k must be a finite number > 0 and <= {MAX_RRF_K}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class HybridWeights:
    """RRF weights of the dense, lexical and graph sources; 0 disables a source."""

    vector: float = 1.0
    keyword: float = 1.0
    graph: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "vector", _check_weight("vector_weight", self.vector))
        object.__setattr__(self, "keyword", _check_weight("keyword_weight", self.keyword))
        object.__setattr__(self, "graph", _check_weight("graph_weight", self.graph))

    @classmethod
    def parse(cls, text: str) -> HybridWeights:
        """Parse "vector,keyword,graph" (e.g. "1,1,0.5") or "vector=1,graph=0"."""
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if parts and all("=" in p for p in parts):
            kw: dict[str, float] = {}
            for name, value in (p.split("=", 1) for p in parts):
                if name.strip() not in ("vector", "keyword", "graph"):
                    raise InvalidParameterError(f"weights: unknown source {name.strip()!r}; use vector, keyword, graph")
                kw[name.strip()] = _number("weights", value, text)
            return cls(**kw)
        if len(parts) != 3:
            raise InvalidParameterError(
                f"weights must be three numbers 'vector,keyword,graph' (or 'vector=1,graph=0'), got {len(parts)} "
                f"in {text!r}")
        v, k, g = (_number("weights", p, text) for p in parts)
        return cls(v, k, g)


@dataclass(frozen=True)
class Chunk:
    """A chunk to ingest. embedding may be None (then only lexical and graph search find it)."""

    chunk_id: str
    document_id: str
    content: str
    embedding: Sequence[float] | Any | None = None
    position: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    acl_labels: Sequence[str] = ()
    tenant_id: str | None = None
    sparse_embedding: Mapping[Any, float] | str | None = None
    """A learned-sparse vector (SPLADE and the like): {token_id: weight} (token ids from 0) or pgvector's text form
    "{index:weight,...}/dimensions" (indices from 1); at most 1,000 non-zero weights (sparse_text)."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Chunk:
        """Build from a dict such as a JSONL line; unknown keys are rejected."""
        allowed = {"chunk_id", "document_id", "content", "embedding", "position", "metadata", "acl_labels", "tenant_id",
                   "sparse_embedding"}
        unknown = set(data) - allowed
        if unknown:
            raise InvalidParameterError(f"unknown chunk field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        return cls(
            chunk_id=data.get("chunk_id"),  # type: ignore[arg-type]
            document_id=data.get("document_id"),  # type: ignore[arg-type]
            content=data.get("content"),  # type: ignore[arg-type]
            embedding=data.get("embedding"),
            position=data.get("position", 0) or 0,
            metadata=data.get("metadata") or {},
            acl_labels=tuple(data.get("acl_labels") or ()),
            tenant_id=data.get("tenant_id"),
            sparse_embedding=data.get("sparse_embedding"),
        )


@dataclass(frozen=True)
class Edge:
    """A typed graph edge between two node ids (chunk ids or entity ids) of one tenant."""

    src: str
    dst: str
    rel: str
    properties: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Edge:
        """Build from {"src", "dst", "rel", "properties"?}."""
        return cls(src=data.get("src"), dst=data.get("dst"), rel=data.get("rel"),  # type: ignore[arg-type]
                   properties=data.get("properties") or {})


@dataclass(frozen=True)
class IngestResult:
    """What an ingest did."""

    inserted: int
    updated: int
    unchanged: int
    superseded: int


@dataclass(frozen=True)
class DocumentInfo:
    """A document a tenant holds, as the caller sees it (hybrid.documents)."""

    corpus_id: str
    document_id: str
    chunks: int
    title: str | None
    source: str | None
    updated_at: datetime


@dataclass(frozen=True)
class CorpusInfo:
    """A corpus of a tenant (hybrid.corpora): the folder pyhybrid ingest syncs it with, its size as the caller sees
    it, and the embedder it records."""

    corpus_id: str
    source_root: str | None
    documents: int
    chunks: int
    embedder: dict[str, Any] | None = None
    """The embedder that filled it (name, kind, dim, normalize, query_prefix, passage_prefix; None: not recorded)."""
    reembedding: dict[str, Any] | None = None
    """While it is re-embedded (pyhybrid reembed): {"embedder": the one it moves to, "after": the last chunk id done}."""


@dataclass(frozen=True)
class EdgeResult:
    """What an add_edges call did."""

    edges_added: int
    edges_present: int
    nodes_added: int


SPARSE_DIM = 1_000_000_000
"""The one dimension sparse vectors are stored and compared at (pgvector's largest; SQL: hybrid._sparse)."""
MAX_SPARSE_NONZEROS = 1000
"""The most non-zero weights a stored sparse vector may hold (pgvector's HNSW limit for sparsevec)."""
_SPARSE_TEXT = re.compile(r"^\s*\{\s*(?:\d+\s*:\s*[^,{}:/]+(?:\s*,\s*\d+\s*:\s*[^,{}:/]+)*)?\s*\}\s*/\s*\d+\s*$")


def sparse_text(name: str, value: Any, *, limit: int | None = MAX_SPARSE_NONZEROS) -> str | None:
    """A sparse vector as pgvector's text form at SPARSE_DIM: from {token_id: weight} (ids from 0, so id i is index
    i + 1; zero weights dropped) or from the text form itself ("{1:0.5,7:1.2}/30522", indices from 1, any dimension).
    Weights finite; at most limit non-zero ones. None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        if not _SPARSE_TEXT.match(value):
            raise InvalidParameterError(f"{name} must be {{token_id: weight}} or pgvector's text form "
                                        f"'{{index:weight,...}}/dimensions' (indices from 1), got {value[:60]!r}")
        pairs = [p.split(":") for p in value.strip().split("}")[0].strip("{ ").split(",") if p.strip()]
        items = {int(k) - 1: _sparse_weight(name, v, k) for k, v in pairs}
    elif isinstance(value, Mapping):
        items = {}
        for k, v in value.items():
            if isinstance(k, bool) or not (isinstance(k, int) or (isinstance(k, str) and k.strip().isdigit())):
                raise InvalidParameterError(f"{name}: token ids must be integers from 0, got {k!r}")
            items[int(k)] = _sparse_weight(name, v, k)
    else:
        raise InvalidParameterError(f"{name} must be {{token_id: weight}} or pgvector's text form, "
                                    f"got {type(value).__name__}")
    if any(not 0 <= k < SPARSE_DIM for k in items):
        raise InvalidParameterError(f"{name}: token ids must be from 0 to {SPARSE_DIM - 1}")
    nonzero = sorted((k, w) for k, w in items.items() if w != 0)
    if limit is not None and len(nonzero) > limit:
        raise InvalidParameterError(f"{name} has {len(nonzero)} non-zero values; at most {limit} "
                                    "(pgvector's HNSW limit for sparsevec)")
    return "{" + ",".join(f"{k + 1}:{w!r}" for k, w in nonzero) + f"}}/{SPARSE_DIM}"


def _sparse_weight(name: str, value: Any, key: Any) -> float:
    try:
        w = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}: the weight of {key!r} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(w):
        raise InvalidParameterError(f"{name}: the weight of {key!r} must be a finite number, got {value!r}")
    return w
