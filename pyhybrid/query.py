"""RetrieveQuery: the arguments of hybrid_retrieve, validated once, rendered as the one SQL call.

The field names are the SQL parameter names; adding a parameter to hybrid.retrieve means adding
one field here (with its SQL type) and nothing else in Python.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import InvalidParameterError
from .fusion import GRAPH_DECAY, TERM_COVERAGE, check_fusion
from .types import HybridWeights, sparse_text
from .types import _check_rrf_k as _rrf_k
from .types import _check_weight as _weight


MAX_QUERY_TEXT = 20000
"""The longest query_text hybrid.retrieve accepts, in characters (a query, not a document)."""
MAX_GRAPH_SEEDS = 1000
"""The most graph_seeds hybrid.retrieve accepts."""
def _sql(sql_type: str, **cli: Any) -> Any:
    """A field's SQL type; cli: the flag `pyhybrid search` gives it (flag, help, and parse: 'float' or 'json'), for the
    parameters its own flags do not cover."""
    return {"sql_type": sql_type, **({"cli": cli} if cli else {})}


@dataclass(frozen=True, eq=False)
class RetrieveQuery:
    """One hybrid_retrieve call. Every argument is checked with the rule and message of the SQL function.

    query_embedding: the dense query (1-D, finite, non-zero; the install's dimension). query_text: the
    lexical query. graph_seeds: chunk or entity ids to start the graph branch from. corpus_ids: restrict
    to these corpora. top_k: rows returned (1..1000). per_source_k: each branch's cut (top_k..10000,
    default greatest(top_k*3, 30)). vector_weight, keyword_weight, graph_weight: the branches' fusion weights (0 to 1,000,000;
    0 disables a branch). rrf_k: the RRF constant (> 0, at most 1,000,000). filter: a JSON object the chunk metadata must
    contain. graph_hops: 1..3. lexical: 'bm25', 'ts_rank' or None (BM25 where installed).
    graph_expand: seed the graph branch with the best N dense/lexical hits (0..100).
    with_graph_context: add each row's graph neighbourhood. per_document: the best chunk per document.
    fusion: 'rrf' (ranks), 'convex' (min-max normalized scores), 'dbsf' (scores normalized by mean +- 3
    standard deviations) or 'blend' (scores on an absolute scale: cosine, s / (s + BLEND_K) for BM25, 1 / hops; pyhybrid.fusion);
    FUSIONS lists them. skip: fused rows to skip before the top_k returned (0..10000 - top_k;
    pages are stable when per_source_k >= skip + top_k is given). siblings: add the n nearest chunks of the
    same document on each side of each hit (0..20). graph_edge_types: traverse only these edge types.
    min_vector_score, min_keyword_score, min_graph_score: per-branch floors (0 to 1,000,000, or None) on the
    branch's own score (cosine similarity, BM25 or ts_rank score, 1 / hops), applied before graph seeding and
    fusion: a branch keeps only the hits at or above its floor, so a query none clears returns no rows.
    graph_decay: a graph hit scores the greater of its own fused score and graph_weight * its seed's fused score *
    graph_decay ^ hops (0 up to, not including, 1; graph_weight * graph_decay below 1, so a chunk reached only
    through the graph scores below the seed that reached it). The default was chosen on data (docs/graph.md).
    term_coverage: the lexical list weighs keyword_weight in full once one of its 3 best hits holds term_coverage of the
    query's distinct terms (all of them, for a shorter query), else that share of it (1..32; 1: always in full):
    with the default 2, a list whose every hit matched one word of a longer query counts half
    (pyhybrid.fusion.lexical_strength; docs/searching.md). abstain: return no rows (and an AbstainedWarning)
    when nothing is relevant: the mean similarity of the dense branch's ten best hits below the tenant's calibrated
    floor (TenantSession.calibrate_abstention), the best of them below 1.5 times it, and none of the three best
    lexical hits holding every term of the query;
    a call with graph_seeds is never abstained. diversity: 0 to 1 (0: off): the page is chosen by maximal marginal relevance,
    each row the candidate of the greatest (1 - diversity) x relevance - diversity x its greatest similarity to the
    rows above it (docs/searching.md). query_sparse: a learned-sparse query (SPLADE and the like), {token_id: weight}
    or pgvector's text form (types.sparse_text), matched by inner product against the chunks' sparse_embedding;
    sparse_weight its fusion weight, min_sparse_score its floor on the inner product.
    """

    query_embedding: Any = field(default=None, metadata=_sql("vector"))
    query_text: str | None = field(default=None, metadata=_sql("text"))
    graph_seeds: Sequence[str] | None = field(default=None, metadata=_sql("text[]"))
    corpus_ids: Sequence[str] | None = field(default=None, metadata=_sql("text[]"))
    top_k: int = field(default=10, metadata=_sql("integer"))
    per_source_k: int | None = field(default=None, metadata=_sql("integer"))
    vector_weight: float = field(default=1.0, metadata=_sql("double precision"))
    keyword_weight: float = field(default=1.0, metadata=_sql("double precision"))
    graph_weight: float = field(default=0.5, metadata=_sql("double precision"))
    rrf_k: float = field(default=60.0, metadata=_sql("double precision"))
    filter: Mapping[str, Any] | None = field(default=None, metadata=_sql("jsonb"))
    graph_hops: int = field(default=1, metadata=_sql("integer"))
    lexical: str | None = field(default=None, metadata=_sql("text"))
    graph_expand: int = field(default=0, metadata=_sql("integer"))
    with_graph_context: bool = field(default=False, metadata=_sql("boolean"))
    per_document: bool = field(default=False, metadata=_sql("boolean"))
    fusion: str = field(default="convex", metadata=_sql("text"))
    skip: int = field(default=0, metadata=_sql("integer"))
    siblings: int = field(default=0, metadata=_sql("integer"))
    graph_edge_types: Sequence[str] | None = field(default=None, metadata=_sql("text[]"))
    min_vector_score: float | None = field(default=None, metadata=_sql("double precision"))
    min_keyword_score: float | None = field(default=None, metadata=_sql("double precision"))
    min_graph_score: float | None = field(default=None, metadata=_sql("double precision"))
    graph_decay: float = field(default=GRAPH_DECAY, metadata=_sql("double precision"))
    term_coverage: int = field(default=TERM_COVERAGE, metadata=_sql("integer"))
    abstain: bool = field(default=False, metadata=_sql("boolean"))
    diversity: float = field(default=0.0, metadata=_sql(
        "double precision", flag="--diversity", parse="float",
        help="0 to 1: the page chosen by maximal marginal relevance over the chunks' embeddings, so that near-duplicates "
             "do not fill it (default 0: off)"))
    query_sparse: Mapping[Any, float] | str | None = field(default=None, metadata=_sql(
        "sparsevec", flag="--sparse-json", parse="json",
        help='the learned-sparse query as JSON, {"token_id": weight, ...} (ids from 0) or pgvector\'s text form as a '
             'JSON string; searched against the chunks\' sparse_embedding (default: none)'))
    sparse_weight: float = field(default=1.0, metadata=_sql("double precision"))
    min_sparse_score: float | None = field(default=None, metadata=_sql("double precision"))

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "query_embedding", _embedding(self.query_embedding))
        put(self, "query_text", _text("query_text", self.query_text))
        if self.query_text is not None and len(self.query_text) > MAX_QUERY_TEXT:
            raise InvalidParameterError(
                f"query_text must be at most {MAX_QUERY_TEXT} characters, got {len(self.query_text)}")
        put(self, "graph_seeds", _str_list("graph_seeds", self.graph_seeds))
        if self.graph_seeds is not None and len(self.graph_seeds) > MAX_GRAPH_SEEDS:
            raise InvalidParameterError(
                f"graph_seeds must hold at most {MAX_GRAPH_SEEDS} ids, got {len(self.graph_seeds)}")
        put(self, "corpus_ids", _str_list("corpus_ids", self.corpus_ids))
        _int_between("top_k", self.top_k, 1, 1000)
        _int_between("skip", self.skip, 0, 10000 - self.top_k)
        if self.per_source_k is not None:
            low = self.skip + self.top_k
            _int_between("per_source_k", self.per_source_k, low, 10000,
                         low_name=f"top_k ({low})" if self.skip == 0 else f"skip + top_k ({low})")
        check_fusion(self.fusion)
        _int_between("siblings", self.siblings, 0, 20)
        put(self, "graph_edge_types", _str_list("graph_edge_types", self.graph_edge_types))
        if self.graph_edge_types is not None and len(self.graph_edge_types) > 100:
            raise InvalidParameterError(
                f"graph_edge_types must hold at most 100 names, got {len(self.graph_edge_types)}")
        put(self, "query_sparse", sparse_text("query_sparse", self.query_sparse, limit=None))
        for name in ("vector_weight", "keyword_weight", "graph_weight", "sparse_weight"):
            put(self, name, _weight(name, getattr(self, name)))
        put(self, "rrf_k", _rrf_k(self.rrf_k))
        for name in ("min_vector_score", "min_keyword_score", "min_graph_score", "min_sparse_score"):
            if getattr(self, name) is not None:
                put(self, name, _weight(name, getattr(self, name)))
        if isinstance(self.graph_decay, bool) or not isinstance(self.graph_decay, (int, float)) \
                or not 0 <= self.graph_decay < 1:
            raise InvalidParameterError(
                f"graph_decay must be a number from 0 up to (not including) 1, got {self.graph_decay!r}")
        put(self, "graph_decay", float(self.graph_decay))
        if self.graph_weight * self.graph_decay >= 1:
            raise InvalidParameterError(
                f"graph_weight * graph_decay must be below 1, got {self.graph_weight * self.graph_decay!r}")
        put(self, "filter", _filter(self.filter))
        _int_between("graph_hops", self.graph_hops, 1, 3)
        _int_between("graph_expand", self.graph_expand, 0, 100)
        _int_between("term_coverage", self.term_coverage, 1, 32)
        if isinstance(self.diversity, bool) or not isinstance(self.diversity, (int, float)) \
                or not 0 <= self.diversity <= 1:
            raise InvalidParameterError(f"diversity must be a number from 0 (off) to 1, got {self.diversity!r}")
        put(self, "diversity", float(self.diversity))
        if self.lexical not in (None, "bm25", "ts_rank"):
            raise InvalidParameterError(f"lexical must be 'bm25', 'ts_rank' or NULL (automatic), got {self.lexical!r}")
        for name in ("with_graph_context", "per_document", "abstain"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidParameterError(f"{name} must be true or false, got {getattr(self, name)!r}")
        has_text = self.query_text is not None and self.query_text.strip() != ""
        if self.query_embedding is None and not has_text and not self.graph_seeds and self.query_sparse is None:
            raise InvalidParameterError(
                "nothing to search: query_embedding, query_text, query_sparse and graph_seeds are all NULL or empty")
        dense = self.query_embedding is not None and self.vector_weight > 0
        lex = has_text and self.keyword_weight > 0
        graph = self.graph_weight > 0 and (bool(self.graph_seeds) or self.graph_expand > 0)
        sparse = self.query_sparse is not None and self.sparse_weight > 0
        if not (dense or lex or graph or sparse):
            raise InvalidParameterError("every source given has weight 0: nothing to fuse")

    @classmethod
    def build(cls, **kwargs: Any) -> RetrieveQuery:
        """A query from keyword arguments; the 0.1 Python names still work, with a DeprecationWarning."""
        for old, new in DEPRECATED.items():
            if old in kwargs:
                warnings.warn(f"retrieve({old}=...) is deprecated: use {new}=... (the SQL parameter name)",
                              DeprecationWarning, stacklevel=3)
                value = kwargs.pop(old)
                if old == "weights":
                    if value is not None:
                        if not isinstance(value, HybridWeights):
                            raise InvalidParameterError(f"weights must be a HybridWeights, got {type(value).__name__}")
                        kwargs.setdefault("vector_weight", value.vector)
                        kwargs.setdefault("keyword_weight", value.keyword)
                        kwargs.setdefault("graph_weight", value.graph)
                elif new in kwargs:
                    raise InvalidParameterError(f"give {new} or its deprecated name {old}, not both")
                else:
                    kwargs[new] = value
        unknown = set(kwargs) - set(PARAMETERS)
        if unknown:
            raise InvalidParameterError(
                f"retrieve() got unknown parameter(s) {sorted(unknown)}; the parameters are {list(PARAMETERS)}")
        return cls(**kwargs)

    def replace(self, **changes: Any) -> RetrieveQuery:
        """A copy with some arguments changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_sql(self, *, function: str = "hybrid_retrieve") -> str:
        """The call as one SQL statement with literal values, to paste into psql as is: only the arguments
        that differ from hybrid_retrieve's defaults, the embedding written out in full."""
        defaults = {f.name: f.default for f in dataclasses.fields(RetrieveQuery)}
        args = []
        for name, sql_type in PARAMETERS.items():
            value = getattr(self, name)
            if name != "query_embedding" and value == defaults[name]:
                continue
            if value is None:
                continue
            args.append(f"    {name} => {_literal(value, sql_type)}")
        return f"SELECT * FROM {function}(\n" + ",\n".join(args) + ");"

    def params(self) -> dict[str, Any]:
        """The call's parameters by name, as psycopg binds them (the embedding as float32 numpy)."""
        out = {name: getattr(self, name) for name in PARAMETERS}
        for name in ("graph_seeds", "corpus_ids", "graph_edge_types"):
            if out[name] is not None:
                out[name] = list(out[name])
        if out["filter"] is not None:
            out["filter"] = json.dumps(out["filter"], allow_nan=False)
        return out


