"""Logic shared by the sync and async clients: validation, the SQL they send, row mapping."""

from __future__ import annotations

import hashlib
import json
import struct
import warnings
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from .errors import InvalidParameterError, SchemaError, TenantError, from_psycopg
from .query import RetrieveQuery
from .types import Chunk, ChunkRef, Edge

SET_TENANT_SQL = (
    "SELECT set_config('hybrid.tenant_id', %s, true), set_config('hybrid.acl_labels', %s, true)"
)
BEGIN_INGEST_SQL = "SELECT hybrid.begin_ingest()"
COPY_CHUNKS_SQL = (
    "COPY pg_temp.hybrid_chunk_stage (tenant_id, chunk_id, document_id, position, content, embedding, "
    "acl_labels, metadata, content_hash) FROM STDIN (FORMAT BINARY)"
)
FINISH_INGEST_SQL = "SELECT * FROM hybrid.finish_ingest(%s)"
BEGIN_EDGES_SQL = "SELECT hybrid.begin_edges()"
COPY_EDGES_SQL = "COPY pg_temp.hybrid_edge_stage (src, dst, rel, properties) FROM STDIN (FORMAT BINARY)"
COPY_EDGE_TYPES = ["text", "text", "text", "jsonb"]
FINISH_EDGES_SQL = "SELECT * FROM hybrid.finish_edges()"
DELETE_DOCUMENT_SQL = "SELECT hybrid.delete_document(%s, %s) AS deleted"
EMBEDDING_DIM_SQL = "SELECT hybrid.embedding_dim() AS dim"
CREATE_TENANT_SQL = "SELECT hybrid.create_tenant(%s)"
GRANT_TENANT_SQL = "SELECT hybrid.grant_tenant(%s, %s, %s::text[])"
GRANT_APP_SQL = "SELECT hybrid.grant_app(%s)"
SUSPEND_INDEX_SQL = "SELECT hybrid.suspend_vector_index()"
RESUME_INDEX_SQL = "SELECT hybrid.resume_vector_index()"

SOURCE_FAILED = "hybrid_retrieve.source_failed"


class SourceFailedWarning(UserWarning):
    """One retrieval source failed and the others were fused (from the server's WARNING)."""


def notice_handler(diag: psycopg.errors.Diagnostic) -> None:
    """Turn the server's source_failed warnings into Python warnings."""
    msg = diag.message_primary or ""
    if msg.startswith(SOURCE_FAILED):
        warnings.warn(msg, SourceFailedWarning, stacklevel=2)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise psycopg errors as the pyhybrid exception for their SQLSTATE, chained."""
    try:
        yield
    except psycopg.Error as exc:
        raise from_psycopg(exc) from exc


def tenant_params(tenant_id: str, acl_labels: Sequence[str] | None) -> tuple[str, str]:
    """Validate a tenant scope; return the two settings' values."""
    if not isinstance(tenant_id, str) or not tenant_id.strip():
        raise InvalidParameterError(f"tenant_id must be a non-empty string, got {tenant_id!r}")
    labels = list(acl_labels or [])
    for label in labels:
        if not isinstance(label, str) or not label.strip() or "," in label:
            raise InvalidParameterError(f"acl_labels entries must be non-empty strings without commas, got {label!r}")
    return tenant_id, ",".join(labels)


def retrieve_query(query: Any, kwargs: dict[str, Any]) -> RetrieveQuery:
    """The RetrieveQuery of a retrieve() call: a RetrieveQuery (changed by kwargs), an embedding
    given positionally, or keywords alone."""
    if isinstance(query, RetrieveQuery):
        return query.replace(**kwargs) if kwargs else query
    if query is not None:
        if "query_embedding" in kwargs or "vector" in kwargs:
            raise InvalidParameterError("query_embedding given twice (positionally and by name)")
        kwargs = {**kwargs, "query_embedding": query}
    return RetrieveQuery.build(**kwargs)


def register_vector_type(conn: psycopg.Connection[Any]) -> None:
    """Register pgvector's adapters on a connection (the vector type must exist: run pyhybrid migrate)."""
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except psycopg.ProgrammingError as exc:
        raise SchemaError(f"{exc} (is the hybrid schema installed? run: pyhybrid migrate)") from exc


