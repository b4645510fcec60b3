-- pyhybrid 0.2: one content hash. Runs exactly once per database (Alembic revision 0003).
-- The hash says whether re-ingesting a chunk changes it. It is defined here, in an incremental
-- file, because stored hashes depend on it: a new definition needs a revision that recomputes them.
-- It covers the chunk's text, place and metadata, not its embedding (finish_ingest compares the
-- vectors themselves), so a client can ask which chunks changed before embedding them.

CREATE FUNCTION hybrid.content_hash(document_id text, "position" integer, content text, acl_labels text[],
                                    metadata jsonb, corpus_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 'v2:' OPERATOR(pg_catalog.||) pg_catalog.md5(pg_catalog.concat_ws(E'\x1f', document_id,
        "position"::text, content, acl_labels::text, metadata::text, corpus_id))
$$;
COMMENT ON FUNCTION hybrid.content_hash(text, integer, text, text[], jsonb, text) IS
'What makes re-ingesting a chunk a no-op: the same hash means the same text, place, labels and metadata. hybrid.finish_ingest computes it; 0.1''s client-side hashes were recomputed by revision 0003.';

-- recompute the stored hashes (0.1 hashed in the client, over the vector too), so that an upgrade
-- does not make every chunk look changed; the owner rewrites every tenant's rows
ALTER TABLE hybrid.chunk NO FORCE ROW LEVEL SECURITY;
UPDATE hybrid.chunk c
SET content_hash = hybrid.content_hash(c.document_id, c.position, c.content, c.acl_labels, c.metadata, c.corpus_id)
WHERE c.content_hash IS DISTINCT FROM
      hybrid.content_hash(c.document_id, c.position, c.content, c.acl_labels, c.metadata, c.corpus_id);
ALTER TABLE hybrid.chunk FORCE ROW LEVEL SECURITY;
