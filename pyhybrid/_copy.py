"""Binary COPY payloads for ingestion (chunks and edges), built and validated in Python, keyed by column name."""

from __future__ import annotations

import json
import re
import struct
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from psycopg.types.json import Jsonb

from .errors import InvalidParameterError, TenantError
from .query import check_text
from .types import Chunk, Edge, sparse_text

CHUNK_COLUMNS = ("tenant_id", "chunk_id", "document_id", "position", "content", "embedding", "acl_labels",
                 "metadata", "sparse_embedding")
"""The columns of pg_temp.hybrid_chunk_stage that COPY fills (hybrid.begin_ingest creates the table); the last,
sparse_embedding, only for a batch that carries one (so a dense batch loads into a schema from before it too)."""

EDGE_COLUMNS = {"src": "text", "dst": "text", "rel": "text", "properties": "jsonb"}
"""The columns of pg_temp.hybrid_edge_stage that COPY fills, with their types (hybrid.begin_edges)."""
COPY_EDGES_SQL = f"COPY pg_temp.hybrid_edge_stage ({', '.join(EDGE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
COPY_EDGE_TYPES = list(EDGE_COLUMNS.values())

MAX_CONTENT_BYTES = 1_000_000
"""The longest chunk content, in UTF-8 bytes: a tsvector holds at most 1 MiB."""

def _chunk_error(i: int, chunk_id: Any, rule: str) -> InvalidParameterError:
    cid = repr(chunk_id) if chunk_id is not None else "NULL"
    return InvalidParameterError(f"chunk row {i} (chunk_id {cid}): {rule}")


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
_COPY_TRAILER = b"\xff\xff"
_NULL = b"\xff\xff\xff\xff"
_I32 = struct.Struct(">i")
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
    chunks: Iterable[Chunk | Mapping[str, Any]], tenant_id: str, dim: int
) -> tuple[str, bytes]:
    """Validate chunks (the first bad row is named, 1-based) and return the COPY statement and its binary payload
    for pg_temp.hybrid_chunk_stage, each row's fields keyed by CHUNK_COLUMNS. Nothing is sent on error."""
    rows: list[dict[str, bytes]] = []
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
        for name in ("chunk_id", "document_id", "content"):
            try:
                check_text(name, getattr(c, name))
            except InvalidParameterError as exc:
                raise _chunk_error(i, c.chunk_id, str(exc)) from None
        if len(c.content) > MAX_CONTENT_BYTES or len(c.content.encode()) > MAX_CONTENT_BYTES:
            raise _chunk_error(i, c.chunk_id, f"content is {len(c.content.encode())} bytes; at most {MAX_CONTENT_BYTES} "
                                              "(PostgreSQL's full-text index limit; split the document into chunks)")
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
            meta = json.dumps(dict(c.metadata), allow_nan=False, ensure_ascii=False)
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
        try:
            for label in labels:
                check_text("acl_labels", label)
            check_text("metadata", meta)
            if "\\u0000" in meta:
                raise InvalidParameterError("metadata contains a NUL character, which PostgreSQL cannot store")
        except InvalidParameterError as exc:
            raise _chunk_error(i, c.chunk_id, str(exc)) from None
        try:
            sparse = sparse_text("sparse_embedding", c.sparse_embedding)
        except InvalidParameterError as exc:
            raise _chunk_error(i, c.chunk_id, str(exc)) from None
        meta_bytes = b"\x01" + meta.encode()
        rows.append({
            "tenant_id": _NULL,  # finish_ingest fills in the transaction's tenant
            "chunk_id": _text(c.chunk_id), "document_id": _text(c.document_id),
            "position": b"\x00\x00\x00\x04" + _I32.pack(c.position), "content": _text(c.content),
            "embedding": _NULL, "acl_labels": _text_array(labels),
            "metadata": _I32.pack(len(meta_bytes)) + meta_bytes,
            "sparse_embedding": _NULL if sparse is None else _text(sparse),
        })
    fields = iter(_embedding_fields(np.stack(vectors)) if vectors else [])
    columns = CHUNK_COLUMNS if any(row["sparse_embedding"] != _NULL for row in rows) else CHUNK_COLUMNS[:-1]
    header = struct.pack(">h", len(columns))
    out = [_COPY_HEADER]
    for row, has in zip(rows, has_vector):
        if has:
            row["embedding"] = next(fields)
        out.append(header)
        out.extend(row[name] for name in columns)
    out.append(_COPY_TRAILER)
    return f"COPY pg_temp.hybrid_chunk_stage ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)", b"".join(out)


def prepare_edges(edges: Iterable[Edge | Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Validate edges (the first bad row is named, 1-based) and return COPY rows in EDGE_COLUMNS order."""
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
        try:
            check_text("src", e.src)
            check_text("dst", e.dst)
            if not isinstance(e.properties, Mapping):
                raise InvalidParameterError("properties must be a JSON object")
            props = json.dumps(dict(e.properties), allow_nan=False, ensure_ascii=False)
            check_text("properties", props)
            if "\\u0000" in props:
                raise InvalidParameterError("properties contains a NUL character, which PostgreSQL cannot store")
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"edge row {i}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"edge row {i}: properties are not valid JSON ({exc})") from None
        values = {"src": e.src, "dst": e.dst, "rel": e.rel, "properties": Jsonb(dict(e.properties))}
        rows.append(tuple(values[name] for name in EDGE_COLUMNS))
    return rows