async def register_vector_type_async(conn: psycopg.AsyncConnection[Any]) -> None:
    """register_vector_type for an async connection."""
    from pgvector.psycopg import register_vector_async

    try:
        await register_vector_async(conn)
    except psycopg.ProgrammingError as exc:
        raise SchemaError(f"{exc} (is the hybrid schema installed? run: pyhybrid migrate)") from exc


def rows_to_refs(rows: Iterable[Mapping[str, Any]]) -> list[ChunkRef]:
    """Map hybrid_retrieve rows to ChunkRef by column name."""
    return [ChunkRef.from_row(row) for row in rows]


def _chunk_error(i: int, chunk_id: Any, rule: str) -> InvalidParameterError:
    cid = repr(chunk_id) if chunk_id is not None else "NULL"
    return InvalidParameterError(f"chunk row {i} (chunk_id {cid}): {rule}")


def content_hash(c: Chunk, embedding: Any, corpus_id: str) -> str:
    """What makes re-ingesting a chunk a no-op: the same hash means nothing changed."""
    h = hashlib.blake2b(digest_size=16)
    for part in (c.document_id, str(c.position), c.content, "\x1f".join(c.acl_labels or ()),
                 json.dumps(dict(c.metadata), sort_keys=True, default=str), corpus_id):
        h.update(part.encode())
        h.update(b"\x1f")
    if embedding is not None:
        h.update(embedding.tobytes())
    return "py:" + h.hexdigest()


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
_COPY_TRAILER = b"\xff\xff"
_NULL = b"\xff\xff\xff\xff"
_I32 = struct.Struct(">i")
_ROW9 = struct.pack(">h", 9)
_TEXT_OID, _FLOAT4_OID = 25, 700


def _text(value: str) -> bytes:
    data = value.encode()
    return _I32.pack(len(data)) + data


def _text_array(items: Sequence[str]) -> bytes:
    if not items:
        data = struct.pack(">iii", 0, 0, _TEXT_OID)
    else:
        data = struct.pack(">iiiii", 1, 0, _TEXT_OID, len(items), 1) + b"".join(_text(x) for x in items)
    return _I32.pack(len(data)) + data


def _embedding_fields(matrix: np.ndarray[Any, Any]) -> list[bytes]:
    """Each row of matrix as a binary float4[] COPY field, built for the whole batch at once."""
    n, dim = matrix.shape
    cells = np.empty((n, dim, 2), dtype=">i4")
    cells[:, :, 0] = 4
    cells[:, :, 1] = matrix.astype(">f4").view(">i4")
    head = _I32.pack(20 + dim * 8) + struct.pack(">iiiii", 1, 0, _FLOAT4_OID, dim, 1)
    blob = cells.tobytes()
    step = dim * 8
    return [head + blob[i * step:(i + 1) * step] for i in range(n)]


