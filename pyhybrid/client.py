# Generated from pyhybrid/aio.py by tools/async_to_sync.py: edit aio.py, then run that tool.
"""The synchronous client: HybridClient, and TenantSession for one tenant-scoped transaction."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Iterator, Iterable, Mapping, Sequence

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from . import _base, _copy, _sql
from .errors import EmbedderMismatchError, InvalidParameterError
from .query import EXPLAIN_SQL, MANY_SQL, RETRIEVE_SQL, RetrieveQuery, many_params
from .types import Chunk, ChunkRef, CorpusInfo, DocumentInfo, Edge, EdgeResult, IngestResult


class TenantSession:
    """Work done for one tenant inside one transaction (see HybridClient.tenant)."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]], tenant_id: str, *, embedder: Any = None) -> None:
        self.conn = conn
        self.tenant_id = tenant_id
        self.embedder = embedder
        """What ingest() embeds chunks without an embedding with, unless given one (the client's embedder)."""
        self._dim: int | None = None

    def retrieve(self, query: RetrieveQuery | Any = None, /, *, rerank: Any = None, rerank_depth: int = 50,
                       **kwargs: Any) -> list[ChunkRef]:
        """One hybrid_retrieve call: a RetrieveQuery, or its fields as keywords (the SQL parameter names).

        A first positional argument that is not a RetrieveQuery is the query_embedding. A session with an embedder
        embeds query_text where no query_embedding is given and vector_weight > 0 (embed_query: refused when a
        corpus in scope records another embedder). rerank: a callable (query_text, [texts]) -> [scores]
        (pyhybrid.rerank) re-orders the best rerank_depth fused rows (at least skip + top_k) before skip and top_k
        apply; rows then carry rerank_score.
        """
        q = _base.retrieve_query(query, kwargs)
        if (text := _base.query_text_to_embed(q, self.embedder)) is not None:
            q = q.replace(query_embedding=self.embed_query(text, q.corpus_ids))
        fetch, reranker = _base.rerank_plan(q, rerank, rerank_depth)
        rows: list[dict[str, Any]] | None = None
        with _base.translate_errors():
            if rows is None:
                cur = self.conn.execute(RETRIEVE_SQL, fetch.params())
                rows = cur.fetchall()
        refs = _base.rows_to_refs(rows)
        return _base.rerank_apply(q, refs, reranker)

    def retrieve_many(self, query_texts: Sequence[str | None] | None = None,
                            query_embeddings: Sequence[Any] | None = None, **kwargs: Any) -> list[ChunkRef]:
        """Several formulations of one question in one call (hybrid.retrieve_many): each retrieved with the
        other arguments, then fused across formulations; at most 10."""
        params = many_params(query_texts, query_embeddings, kwargs)
        with _base.translate_errors():
            cur = self.conn.execute(MANY_SQL, params)
            rows = cur.fetchall()
        return _base.rows_to_refs(rows)

    def explain_retrieve(self, query: RetrieveQuery | Any = None, /, **kwargs: Any) -> dict[str, Any]:
        """The retrieve call, explained (hybrid.explain_retrieve): per branch the plan, rows, time and score
        statistics; per returned row each branch's contribution to its score."""
        params = _base.retrieve_query(query, kwargs).params()
        with _base.translate_errors():
            cur = self.conn.execute(EXPLAIN_SQL, params)
            row = cur.fetchone()
        assert row is not None
        return dict(row["report"])

    def embedding_dim(self) -> int:
        """The embedding dimension chosen at install."""
        if self._dim is None:
            with _base.translate_errors():
                cur = self.conn.execute(_sql.EMBEDDING_DIM_SQL)
                row = cur.fetchone()
            assert row is not None
            self._dim = int(row["dim"])
        return self._dim

    def embed_query(self, text: str, corpus_ids: Sequence[str] | None = None, *, embedder: Any = None) -> Any:
        """text embedded as a query by embedder (default: the session's; a callable or a spec such as
        "openai:http://host/v1;model=m"), with its query prefix, once check_embedder has found it to be the embedder
        of the corpora in scope (corpus_ids; None: all the tenant's)."""
        from .embedders import query_vector

        e = _base.resolve_embedder(self.embedder if embedder is None else embedder)
        self.check_embedder(e, corpus_ids)
        return query_vector(e, text)

    def check_embedder(self, embedder: Any, corpus_ids: Sequence[str] | None = None, *,
                             writing: bool = False) -> None:
        """Raise EmbedderMismatchError (naming both) unless embedder (an embedder, a spec, or its record) is the one
        each corpus in scope records (hybrid.corpus_embedders; a corpus with no record takes any): for a query the
        corpus's or, while it is re-embedded, the one it moves to; writing, only the latter."""
        from .embedders import embedder_identity

        identity = embedder if isinstance(embedder, Mapping) else embedder_identity(
            _base.resolve_embedder(embedder), self.embedding_dim())
        with _base.translate_errors():
            cur = self.conn.execute(_sql.CORPUS_EMBEDDERS_SQL, (list(corpus_ids) if corpus_ids else None,))
            records = cur.fetchall()
        if problem := _base.embedder_conflict(records, identity, writing):
            raise EmbedderMismatchError(problem)

    def use_embedder(self, corpus_id: str, embedder: Any, *, replace: bool = False) -> dict[str, Any]:
        """Record embedder (an embedder, a spec, or its record) as the one that fills corpus_id (hybrid.use_embedder:
        at the corpus's first use; another one is refused, naming both, unless replace). Returns the record kept."""
        from .embedders import embedder_identity

        _base.check_name("corpus_id", corpus_id)
        identity = embedder if isinstance(embedder, Mapping) else embedder_identity(
            _base.resolve_embedder(embedder), self.embedding_dim())
        if not replace:
            self.check_embedder(identity, [corpus_id], writing=True)
        with _base.translate_errors():
            row = (self.conn.execute(_sql.USE_EMBEDDER_SQL, (corpus_id, json.dumps(dict(identity)),
                                                                       replace))).fetchone()
        assert row is not None
        return dict(row["embedder"])

    def ingest(self, chunks: Iterable[Chunk | Mapping[str, Any]], corpus_id: str = "default", *,
                     embedder: Any = None, allow_missing_embeddings: bool = False) -> IngestResult:
        """Load chunks by COPY and upsert them by chunk id, atomically (a bad row writes nothing).

        embedder (default: the client's): a texts -> vectors callable, e.g. pyhybrid.embed.default_embedder(), or a
        spec (pyhybrid.embedders: "minilm", "st:PATH", "openai:URL;model=M", "module:callable") (async: run in a
        worker thread); documents already stored exactly so are skipped (counted as unchanged), then the chunks that
        arrive without an embedding are embedded, and the corpus records the embedder (hybrid.use_embedder) at its
        first ingest: another one is refused (EmbedderMismatchError naming both). Without an embedder, chunks without an
        embedding raise a DeprecationWarning (refused in the next release) unless allow_missing_embeddings=True
        (chunks meant for lexical and graph search only).
        """
        _base.check_name("corpus_id", corpus_id)
        plan = _base.IngestPlan(chunks, self.embedder if embedder is None else embedder, allow_missing_embeddings)
        if check := plan.to_check():
            plan.skip(self.unchanged_documents(check, corpus_id=corpus_id))
        if texts := plan.to_embed():
            assert plan.embed is not None
            self.check_embedder(plan.identity(self.embedding_dim()), [corpus_id], writing=True)
            plan.fill(plan.embed(texts))
        if not plan.items:
            return plan.result(None)
        copy_sql, payload = _copy.prepare_chunks(plan.items, self.tenant_id, self.embedding_dim())
        identity = plan.identity(self.embedding_dim())
        with _base.translate_errors():
            with self.conn.transaction():
                if identity is not None:  # recorded at the corpus's first ingest, refused if another is recorded
                    self.conn.execute(_sql.USE_EMBEDDER_SQL, (corpus_id, json.dumps(identity), False))
                self.conn.execute(_sql.BEGIN_INGEST_SQL)
                with self.conn.cursor() as cur, cur.copy(copy_sql) as copy:
                    copy.write(payload)
                res = (self.conn.execute(_sql.FINISH_INGEST_SQL, (corpus_id,))).fetchone()
        assert res is not None
        return plan.result(res)

    def unchanged_documents(self, chunks: Iterable[Mapping[str, Any]], corpus_id: str = "default") -> set[str]:
        """The document ids among chunks that the tenant already stores exactly so (nothing to embed or write)."""
        _base.check_name("corpus_id", corpus_id)
        payload = _base.unchanged_payload(chunks)
        with _base.translate_errors():
            cur = self.conn.execute(_sql.UNCHANGED_DOCUMENTS_SQL, (corpus_id, payload))
            rows = cur.fetchall()
        return {r["document_id"] for r in rows}

    def classify_ids(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """What each id names in the tenant: 'chunk', 'document', 'entity' (several may apply; [] for nothing)."""
        with _base.translate_errors():
            cur = self.conn.execute(_sql.CLASSIFY_IDS_SQL, (list(ids),))
            rows = cur.fetchall()
        return {r["id"]: list(r["kinds"]) for r in rows}

    def add_edges(self, edges: Iterable[Edge | Mapping[str, Any]]) -> EdgeResult:
        """Load graph edges in bulk (straight into AGE's label tables); duplicates are skipped."""
        rows = _copy.prepare_edges(edges)
        with _base.translate_errors():
            with self.conn.transaction():
                self.conn.execute(_sql.BEGIN_EDGES_SQL)
                with self.conn.cursor() as cur, cur.copy(_copy.COPY_EDGES_SQL) as copy:
                    copy.set_types(_copy.COPY_EDGE_TYPES)
                    for row in rows:
                        copy.write_row(row)
                res = (self.conn.execute(_sql.FINISH_EDGES_SQL)).fetchone()
        assert res is not None
        return EdgeResult(**{k: int(v) for k, v in res.items()})

    def delete_document(self, document_id: str, corpus_id: str | None = None) -> int:
        """Delete every chunk of a document; returns how many."""
        _base.check_name("document_id", document_id)
        with _base.translate_errors():
            row = (self.conn.execute(_sql.DELETE_DOCUMENT_SQL, (document_id, corpus_id))).fetchone()
        assert row is not None
        return int(row["deleted"])

    def documents(self, corpus_id: str | None = None, *, prefix: str | None = None,
                        document_ids: Iterable[str] | None = None) -> list[DocumentInfo]:
        """The tenant's documents the caller can see, a DocumentInfo each (optionally of one corpus, with ids
        starting with prefix, among document_ids); a document whose chunks are all hidden from the caller is not
        listed."""
        args = _base.documents_args(corpus_id, prefix, document_ids)
        with _base.translate_errors():
            rows = (self.conn.execute(_sql.DOCUMENTS_SQL, args)).fetchall()
        return [DocumentInfo(**r) for r in rows]

    def corpora(self) -> list[CorpusInfo]:
        """The tenant's corpora, with the folder pyhybrid ingest syncs each with and their size."""
        with _base.translate_errors():
            rows = (self.conn.execute(_sql.CORPORA_SQL)).fetchall()
        return [CorpusInfo(**r) for r in rows]

    def set_corpus_root(self, corpus_id: str, source_root: str | None) -> None:
        """Remember the folder a corpus is ingested from (None forgets it); writers only."""
        _base.check_name("corpus_id", corpus_id)
        with _base.translate_errors():
            self.conn.execute(_sql.SET_CORPUS_ROOT_SQL, (corpus_id, source_root))

    def calibrate_abstention(self, quantile: float | None = None) -> float:
        """Store and return the tenant's abstention floor for retrieve(abstain=True) (hybrid.calibrate_abstention):
        retrieve compares it with the mean similarity of the dense branch's ten best hits. By default 0.60 x the median
        similarity of a chunk to its 10th most similar chunk of another document; with quantile, 0.82 x that quantile
        of the cosine similarity between two of its chunks taken at random. Writers only."""
        with _base.translate_errors():
            row = (self.conn.execute(_sql.CALIBRATE_SQL, (_base.check_quantile(quantile),))).fetchone()
        assert row is not None
        return float(row["floor"])

    def prune_documents(self, corpus_id: str, keep: Iterable[str], *, prefix: str = "",
                              dry_run: bool = False) -> dict[str, int]:
        """Folder sync: supersede the documents of corpus_id whose id starts with prefix and is not in keep;
        returns {document_id: chunks} of those pruned (with dry_run: those that would be). Writers only."""
        args = _base.prune_args(corpus_id, keep, prefix, dry_run)
        with _base.translate_errors():
            rows = (self.conn.execute(_sql.PRUNE_DOCUMENTS_SQL, args)).fetchall()
        return {r["document_id"]: int(r["chunks"]) for r in rows}


class HybridClient:
    """A pyhybrid client on psycopg 3: a single connection, or a pool when pool=True."""

    def __init__(self, dsn: str, *, pool: bool = False, min_size: int = 1, max_size: int = 4,
                 replicas: Sequence[str] = (), replica_wait: float = 5.0, embedder: Any = None) -> None:
        """No I/O here: the connection (or pool) opens with open(), `with`, or the first call that needs it.

        replicas: DSNs of hot standbys; tenant(..., read_only=True) sessions run there, round-robin, and
        everything else on dsn (the primary). replica_wait: how long a read_your_writes session waits for
        a replica to replay this client's last write before it reads from the primary instead.
        embedder: what the tenant sessions' ingest() embeds chunks without an embedding with (a texts ->
        vectors callable such as pyhybrid.embed.default_embedder()).
        """
        self.dsn = dsn
        self.embedder = embedder
        self._use_pool = pool
        self._min_size, self._max_size = min_size, max_size
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] | None = None
        self._conn: psycopg.Connection[dict[str, Any]] | None = None
        self._replicas = [HybridClient(r, pool=pool, min_size=min_size, max_size=max_size) for r in replicas]
        self._next_replica = 0
        self.replica_wait = replica_wait
        self.last_write_lsn: str | None = None
        """The primary's WAL position after this client's last write session (with replicas only)."""

    def open(self) -> HybridClient:
        """Open the connection or pool (idempotent)."""
        if self._pool is not None or self._conn is not None:
            return self
        with _base.translate_errors():
            if self._use_pool:
                self._pool = ConnectionPool(
                    self.dsn, min_size=self._min_size, max_size=self._max_size, open=False,
                    kwargs={"row_factory": dict_row}, configure=self._configure,
                )
                self._pool.open(wait=True)
            else:
                conn = psycopg.connect(self.dsn, row_factory=dict_row)
                try:
                    self._configure(conn)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
        return self

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        conn.add_notice_handler(_base.notice_handler)
        _base.register_vector_type(conn)
        if not conn.autocommit:
            conn.commit()  # registration's catalog lookup must not leave a transaction open

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A connection of this client (from the pool, if any)."""
        self.open()
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
        else:
            assert self._conn is not None
            yield self._conn

    @contextmanager
    def tenant(self, tenant_id: str, acl_labels: Sequence[str] | None = None, *, read_only: bool = False,
               read_your_writes: bool = False) -> Iterator[TenantSession]:
        """A transaction acting for tenant_id (and holding acl_labels); commits on success.

        read_only=True: a READ ONLY transaction, on a replica when the client has some. read_your_writes=True:
        that replica must first have replayed this client's last write (else the primary serves the read).
        """
        tid, labels = _base.tenant_params(tenant_id, acl_labels)
        target = (self._pick_replica(read_your_writes)) if read_only else self
        with target.connection() as conn:
            with _base.translate_errors():
                with conn.transaction():
                    if read_only:
                        conn.execute(_sql.READ_ONLY_SQL)
                    conn.execute(_sql.SET_TENANT_SQL, (tid, labels))
                    yield TenantSession(conn, tid, embedder=self.embedder)
                if not read_only and self._replicas:
                    with conn.transaction():
                        row = ((conn.execute(_sql.WAL_LSN_SQL)).fetchone())
                    self.last_write_lsn = None if row is None else str(row["lsn"])

    def _pick_replica(self, read_your_writes: bool) -> HybridClient:
        """The next replica (round-robin) that has replayed last_write_lsn when asked to; else the primary."""
        for _ in range(len(self._replicas)):
            replica = self._replicas[self._next_replica % len(self._replicas)]
            self._next_replica += 1
            if not read_your_writes or self.last_write_lsn is None:
                return replica
            deadline = time.monotonic() + self.replica_wait
            with replica.connection() as conn:
                while True:
                    with _base.translate_errors():
                        with conn.transaction():
                            row = ((conn.execute(_sql.REPLAYED_SQL, (self.last_write_lsn,))).fetchone())
                    if row is not None and row["replayed"]:
                        return replica
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.01)
        return self

    def create_tenant(self, tenant_id: str, language: str | None = None, placement: str | None = None) -> str:
        """Create a tenant (idempotent; admin only), in language: its text-search language (a PostgreSQL text search
        configuration, see set_tenant_language; default english), and placement: "pool" (its chunks in the shared
        pool, no relation of its own), "dedicated" (a partition of its own) or None (the install's setting
        tenant_placement, default pool). An existing tenant stays where it is (move_tenant moves it)."""
        _base.tenant_params(tenant_id, None)
        if language is not None and not isinstance(language, str):
            raise InvalidParameterError(f"language must be a text search configuration name, got {language!r}")
        _base.check_placement(placement, optional=True)
        return str(self._scalar(_sql.CREATE_TENANT_SQL, (tenant_id, language, placement)))

    def move_tenant(self, tenant_id: str, placement: str) -> None:
        """Move a tenant to placement (admin only, a role that bypasses RLS): "dedicated" (a partition of its own)
        or "pool". Online: its searches go on, its writes wait for the move's last transaction and then write where
        it is (hybrid.move_tenant). Runs on a connection of its own, which commits between the move's steps."""
        _base.tenant_params(tenant_id, None)
        _base.check_placement(placement)
        with _base.translate_errors():
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.add_notice_handler(_base.notice_handler)
                conn.execute(_sql.MOVE_TENANT_SQL, (tenant_id, placement))

    def pool_due(self) -> list[tuple[str, int]]:
        """The pooled tenants larger than setting pool_max_chunks (admin only), largest first: (tenant_id, chunks)."""
        with self.connection() as conn:
            with _base.translate_errors():
                with conn.transaction():
                    rows = (conn.execute(_sql.POOL_DUE_SQL)).fetchall()
        return [(str(r["tenant_id"]), int(r["chunks"])) for r in rows]

    def set_tenant_language(self, tenant_id: str, language: str) -> str:
        """Set a tenant's text-search language (hybrid.set_tenant_language; admin only): a PostgreSQL text search
        configuration such as german, french, spanish, or simple (no stemming, no stop words). A change rebuilds the
        tenant's partition in the new language (its writes wait, its searches go on until a short swap) and recounts
        its BM25 statistics. Returns the configuration stored."""
        _base.tenant_params(tenant_id, None)
        if not isinstance(language, str):
            raise InvalidParameterError(f"language must be a text search configuration name, got {language!r}")
        return str(self._scalar(_sql.SET_LANGUAGE_SQL, (tenant_id, language)))

    def tenant_language(self, tenant_id: str) -> str | None:
        """A tenant's text-search language (None: no such tenant)."""
        value = self._scalar(_sql.LANGUAGE_SQL, (tenant_id,))
        return None if value is None else str(value)

    def grant_tenant(self, role_name: str, tenant_id: str, acl_labels: Sequence[str] = ()) -> None:
        """Bind an existing login role to a tenant (admin only)."""
        _base.check_name("role_name", role_name)
        self._scalar(_sql.GRANT_TENANT_SQL, (role_name, tenant_id, list(acl_labels)))

    def drop_tenant(self, tenant_id: str) -> dict[str, int]:
        """Remove a tenant and everything it holds, in one transaction (admin only); returns what it
        removed: chunks, corpora, graph_nodes, vertices, edges, grants."""
        _base.tenant_params(tenant_id, None)
        with self.connection() as conn:
            with _base.translate_errors():
                with conn.transaction():
                    rows = (conn.execute(_sql.DROP_TENANT_SQL, (tenant_id,))).fetchall()
        return {str(r["what"]): int(r["removed"]) for r in rows}

    def tenants(self) -> list[dict[str, Any]]:
        """Every tenant with what it holds (admin only): tenant_id, created_at, corpora, documents, chunks (live),
        superseded, roles (the login roles bound to it), language, placement (pool or dedicated)."""
        out: list[dict[str, Any]] = []
        with self.connection() as conn:
            with _base.translate_errors():
                # a page a transaction (_sql.TENANTS_PAGE): one over every tenant runs out of lock slots
                while True:
                    with conn.transaction():
                        page = [dict(r) for r in (conn.execute(
                            _sql.TENANTS_SQL, (out[-1]["tenant_id"] if out else None, _sql.TENANTS_PAGE))).fetchall()]
                    out += page
                    if len(page) < _sql.TENANTS_PAGE:
                        return out

    def grant_app(self, role_name: str) -> None:
        """Make an existing role a trusted application role (admin only)."""
        _base.check_name("role_name", role_name)
        self._scalar(_sql.GRANT_APP_SQL, (role_name,))

    @contextmanager
    def bulk_load(self, text_indexes: bool = True, build_workers: int = 2) -> Iterator[None]:
        """Drop the HNSW index (and, with text_indexes, the GIN and BM25 ones) for a large load and rebuild
        them afterwards, even on error (admin only).

        Meanwhile search stays correct but slow on large tenants: dense search exact, lexical search by
        ts_rank over the whole partition (lexical='bm25' asked for explicitly raises 55000). Each index is
        dropped and rebuilt in a transaction of its own; the BM25 ones are rebuilt as one segment each,
        so the load needs no merge_bm25 afterwards.

        build_workers: how many partition indexes are built at once, each on a connection of its own
        (hybrid.bulk_index_jobs, largest first; 1 to 16). A BM25 build uses one core, so on a server with
        cores to spare more workers finish sooner, for up to that many builds' maintenance_work_mem at
        once; 1 builds them one after the other in the resume calls. Whatever a worker has not built (an
        error stops the others) the resume calls build.
        """
        _base.check_flag("text_indexes", text_indexes)
        _base.check_workers("build_workers", build_workers)
        self._scalar(_sql.SUSPEND_INDEX_SQL, ())
        try:
            if text_indexes:
                self._scalar(_sql.SUSPEND_TEXT_SQL, ())
            yield
        finally:
            try:
                self._build_partition_indexes(build_workers)
            finally:
                try:
                    if text_indexes:
                        self._scalar(_sql.RESUME_TEXT_SQL, ())
                finally:
                    self._scalar(_sql.RESUME_INDEX_SQL, ())

    def _build_partition_indexes(self, workers: int) -> None:
        """hybrid.bulk_index_jobs on workers connections at once (nothing with one: the resume calls build)."""
        if workers == 1:
            return
        with self.connection() as conn:
            with _base.translate_errors():
                with conn.transaction():
                    jobs = [(r["part"], r["kind"]) for r in (conn.execute(_sql.BULK_INDEX_JOBS_SQL)).fetchall()]
        _base.build_partition_indexes(self.dsn, jobs, workers)

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        with self.connection() as conn:
            with _base.translate_errors():
                with conn.transaction():
                    row = (conn.execute(sql, params)).fetchone()
        return None if row is None else next(iter(row.values()))

    def close(self) -> None:
        """Close the connection or pool."""
        if self._pool is not None:
            self._pool.close()
        if self._conn is not None:
            self._conn.close()
        self._pool = self._conn = None
        for replica in self._replicas:
            replica.close()

    def __enter__(self) -> HybridClient:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    dsn: str | None = None, *, pool: bool = False, min_size: int = 1, max_size: int = 4, embedder: Any = None
) -> HybridClient:
    """A HybridClient on dsn, else $PYHYBRID_DSN, else the embedded server (started if needed)."""
    from .server import resolve_dsn

    client = HybridClient(resolve_dsn(dsn), pool=pool, min_size=min_size, max_size=max_size, embedder=embedder)
    return client
