-- pyhybrid 0.4: the dense audit's sample by row, not by block. Runs exactly once per database (Alembic
-- revision 0014). hybrid.search_dense audits each HNSW list against the partition's first live chunks in
-- hashtext(chunk_id) order, which this index gives (one per partition, cascaded to partitions made
-- later): a sample spread over the partition's rows, the same rows every call, where TABLESAMPLE SYSTEM
-- took whole blocks, a document's neighbouring chunks together
-- (bench/FINDINGS.md#the-dense-audits-sample-by-row-audit_eval).

CREATE INDEX IF NOT EXISTS chunk_audit_sample_idx ON hybrid.chunk (hashtext(chunk_id)) WHERE NOT superseded;
