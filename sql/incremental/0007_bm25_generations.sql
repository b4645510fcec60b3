-- pyhybrid 0.3: BM25 healing per index. pg_textsearch 1.0 loses an index's statistics at every
-- server restart (sql/idempotent/048_bm25_health.sql). The sentinel says that shared memory was
-- reset; these two tables say which indexes have been checked since, so that the first search of
-- a tenant after a restart rebuilds that tenant's index alone (not every tenant's, inside one
-- query: 150 s at 1M chunks over 100 tenants, and past ~70 stale indexes pg_textsearch's
-- "too many LWLocks taken"), and an index is never rebuilt twice for one restart.
CREATE TABLE hybrid.bm25_generation (
    generation  bigint PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('install', 'restart', 'crash')),
    detected_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE hybrid.bm25_generation IS
'One row per shared-memory reset of pg_textsearch that the BM25 sentinel revealed (restart or crash), generation 0 the install. No tenant data.';
INSERT INTO hybrid.bm25_generation (generation, kind) VALUES (0, 'install');

CREATE TABLE hybrid.bm25_index_checked (
    index_oid  oid PRIMARY KEY,
    generation bigint NOT NULL,
    checked_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE hybrid.bm25_index_checked IS
'The last generation (hybrid.bm25_generation) in which each BM25 index was checked, and rebuilt if stale; an index without a row counts as checked in generation 0. No tenant data.';

REVOKE ALL ON hybrid.bm25_generation, hybrid.bm25_index_checked FROM PUBLIC;