def prepare_chunks(
    chunks: Iterable[Chunk | Mapping[str, Any]], tenant_id: str, dim: int, corpus_id: str = "default"
) -> bytes:
    """Validate chunks (the first bad row is named, 1-based) and return the binary COPY payload for
    pg_temp.hybrid_chunk_stage (columns as COPY_CHUNKS_SQL). Nothing is sent on error."""
    parts: list[tuple[bytes, bytes]] = []
    vectors: list[np.ndarray[Any, Any]] = []
    has_vector: list[bool] = []
    seen: set[str] = set()
    for i, raw in enumerate(chunks, start=1):
        try:
            c = raw if isinstance(raw, Chunk) else Chunk.from_mapping(raw)
        except InvalidParameterError as exc:
            raise _chunk_error(i, getattr(raw, "get", lambda _k: None)("chunk_id"), str(exc)) from None
        if not isinstance(c.chunk_id, str) or not c.chunk_id.strip():
            raise _chunk_error(i, c.chunk_id, "chunk_id is missing")
        if not isinstance(c.document_id, str) or not c.document_id.strip():
            raise _chunk_error(i, c.chunk_id, "document_id is missing")
        if not isinstance(c.content, str):
            raise _chunk_error(i, c.chunk_id, "content is missing")
        if "\x00" in c.content or "\x00" in c.chunk_id or "\x00" in c.document_id:
            raise _chunk_error(i, c.chunk_id, "text contains a NUL character, which PostgreSQL cannot store")
        if c.tenant_id is not None and c.tenant_id != tenant_id:
            raise TenantError(
                f"chunk row {i} (chunk_id {c.chunk_id!r}): tenant_id {c.tenant_id!r} is not the tenant "
                f"of this transaction ({tenant_id!r})"
            )
        arr = None
        if c.embedding is not None:
            arr = np.asarray(c.embedding, dtype=np.float32)
            if arr.ndim != 1 or arr.shape[0] != dim:
                n = arr.shape[0] if arr.ndim == 1 else arr.size
                raise _chunk_error(i, c.chunk_id, f"embedding has {n} dimensions, expected {dim}")
            if np.isnan(arr).any():
                raise _chunk_error(i, c.chunk_id, "embedding contains NaN")
            if np.isinf(arr).any():
                raise _chunk_error(i, c.chunk_id, "embedding contains an infinite value")
            vectors.append(arr)
        has_vector.append(arr is not None)
        if not isinstance(c.metadata, Mapping):
            raise _chunk_error(i, c.chunk_id, "metadata must be a JSON object")
        try:
            meta = json.dumps(dict(c.metadata), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise _chunk_error(i, c.chunk_id, f"metadata is not valid JSON ({exc})") from None
        if c.chunk_id in seen:
            raise _chunk_error(i, c.chunk_id, "chunk_id appears more than once in the batch")
        seen.add(c.chunk_id)
        if isinstance(c.position, bool) or not isinstance(c.position, int) or not -2**31 <= c.position < 2**31:
            raise _chunk_error(i, c.chunk_id, f"position must be a 32-bit integer, got {c.position!r}")
        labels = list(c.acl_labels or ())
        if any(not isinstance(x, str) or not x for x in labels):
            raise _chunk_error(i, c.chunk_id, "acl_labels must be non-empty strings")
        meta_bytes = b"\x01" + meta.encode()
        head = (_ROW9 + _NULL + _text(c.chunk_id) + _text(c.document_id) + b"\x00\x00\x00\x04"
                + _I32.pack(c.position) + _text(c.content))
        tail = (_text_array(labels) + _I32.pack(len(meta_bytes)) + meta_bytes
                + _text(content_hash(c, arr, corpus_id)))
        parts.append((head, tail))
    fields = iter(_embedding_fields(np.stack(vectors)) if vectors else [])
    out = [_COPY_HEADER]
    for (head, tail), has in zip(parts, has_vector):
        out.append(head)
        out.append(next(fields) if has else _NULL)
        out.append(tail)
    out.append(_COPY_TRAILER)
    return b"".join(out)


def prepare_edges(edges: Iterable[Edge | Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Validate edges (the first bad row is named, 1-based) and return COPY rows."""
    import re

    rel_re = re.compile(r"^[A-Z][A-Z0-9_]{0,62}$")
    rows: list[tuple[Any, ...]] = []
    for i, raw in enumerate(edges, start=1):
        e = raw if isinstance(raw, Edge) else Edge.from_mapping(raw)
        if not isinstance(e.src, str) or not e.src.strip():
            raise InvalidParameterError(f"edge row {i}: src is missing")
        if not isinstance(e.dst, str) or not e.dst.strip():
            raise InvalidParameterError(f"edge row {i}: dst is missing")
        if e.src == e.dst:
            raise InvalidParameterError(f"edge row {i}: src and dst are the same node")
        if not isinstance(e.rel, str) or not rel_re.match(e.rel) or e.rel in ("CHUNK", "ENTITY"):
            raise InvalidParameterError(
                f"edge row {i}: rel must be UPPER_SNAKE_CASE (^[A-Z][A-Z0-9_]{{0,62}}$), got {e.rel!r}"
            )
        rows.append((e.src, e.dst, e.rel, Jsonb(dict(e.properties))))
    return rows


def check_name(name: str, value: Any) -> str:
    """A required non-empty string argument."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(f"{name} must be a non-empty string, got {value!r}")
    return value

