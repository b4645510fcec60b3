"""Move one tenant between servers: export it to a JSONL file, import that file elsewhere.

The file (gzip-compressed when its name ends in .gz) holds a header line, then one JSON record per
line: every corpus, every live chunk with its embedding, ACL labels, metadata and position, and every
graph edge by its node ids (chunk ids and entity ids), so that the importing server allocates its own
vertex ids. The header carries the tenant's abstention floor (hybrid.calibrate_abstention), which
describes the chunks and so travels with them. Superseded chunks are not exported. Importing writes the whole tenant in one transaction:
a bad record leaves nothing behind.

Both directions need an admin connection (a superuser or the schema's owner): export reads the
tenant's rows whatever their ACL labels, import creates the tenant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import __version__, _base, _sql
from ._jsonl import open_text, read_jsonl
from .client import HybridClient
from .errors import InvalidParameterError
from .types import Chunk, Edge

FORMAT = "pyhybrid-tenant"
VERSION = 1
BATCH = 1000

_CORPORA_SQL = "SELECT corpus_id, metadata FROM hybrid.corpus WHERE tenant_id = %s ORDER BY corpus_id"
_CHUNKS_SQL = """SELECT chunk_id, document_id, corpus_id, content, embedding::text AS embedding, position,
       metadata, acl_labels, sparse_embedding::text AS sparse_embedding
FROM hybrid.chunk WHERE tenant_id = %s AND NOT superseded
ORDER BY corpus_id, document_id, position, chunk_id"""
# edges join two nodes of one tenant; the opaque label table an edge lives in is one of the
# tenant's edge types (hybrid.edge_type)
_EDGES_SQL = """SELECT a.node_id AS src, b.node_id AS dst, et.name AS rel, e.properties::text AS properties
FROM hybrid_graph._ag_label_edge e
JOIN hybrid.graph_node a ON a.tenant_id = %(t)s AND a.vertex_id OPERATOR(ag_catalog.=) e.start_id
JOIN hybrid.graph_node b ON b.tenant_id = %(t)s AND b.vertex_id OPERATOR(ag_catalog.=) e.end_id
JOIN hybrid.edge_type et ON et.tenant_id = %(t)s AND e.tableoid = to_regclass('hybrid_graph.rel_' || et.slot)
ORDER BY a.node_id, b.node_id, et.name"""
_HAS_GRAPH_SQL = "SELECT to_regclass('hybrid.graph_node') IS NOT NULL AS has_graph"
_VERSION_SQL = "SELECT hybrid.version() AS v"
_COUNT_SQL = "SELECT count(*) AS n FROM hybrid.chunk WHERE tenant_id = %s"
_TENANT_EXISTS_SQL = "SELECT count(*) AS n FROM hybrid.tenant WHERE tenant_id = %s"
_CORPUS_METADATA_SQL = "UPDATE hybrid.corpus SET metadata = %s::jsonb WHERE tenant_id = %s AND corpus_id = %s"
# the abstention floor (hybrid.calibrate_abstention) describes the chunks, which travel unchanged: it travels too
_FLOOR_SQL = "SELECT abstain_floor, text_config FROM hybrid.tenant WHERE tenant_id = %s"
_SET_FLOOR_SQL = "UPDATE hybrid.tenant SET abstain_floor = %s WHERE tenant_id = %s"
# what the floor is compared with: the mean similarity of the dense branch's ten best hits. An export without this
# key was made when the floor was the best hit's (0.73 x the neighbour median, not 0.60): it is rescaled on import,
# as revision 0027 rescales a database's floors
_FLOOR_OF = "mean of the ten best dense hits"
_BEST_HIT_FLOOR_SCALE = 0.60 / 0.73


def export_tenant(client: HybridClient, tenant_id: str, path: str | Path) -> dict[str, int]:
    """Write tenant_id's corpora, live chunks and edges to path; returns how many of each."""
    path = Path(path)
    counts = {"corpora": 0, "chunks": 0, "edges": 0}
    with client.tenant(tenant_id, ["*"]) as t:
        conn = t.conn
        if conn.execute(_TENANT_EXISTS_SQL, (tenant_id,)).fetchone() == {"n": 0}:
            raise InvalidParameterError(f"tenant_id {tenant_id!r} does not exist")
        header = {"format": FORMAT, "version": VERSION, "tenant_id": tenant_id, "embedding_dim": t.embedding_dim(),
                  "pyhybrid": __version__, "schema": (conn.execute(_VERSION_SQL).fetchone() or {}).get("v"),
                  **{k: v for k, v in (conn.execute(_FLOOR_SQL, (tenant_id,)).fetchone() or {}).items()},
                  "abstain_floor_of": _FLOOR_OF}
        has_graph = bool((conn.execute(_HAS_GRAPH_SQL).fetchone() or {}).get("has_graph"))
        with open_text(path, "w") as out:
            out.write(json.dumps(header) + "\n")
            for row in conn.execute(_CORPORA_SQL, (tenant_id,)).fetchall():
                out.write(json.dumps({"type": "corpus", "corpus_id": row["corpus_id"], "metadata": row["metadata"]}) + "\n")
                counts["corpora"] += 1
            with conn.cursor(name="pyhybrid_export_chunks") as cur:
                cur.itersize = BATCH
                cur.execute(_CHUNKS_SQL, (tenant_id,))
                for row in cur:
                    rec = dict(row)
                    rec["embedding"] = None if rec["embedding"] is None else json.loads(rec["embedding"])
                    out.write(json.dumps({"type": "chunk", **rec}, ensure_ascii=False) + "\n")
                    counts["chunks"] += 1
            if has_graph:
                with conn.cursor(name="pyhybrid_export_edges") as cur:
                    cur.itersize = BATCH
                    cur.execute(_EDGES_SQL, {"t": tenant_id})
                    for row in cur:
                        props = json.loads(row["properties"])
                        props.pop("tenant_id", None)
                        out.write(json.dumps({"type": "edge", "src": row["src"], "dst": row["dst"], "rel": row["rel"],
                                              "properties": props}, ensure_ascii=False) + "\n")
                        counts["edges"] += 1
    return counts