PARAMETERS: dict[str, str] = {f.name: f.metadata["sql_type"] for f in dataclasses.fields(RetrieveQuery)}
"""Each parameter of hybrid.retrieve and its SQL type, in the function's order."""

DEPRECATED: dict[str, str] = {
    "vector": "query_embedding", "per_backend_top_k": "per_source_k", "k": "rrf_k", "filters": "filter",
    "weights": "vector_weight, keyword_weight, graph_weight",
}
"""0.1's Python keyword names, accepted with a DeprecationWarning (kept in 0.3.0; removal: CHANGELOG.md)."""

RESULT_COLUMNS: dict[str, str] = {
    "chunk_id": "text", "document_id": "text", "corpus_id": "text", "tenant_id": "text",
    "score": "double precision", "vector_rank": "integer", "keyword_rank": "integer", "graph_rank": "integer",
    "vector_distance": "double precision", "keyword_score": "double precision", "graph_distance": "integer",
    "content": "text", "metadata": "jsonb", "acl_labels": "text[]", "position": "integer", "graph_context": "jsonb",
    "siblings": "jsonb", "ranks": "jsonb", "scores": "jsonb",
}
"""The columns of hybrid.retrieve_row (what hybrid_retrieve returns), in order; a test holds it to the SQL type."""

