-- The registry of hybrid.setting keys: every key the SQL or the Python package reads or writes, with its
-- default and meaning, in one place. docs/sql-reference.md is generated from it (tools/sql_reference.py),
-- and tests/test_sql_reference.py checks it against the keys and literal defaults of the function bodies.

-- hybrid.setting_keys: each hybrid.setting key, its default (NULL: none; the key is absent until set) and meaning
CREATE OR REPLACE FUNCTION hybrid.setting_keys()
RETURNS TABLE (key text, default_value text, meaning text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    VALUES
        ('embedding_dim', '384',
         'The vector dimension, fixed at install (pyhybrid migrate --dim, else the session setting hybrid.install_dim, else 384).'),
        ('graph', 'hybrid_graph',
         'The AGE graph''s name; written where AGE is installed (sql/optional/age_graph.sql).'),
        ('version', NULL,
         'The pyhybrid release the installed SQL comes from (pyhybrid.__version__), written at every upgrade; read by hybrid.version().'),
        ('sql_digest', NULL,
         'A SHA-256 of sql/idempotent/ and sql/optional/, so an upgrade re-applies them only when they changed.'),
        ('vector_index_suspended', NULL,
         'Present (the time it was set) while hybrid.suspend_vector_index holds the HNSW index off for a bulk load.'),
        ('text_indexes_suspended', NULL,
         'Present (the time it was set) while hybrid.suspend_text_indexes holds the GIN and BM25 indexes off for a bulk load.'),
        ('exact_threshold', '500',
         'Dense search is exact (a top-N sort) up to this many chunks in scope, or up to dense_audit_rows where that is larger, through the partition''s HNSW index above it (hybrid._dense_plan).'),
        ('hnsw_ef_search', NULL,
         'The HNSW search breadth; unset: 100 x sqrt(rows / 11,111) of the tenant''s partition, between 100 and 300 (from 100,000 rows), at most 150 where the partition''s index holds the vectors in a graph of m >= 24 and ef_construction >= 128 (hybrid._dense_plan).'),
        ('hnsw_m', NULL,
         'The HNSW graph''s m for every partition at hybrid.resume_vector_index''s next build; unset: by hnsw_dense_rows (16 where only hnsw_ef_construction is set).'),
        ('hnsw_ef_construction', NULL,
         'The HNSW graph''s ef_construction for every partition at the next build; unset: by hnsw_dense_rows (64 where only hnsw_m is set).'),
        ('dense_index_kind', NULL,
         'What the HNSW index holds (vector, halfvec or bit), written only by hybrid.set_dense_index_kind with the index it builds; unset: by the dimension (hybrid._dense_kind).'),
        ('dense_audit_rows', '1000',
         'How many chunks of the partition audit each HNSW list (its first live chunks in hashtext(chunk_id) order; past 100,000 chunks this many x sqrt(rows / 100,000), at most 4x); a visible sampled chunk nearer than the list''s 10th row and not in it has the list searched again at ef_search 1000 (IVFFlat: 4 x ivfflat_probes lists), then exactly (hybrid.search_dense); a scope of at most this many chunks is searched exactly (hybrid._dense_plan); 0: no audit.'),
        ('ivfflat_rows', '10000',
         'Partitions of at least this many live chunks get an IVFFlat index of sqrt(2 x rows) lists instead of HNSW where the engine builds their dense index (a bulk load''s rebuild, hybrid.resume_vector_index, hybrid.set_dense_index_kind), where the install''s dense kind is vector; 0: never (hybrid._ivfflat_lists).'),
        ('ivfflat_probes', '20',
         'The lists an IVFFlat partition index searches (4x that where the dense audit proves a list wrong); hybrid.search_dense.'),
        ('pg_textsearch', NULL,
         'off where the install goes without pg_textsearch''s BM25 index though the server offers it (pyhybrid migrate --no-pg-textsearch; the lexical branch ranks by ts_rank); absent: the index is installed where the extension is available (migrate --pg-textsearch removes the off).'),
        ('tenant_placement', 'pool',
         'Where hybrid.create_tenant puts a new tenant when no placement is given: pool (its chunks in hybrid.chunk_pool, shared with other small tenants, no relation of its own) or dedicated (a partition of hybrid.chunk of its own).'),
        ('pool_max_chunks', '2000',
         'A pooled tenant holding more chunks than this (its BM25 document count) is due for a partition of its own (hybrid.pool_due; pyhybrid.maintenance.place_tenants and pyhybrid doctor --fix move it with hybrid.move_tenant).'),
        ('hnsw_dense_rows', '100000',
         'Without hnsw_m and hnsw_ef_construction, partitions of at least this many live chunks get m 24 and ef_construction 128, smaller ones pgvector''s 16 and 64 (hybrid._hnsw_density).')
$$;
COMMENT ON FUNCTION hybrid.setting_keys() IS
'Every hybrid.setting key: (key, default_value, meaning); default_value NULL means the key has no default and is absent until written. The registry docs/sql-reference.md is generated from.';
REVOKE ALL ON FUNCTION hybrid.setting_keys() FROM PUBLIC;