def import_tenant(client: HybridClient, path: str | Path, tenant_id: str | None = None) -> dict[str, int]:
    """Load an exported tenant (under tenant_id, default: its exported id) in one transaction.

    The tenant must not hold chunks yet. Returns how many corpora, chunks and edges were written.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidParameterError(f"path {str(path)!r} is not a file")
    records = read_jsonl(path)
    try:
        _, header = next(records)
    except StopIteration:
        raise InvalidParameterError(f"{path}: empty file, expected a {FORMAT} export") from None
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise InvalidParameterError(f"{path}: not a {FORMAT} export of version {VERSION} "
                                    f"(format {header.get('format')!r}, version {header.get('version')!r})")
    target = tenant_id or header.get("tenant_id")
    if not isinstance(target, str):
        raise InvalidParameterError(f"{path}: the header names no tenant_id; pass tenant_id")
    _base.tenant_params(target, None)
    floor = header.get("abstain_floor")  # absent from exports made before 0.3's abstention: NULL, as there
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not -1.0 <= floor <= 1.0):
        raise InvalidParameterError(f"{path}: abstain_floor must be a cosine similarity in [-1, 1] or null, got {floor!r}")
    if floor is not None and header.get("abstain_floor_of") != _FLOOR_OF:
        floor = floor * _BEST_HIT_FLOOR_SCALE  # a floor for the best hit alone (an export made before revision 0027)
    counts = {"corpora": 0, "chunks": 0, "edges": 0}
    with client.tenant(target, ["*"]) as t:
        # in the import's transaction: all or nothing; in its language (absent from exports made before languages)
        t.conn.execute(_sql.CREATE_TENANT_SQL, (target, header.get("text_config"), None))
        if header.get("embedding_dim") != t.embedding_dim():
            raise InvalidParameterError(f"embedding_dim: the export holds {header.get('embedding_dim')}-d embeddings, "
                                        f"this database stores {t.embedding_dim()}-d ones")
        held = (t.conn.execute(_COUNT_SQL, (target,)).fetchone() or {}).get("n", 0)
        if held:
            raise InvalidParameterError(f"tenant_id {target!r} already holds {held} chunks here; import into an "
                                        "empty tenant (drop it first, or pass another tenant_id)")
        corpus_metadata: dict[str, Any] = {}
        batch: list[Chunk] = []
        batch_corpus: str | None = None
        edges: list[Edge] = []

        def flush() -> None:
            nonlocal batch
            if batch:
                assert batch_corpus is not None
                t.ingest(batch, corpus_id=batch_corpus, allow_missing_embeddings=True)  # as exported
                counts["chunks"] += len(batch)
                batch = []

        for lineno, rec in records:
            kind = rec.pop("type", None)
            try:
                if kind == "corpus":
                    corpus_metadata[str(rec["corpus_id"])] = rec.get("metadata") or {}
                elif kind == "chunk":
                    corpus = str(rec.pop("corpus_id"))
                    if corpus != batch_corpus or len(batch) >= BATCH:
                        flush()
                        batch_corpus = corpus
                    batch.append(Chunk.from_mapping(rec))
                elif kind == "edge":
                    edges.append(Edge.from_mapping(rec))
                else:
                    raise InvalidParameterError(f"type must be corpus, chunk or edge, got {kind!r}")
            except (KeyError, InvalidParameterError) as e:
                raise InvalidParameterError(f"{path}:{lineno}: {e}") from None
        flush()
        for i in range(0, len(edges), 10 * BATCH):
            t.add_edges(edges[i:i + 10 * BATCH])
        counts["edges"] = len(edges)
        for corpus, meta in corpus_metadata.items():
            if meta:
                t.conn.execute(_CORPUS_METADATA_SQL, (json.dumps(meta), target, corpus))
        counts["corpora"] = len(corpus_metadata)
        if floor is not None:
            t.conn.execute(_SET_FLOOR_SQL, (float(floor), target))
    return counts
