-- pyhybrid 0.4: the dense audit's sample, cached. Runs exactly once per database (Alembic revision 0015).
-- hybrid.search_dense audits each HNSW list against the partition's first live chunks in hashtext(chunk_id)
-- order (revision 0014's index). Read through that index, each sampled row is a heap page of its own: at
-- the 50% tenant of a 1M install, 2,236 rows read 2,247 buffers, twice the HNSW scan they check. Here the
-- same rows (their ids and vectors) sit together, written by hybrid.refresh_audit_samples (after a bulk
-- load, hybrid.merge_bm25, or by hand) and forgotten by the next write to the tenant's chunks; the audit
-- reads them where they are current and the partition otherwise. No tenant reads these tables.
CREATE TABLE hybrid.chunk_audit_sample (
    tenant_key integer NOT NULL REFERENCES hybrid.tenant (tenant_key) ON DELETE CASCADE,
    ord        integer NOT NULL,
    chunk_id   text    NOT NULL,
    embedding  vector,
    PRIMARY KEY (tenant_key, ord)
);
COMMENT ON TABLE hybrid.chunk_audit_sample IS
'The dense audit''s sample of a partition, cached: its first live chunks in hashtext(chunk_id) order (ord), ids and embeddings, as hybrid.refresh_audit_samples found them. Valid while hybrid.chunk_audit_sample_state has the partition''s row.';
REVOKE ALL ON hybrid.chunk_audit_sample FROM PUBLIC;

CREATE TABLE hybrid.chunk_audit_sample_state (
    tenant_key   integer PRIMARY KEY REFERENCES hybrid.tenant (tenant_key) ON DELETE CASCADE,
    base         integer NOT NULL CHECK (base > 0),
    sample_rows  integer NOT NULL CHECK (sample_rows >= 0),
    refreshed_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE hybrid.chunk_audit_sample_state IS
'Partitions whose cached audit sample (hybrid.chunk_audit_sample) is current: refreshed with setting dense_audit_rows = base, no write to the tenant''s chunks since (hybrid._audit_sample_written forgets the row).';
REVOKE ALL ON hybrid.chunk_audit_sample_state FROM PUBLIC;
