"""SQLAlchemy: hybrid_retrieve as a table-valued function, and Table definitions of the schema."""

from __future__ import annotations

from typing import Any, Mapping

from pgvector.sqlalchemy import SPARSEVEC, VECTOR
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
    bindparam,
    cast,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB, REGCONFIG, TSVECTOR
from sqlalchemy.sql.functions import Function
from sqlalchemy.types import TypeEngine

from ._base import retrieve_query
from .query import PARAMETERS, RESULT_COLUMNS, RetrieveQuery

SQL_TYPES: Mapping[str, TypeEngine[Any]] = {
    "vector": VECTOR(), "text": Text(), "text[]": ARRAY(Text), "integer": Integer(),
    "double precision": Float(), "jsonb": JSONB(none_as_null=True), "boolean": Boolean(), "sparsevec": SPARSEVEC(),
}
"""The SQLAlchemy type of each SQL type hybrid.retrieve uses."""

metadata = MetaData(schema="hybrid")

tenant = Table(
    "tenant", metadata,
    Column("tenant_id", Text, primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("tenant_key", Integer, nullable=False),
    Column("abstain_floor", Float),  # hybrid.calibrate_abstention's; NULL until calibrated
    Column("text_config", Text, nullable=False),  # its text-search language (hybrid.set_tenant_language)
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
    Column("embedding", VECTOR()),
    Column("tsv", TSVECTOR),
    Column("acl_labels", ARRAY(Text), nullable=False),
    Column("metadata", JSONB, nullable=False),
    Column("content_hash", Text, nullable=False),
    Column("superseded", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("tenant_key", Integer, nullable=False),  # the partition key (a partition of its own, or the pool from 2^30)
    Column("sparse_embedding", SPARSEVEC(1000000000)),  # the learned-sparse vector (hybrid._sparse's dimension)
    Column("text_config", REGCONFIG, nullable=False),  # its tenant's language: what the pool generates tsv with
)

def hybrid_retrieve(query: RetrieveQuery | Any = None, /, *, name: str = "hr", **kwargs: Any) -> Any:
    """hybrid.retrieve(...) as a table-valued function: use .c.chunk_id etc. in select() and joins.

    Takes a RetrieveQuery or its fields as keywords, as the clients do; arguments are validated and
    bound as parameters. Run it in a transaction where hybrid.tenant_id is set (e.g.
    session.execute(text("SELECT set_config('hybrid.tenant_id', :t, true)"), ...)).
    """
    q = retrieve_query(query, kwargs)
    values = {n: getattr(q, n) for n in PARAMETERS}
    for n in ("graph_seeds", "corpus_ids"):
        if values[n] is not None:
            values[n] = list(values[n])
    fn: Function[Any] = func.hybrid.retrieve(*(
        cast(bindparam(f"{name}_{n}", values[n], type_=SQL_TYPES[t]), SQL_TYPES[t]) for n, t in PARAMETERS.items()
    ))
    return fn.table_valued(*(Column(n, SQL_TYPES[t]) for n, t in RESULT_COLUMNS.items()), name=name)


__all__ = ["chunk", "corpus", "hybrid_retrieve", "metadata", "tenant"]
