"""The SQL statements the clients send, besides hybrid_retrieve (pyhybrid.query) and COPY (pyhybrid._copy)."""

from __future__ import annotations

SET_TENANT_SQL = (
    "SELECT set_config('hybrid.tenant_id', %s, true), set_config('hybrid.acl_labels', %s, true)"
)
BEGIN_INGEST_SQL = "SELECT hybrid.begin_ingest()"
FINISH_INGEST_SQL = "SELECT * FROM hybrid.finish_ingest(%s)"
BEGIN_EDGES_SQL = "SELECT hybrid.begin_edges()"
FINISH_EDGES_SQL = "SELECT * FROM hybrid.finish_edges()"
DELETE_DOCUMENT_SQL = "SELECT hybrid.delete_document(%s, %s) AS deleted"
EMBEDDING_DIM_SQL = "SELECT hybrid.embedding_dim() AS dim"
CREATE_TENANT_SQL = "SELECT hybrid.create_tenant(%s, %s, %s)"
MOVE_TENANT_SQL = "CALL hybrid.move_tenant(%s, %s)"
POOL_DUE_SQL = "SELECT tenant_id, chunks FROM hybrid.pool_due()"
SET_LANGUAGE_SQL = "SELECT hybrid.set_tenant_language(%s, %s)"
LANGUAGE_SQL = "SELECT text_config FROM hybrid.tenant WHERE tenant_id = %s"
DROP_TENANT_SQL = "SELECT what, removed FROM hybrid.drop_tenant(%s)"
GRANT_TENANT_SQL = "SELECT hybrid.grant_tenant(%s, %s, %s::text[])"
GRANT_APP_SQL = "SELECT hybrid.grant_app(%s)"
SUSPEND_INDEX_SQL = "SELECT hybrid.suspend_vector_index()"
RESUME_INDEX_SQL = "SELECT hybrid.resume_vector_index()"
SUSPEND_TEXT_SQL = "SELECT hybrid.suspend_text_indexes()"
RESUME_TEXT_SQL = "SELECT hybrid.resume_text_indexes()"
BULK_INDEX_JOBS_SQL = "SELECT part::oid AS part, kind FROM hybrid.bulk_index_jobs()"
BUILD_PARTITION_INDEX_SQL = "SELECT hybrid.build_partition_index(%s::oid::regclass, %s)"
# a build worker names its job in pg_stat_activity.application_name (a build's progress row does not name the index)
BUILD_JOB_NAME_SQL = "SELECT set_config('application_name', 'pyhybrid build ' || %s || ' ' || %s::oid::regclass::text, false)"
READ_ONLY_SQL = "SET TRANSACTION READ ONLY"
WAL_LSN_SQL = "SELECT pg_current_wal_insert_lsn()::text AS lsn"
REPLAYED_SQL = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, true) AS replayed"
UNCHANGED_DOCUMENTS_SQL = "SELECT d AS document_id FROM hybrid.unchanged_documents(%s, %s::jsonb) AS d"
CLASSIFY_IDS_SQL = "SELECT id, kinds FROM hybrid.classify_ids(%s::text[])"
DOCUMENTS_SQL = ("SELECT corpus_id, document_id, chunks, title, source, updated_at "
                 "FROM hybrid.documents(corpus => %s, id_prefix => %s, document_ids => %s::text[])")
CORPORA_SQL = "SELECT corpus_id, source_root, documents, chunks, embedder, reembedding FROM hybrid.corpora()"
CORPUS_EMBEDDERS_SQL = "SELECT corpus_id, embedder, reembedding FROM hybrid.corpus_embedders(%s)"
USE_EMBEDDER_SQL = "SELECT hybrid.use_embedder(%s, %s::jsonb, %s) AS embedder"
SET_CORPUS_ROOT_SQL = "SELECT hybrid.set_corpus_root(%s, %s)"
CALIBRATE_SQL = "SELECT hybrid.calibrate_abstention(%s) AS floor"
PRUNE_DOCUMENTS_SQL = ("SELECT document_id, chunks FROM hybrid.prune_documents(corpus_id => %s, keep => %s::text[], "
                       "id_prefix => %s, dry_run => %s)")
# a page of tenants a transaction: counting a tenant locks its partition to the end of the transaction
TENANTS_PAGE = 500
TENANTS_SQL = ("SELECT tenant_id, created_at, corpora, documents, chunks, superseded, roles, language, placement "
               "FROM hybrid.tenants(%s, %s)")