RETRIEVE_SQL = "SELECT * FROM hybrid.retrieve(\n" + ",\n".join(
    f"    {name} => %({name})s::{sql_type}" for name, sql_type in PARAMETERS.items()) + ")"
"""The one SQL statement every client sends."""

MANY_SQL = ("SELECT * FROM hybrid.retrieve_many(\n    query_embeddings => %(query_embeddings)s::vector[],\n"
            "    query_texts => %(query_texts)s::text[],\n" + ",\n".join(
                f"    {name} => %({name})s::{sql_type}" for name, sql_type in PARAMETERS.items()
                if name not in ("query_embedding", "query_text")) + ")")
"""hybrid.retrieve_many: several formulations of one question in one call."""

MAX_FORMULATIONS = 10


def many_params(query_texts: Sequence[str | None] | None, query_embeddings: Sequence[Any] | None,
                kwargs: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a retrieve_many call, each formulation and the shared arguments checked as
    hybrid_retrieve checks them."""
    texts = list(query_texts) if query_texts is not None else None
    vecs = list(query_embeddings) if query_embeddings is not None else None
    if isinstance(query_texts, str):
        raise InvalidParameterError("query_texts must be a list of strings, not a single string")
    n = max(len(texts or []), len(vecs or []))
    if n == 0:
        raise InvalidParameterError("query_embeddings and query_texts are both NULL or empty: give one formulation or more")
    if texts is not None and vecs is not None and len(texts) != len(vecs):
        raise InvalidParameterError(f"query_embeddings has {len(vecs)} entries but query_texts has {len(texts)}; "
                                    "they must match (NULL entries are allowed)")
    if n > MAX_FORMULATIONS:
        raise InvalidParameterError(
            f"query_embeddings and query_texts must hold at most {MAX_FORMULATIONS} formulations, got {n}")
    for name in ("query_embedding", "query_text"):
        if name in kwargs:
            raise InvalidParameterError(f"retrieve_many() takes query_embeddings and query_texts, not {name}")
    checked = [RetrieveQuery.build(query_text=texts[i] if texts else None,
                                   query_embedding=vecs[i] if vecs else None, **kwargs) for i in range(n)]
    if checked[0].skip + checked[0].top_k > 1000:
        raise InvalidParameterError(f"skip must be between 0 and {1000 - checked[0].top_k}, got {checked[0].skip}")
    out = checked[0].params()
    out["query_texts"] = [q.query_text for q in checked] if texts is not None else None
    out["query_embeddings"] = [q.query_embedding for q in checked] if vecs is not None else None
    del out["query_text"], out["query_embedding"]
    return out

EXPLAIN_SQL = "SELECT hybrid.explain_retrieve(\n" + ",\n".join(
    f"    {name} => %({name})s::{sql_type}" for name, sql_type in PARAMETERS.items()) + ") AS report"
"""The same call, explained: hybrid.explain_retrieve's jsonb report."""


def _embedding(value: Any) -> np.ndarray[Any, Any] | None:
    if value is None:
        return None
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError("query_embedding must be a sequence of numbers") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidParameterError(f"query_embedding must be a 1-D sequence of numbers, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidParameterError("query_embedding must contain only finite numbers (no NaN or infinity)")
    if not arr.any():
        raise InvalidParameterError("query_embedding must not be the zero vector (cosine distance is undefined)")
    out = arr.astype(np.float32)
    out.flags.writeable = False
    return out


def check_text(name: str, value: str) -> str:
    """A string PostgreSQL can store: no NUL character, no lone surrogate."""
    if "\x00" in value:
        raise InvalidParameterError(f"{name} contains a NUL character, which PostgreSQL cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidParameterError(
            f"{name} is not valid Unicode text: a lone surrogate at position {exc.start}") from None
    return value


def _text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameterError(f"{name} must be a string, got {type(value).__name__}")
    return check_text(name, value)


def _str_list(name: str, values: Any) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, (str, bytes)):
        raise InvalidParameterError(f"{name} must be a list of strings, not a single string")
    try:
        out = tuple(values)
    except TypeError:
        raise InvalidParameterError(f"{name} must be a list of strings, got {type(values).__name__}") from None
    for v in out:
        if not isinstance(v, str):
            raise InvalidParameterError(f"{name} must contain only strings, got {v!r}")
        check_text(name, v)
    return out


def _int_between(name: str, value: Any, low: int, high: int, *, low_name: str | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidParameterError(f"{name} must be between {low_name or low} and {high}, got {value!r}")


def _filter(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidParameterError(f"filter must be a JSON object (a mapping), got {type(value).__name__}")
    try:
        json.dumps(dict(value), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"filter must be JSON-serializable ({exc})") from None
    return dict(value)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _literal(value: Any, sql_type: str) -> str:
    """A SQL literal of value for a parameter of sql_type (standard_conforming_strings, PostgreSQL's default)."""
    if sql_type == "vector":
        return _quote("[" + ",".join(repr(float(x)) for x in value) + "]") + "::vector"
    if sql_type == "text[]":
        return "ARRAY[" + ", ".join(_quote(v) for v in value) + "]::text[]"
    if sql_type == "jsonb":
        return _quote(json.dumps(value, allow_nan=False)) + "::jsonb"
    if sql_type == "boolean":
        return "true" if value else "false"
    if sql_type == "text":
        return _quote(value)
    if sql_type == "sparsevec":
        return _quote(value) + "::sparsevec"
    return repr(value)
