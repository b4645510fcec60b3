"""SQLAlchemy: hybrid_retrieve as a table-valued function, and Table definitions of the schema."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy import (
    ARRAY,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    cast,
    func,
    literal,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.sql.functions import Function
from sqlalchemy.types import UserDefinedType

from ._base import retrieve_params
from .types import HybridWeights


class Vector(UserDefinedType[Any]):
    """pgvector's vector type, passed as its text form."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


metadata = MetaData(schema="hybrid")

tenant = Table(
    "tenant", metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
corpus = Table(
    "corpus", metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("corpus_id", Text, primary_key=True),
    Column("metadata", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
chunk = Table(
    "chunk", metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("chunk_id", Text, primary_key=True),
    Column("corpus_id", Text, nullable=False),
    Column("document_id", Text, nullable=False),
    Column("position", Integer, nullable=False),
    Column("content", Text, nullable=False),
    Column("embedding", Vector()),
    Column("tsv", TSVECTOR),
    Column("acl_labels", ARRAY(Text), nullable=False),
    Column("metadata", JSONB, nullable=False),
    Column("content_hash", Text, nullable=False),
    Column("superseded", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

RESULT_COLUMNS: Sequence[tuple[str, Any]] = (
    ("chunk_id", Text), ("document_id", Text), ("corpus_id", Text), ("tenant_id", Text), ("score", Float),
    ("vector_rank", Integer), ("keyword_rank", Integer), ("graph_rank", Integer),
    ("vector_distance", Float), ("keyword_score", Float), ("graph_distance", Integer),
    ("content", Text), ("metadata", JSONB), ("acl_labels", ARRAY(Text)), ("position", Integer), ("graph_context", JSONB),
)


def hybrid_retrieve(
    vector: Any = None,
    query_text: str | None = None,
    graph_seeds: Sequence[str] | None = None,
    corpus_ids: Sequence[str] | None = None,
    top_k: int = 10,
    per_backend_top_k: int | None = None,
    weights: HybridWeights | None = None,
    k: float = 60,
    filters: Mapping[str, Any] | None = None,
    graph_hops: int = 1,
    *,
    lexical: str | None = None,
    graph_expand: int = 0,
    with_graph_context: bool = False,
    per_document: bool = False,
    name: str = "hr",
) -> Any:
    """hybrid.retrieve(...) as a table-valued function: use .c.chunk_id etc. in select() and joins.

    Arguments are validated as in the clients and bound as parameters. Run it in a transaction
    where hybrid.tenant_id is set (e.g. session.execute(text("SELECT set_config('hybrid.tenant_id', :t, true)"), ...)).
    """
    p = retrieve_params(
        vector=vector, query_text=query_text, graph_seeds=graph_seeds, corpus_ids=corpus_ids, top_k=top_k,
        per_backend_top_k=per_backend_top_k, weights=weights, k=k, filters=filters, graph_hops=graph_hops,
        lexical=lexical, graph_expand=graph_expand, with_graph_context=with_graph_context, per_document=per_document,
    )
    fn: Function[Any] = func.hybrid.retrieve(
        cast(literal(p["query_embedding"], Text), Vector()),
        literal(p["query_text"], Text),
        cast(literal(p["graph_seeds"], ARRAY(Text)), ARRAY(Text)),
        cast(literal(p["corpus_ids"], ARRAY(Text)), ARRAY(Text)),
        literal(p["top_k"], Integer),
        literal(p["per_source_k"], Integer),
        literal(p["vector_weight"], Float),
        literal(p["keyword_weight"], Float),
        literal(p["graph_weight"], Float),
        literal(p["rrf_k"], Float),
        cast(literal(p["filter"], Text), JSONB),
        literal(p["graph_hops"], Integer),
        literal(p["lexical"], Text),
        literal(p["graph_expand"], Integer),
        literal(p["with_graph_context"], Boolean),
        literal(p["per_document"], Boolean),
    )
    return fn.table_valued(*(Column(n, t) for n, t in RESULT_COLUMNS), name=name)


__all__ = ["chunk", "corpus", "hybrid_retrieve", "metadata", "tenant"]
