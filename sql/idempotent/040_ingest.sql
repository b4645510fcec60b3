-- Bulk ingestion: COPY into a staging table, then one validated, atomic upsert.

-- hybrid.embedding_dim: the vector dimension chosen at install
CREATE OR REPLACE FUNCTION hybrid.embedding_dim() RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT value::integer FROM hybrid.setting WHERE key = 'embedding_dim' $$;
COMMENT ON FUNCTION hybrid.embedding_dim() IS 'The dimension of hybrid.chunk.embedding, chosen at install.';

-- hybrid._chunk_stage_columns: the staging table's columns, as hybrid._stage_columns lists them
CREATE OR REPLACE FUNCTION hybrid._chunk_stage_columns() RETURNS text
LANGUAGE sql IMMUTABLE
AS $$ SELECT 'ord bigint, tenant_id text, chunk_id text, document_id text, position integer, content text, '
             'embedding real[], acl_labels text[], metadata jsonb, sparse_embedding text' $$;
COMMENT ON FUNCTION hybrid._chunk_stage_columns() IS
'The columns of pg_temp.hybrid_chunk_stage (name and type, in order), as hybrid._stage_columns lists them: what hybrid.begin_ingest creates and hybrid.finish_ingest accepts.';
REVOKE ALL ON FUNCTION hybrid._chunk_stage_columns() FROM PUBLIC;

-- hybrid.begin_ingest: the staging table chunks are COPYed into
CREATE OR REPLACE FUNCTION hybrid.begin_ingest() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_cols text := hybrid._stage_columns('hybrid_chunk_stage');
BEGIN
    -- Kept for the session and emptied by each commit (ON COMMIT DELETE ROWS, which truncates in place): a table
    -- made and dropped by every batch (ON COMMIT DROP) took 1.7 ms of each and left ~30 dead catalog rows
    -- (pg_class, pg_attribute, pg_type, pg_depend, its sequence's and TOAST table's), the catalog growth
    -- docs/benchmarks.md measured at 100,000 tenants. One of another release's shape, or rigged, is made again.
    IF v_cols IS DISTINCT FROM hybrid._chunk_stage_columns() THEN
        IF v_cols IS NOT NULL THEN
            DROP TABLE pg_temp.hybrid_chunk_stage;
        END IF;
        -- STORAGE: a staged 384-d row passes the ~2 kB TOAST threshold, and pglz was tried on its array and
        -- its text before either went out of line (a bulk load's CPU: revision 0016); now the text goes out
        -- of line uncompressed and the array stays in the row where it fits (PostgreSQL 16 and later)
        CREATE TEMP TABLE hybrid_chunk_stage (
            ord          bigserial,
            tenant_id    text,
            chunk_id     text,
            document_id  text,
            position     integer,
            content      text STORAGE EXTERNAL,
            embedding    real[] STORAGE MAIN,
            acl_labels   text[],
            metadata     jsonb,
            sparse_embedding text  -- pgvector's text form, any dimension (hybrid._sparse)
        ) ON COMMIT DELETE ROWS;
        -- any role this session sets may stage, and hybrid.finish_ingest reads and empties it as hybrid_definer
        -- (a temporary table is this session's alone, and its rows last one transaction)
        GRANT SELECT, INSERT, DELETE ON pg_temp.hybrid_chunk_stage TO PUBLIC;
        GRANT USAGE, UPDATE ON SEQUENCE pg_temp.hybrid_chunk_stage_ord_seq TO PUBLIC;
    ELSE
        DELETE FROM pg_temp.hybrid_chunk_stage;  -- a batch staged earlier in this transaction
    END IF;
    PERFORM setval('pg_temp.hybrid_chunk_stage_ord_seq', 1, false);  -- rows numbered from 1 in errors
END
$$;
COMMENT ON FUNCTION hybrid.begin_ingest() IS
'Empties (creating it the first time in a session) the staging table pg_temp.hybrid_chunk_stage to COPY chunks into, whose rows last until the transaction ends; hybrid.finish_ingest(corpus_id) loads them.';

-- hybrid._check_tsvector_sizes: the staged chunks whose content would pass PostgreSQL's 1 MB tsvector limit
CREATE OR REPLACE FUNCTION hybrid._check_tsvector_sizes() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    bad record;
BEGIN
    -- PostgreSQL refuses a tsvector over 1 MB (the chunk's generated tsv column): content well under
    -- the content limit can pass it, with many distinct words. Only long contents can, so only
    -- they are tried here (to_tsvector of 200,000 bytes of one-letter words stays under 1 MB).
    FOR bad IN SELECT s.ord, s.chunk_id FROM pg_temp.hybrid_chunk_stage s
               WHERE octet_length(s.content) > 200000 ORDER BY s.ord LOOP
        BEGIN
            PERFORM to_tsvector(hybrid._text_config(hybrid._tenant_key(hybrid._current_tenant())), s.content)
            FROM pg_temp.hybrid_chunk_stage s WHERE s.ord = bad.ord;
        EXCEPTION WHEN program_limit_exceeded THEN
            RAISE EXCEPTION 'chunk row % (chunk_id %): content makes a text-search vector over PostgreSQL''s 1 MB limit',
                bad.ord, hybrid._shown(bad.chunk_id)
                USING ERRCODE = '22023',
                      HINT = 'Nothing was written; split the content into smaller chunks and ingest the batch again.';
        END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid._check_tsvector_sizes() IS
'Raises 22023 naming the first staged chunk (pg_temp.hybrid_chunk_stage) whose content makes a text-search vector over PostgreSQL''s 1 MB limit; only contents over 200,000 bytes are tried. hybrid.finish_ingest calls it.';

-- hybrid._sparse: a sparse vector at the one dimension every stored vector has
CREATE OR REPLACE FUNCTION hybrid._sparse(v text) RETURNS sparsevec
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT regexp_replace(v, '/\s*[0-9]+\s*$', '/1000000000')::sparsevec $$;
COMMENT ON FUNCTION hybrid._sparse(text) IS
'A sparse vector in pgvector''s text form ({index:weight,...}/dimensions, indices from 1) at dimension 1,000,000,000, pgvector''s largest: stored and query vectors of any vocabulary then compare (an index names the same token whatever dimension it was written with). NULL for NULL.';

-- hybrid._sparse_rule: why a staged sparse vector is refused (NULL: it is not)
CREATE OR REPLACE FUNCTION hybrid._sparse_rule(v text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    n integer;
    msg text;
BEGIN
    BEGIN
        n := length(hybrid._sparse(v)::text) - length(replace(hybrid._sparse(v)::text, ':', ''));
    EXCEPTION WHEN data_exception OR invalid_text_representation OR program_limit_exceeded THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        RETURN format('sparse_embedding must be a sparse vector, {index:weight,...}/dimensions with indices from 1 (%s)',
                      left(msg, 200));
    END;
    IF n > 1000 THEN
        RETURN format('sparse_embedding has %s non-zero values; at most 1000 (pgvector''s HNSW limit for sparsevec)', n);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hybrid._sparse_rule(text) IS
'Why hybrid.finish_ingest refuses a staged sparse_embedding (pgvector''s text form): not a sparse vector (the parser''s message), or more than 1,000 non-zero values (pgvector''s HNSW limit); NULL when it is fine.';

-- hybrid.finish_ingest: validate and upsert the staged chunks, atomically
CREATE OR REPLACE FUNCTION hybrid.finish_ingest(
    corpus_id text,
    OUT inserted bigint, OUT updated bigint, OUT unchanged bigint, OUT superseded bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer: callers cannot write chunks directly
SET search_path = pg_catalog, public, pg_temp
-- v_key reaches each statement as a constant, so the planner prunes hybrid.chunk to the tenant's
-- partition (a generic plan would plan, and lock, every partition)
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tenant text; v_key integer;
    v_dim integer := hybrid.embedding_dim();
    v_config regconfig;
    v_existing bigint;
    v_labels text;
    bad record;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._corpus_writer(corpus_id) s;  -- or why there is none
    v_config := hybrid._text_config(v_key);  -- what a pooled row's tsv is generated with
    PERFORM hybrid._check_stage('hybrid_chunk_stage', hybrid._chunk_stage_columns(), 'hybrid.begin_ingest()');

    SELECT q.ord, q.chunk_id, q.rule INTO bad FROM (
        SELECT s.ord, s.chunk_id,
           CASE
             WHEN s.chunk_id IS NULL OR btrim(s.chunk_id) = '' THEN 'chunk_id is missing'
             WHEN s.document_id IS NULL OR btrim(s.document_id) = '' THEN 'document_id is missing'
             WHEN s.content IS NULL THEN 'content is missing'
             WHEN s.tenant_id IS NOT NULL AND s.tenant_id <> v_tenant
               THEN format('tenant_id %s is not the tenant of this transaction (%L)', hybrid._shown(s.tenant_id), v_tenant)
             WHEN s.embedding IS NOT NULL AND cardinality(s.embedding) <> v_dim
               THEN format('embedding has %s dimensions, expected %s', cardinality(s.embedding), v_dim)
             WHEN s.embedding IS NOT NULL AND 'NaN'::real = ANY (s.embedding) THEN 'embedding contains NaN'
             WHEN s.embedding IS NOT NULL AND ('Infinity'::real = ANY (s.embedding) OR '-Infinity'::real = ANY (s.embedding))
               THEN 'embedding contains an infinite value'
             WHEN s.embedding IS NOT NULL AND array_position(s.embedding, NULL) IS NOT NULL THEN 'embedding contains NULL'
             WHEN s.metadata IS NOT NULL AND jsonb_typeof(s.metadata) <> 'object' THEN 'metadata must be a JSON object'
             WHEN s.sparse_embedding IS NOT NULL THEN hybrid._sparse_rule(s.sparse_embedding)
             WHEN count(*) OVER (PARTITION BY s.chunk_id) > 1 THEN 'chunk_id appears more than once in the batch'
           END AS rule
        FROM pg_temp.hybrid_chunk_stage s) q
    WHERE q.rule IS NOT NULL
    ORDER BY q.ord LIMIT 1;
    IF NOT FOUND THEN
        PERFORM hybrid._check_tsvector_sizes();
    ELSE
        RAISE EXCEPTION 'chunk row % (chunk_id %): %', bad.ord, hybrid._shown(bad.chunk_id), bad.rule
            USING ERRCODE = CASE WHEN bad.rule LIKE 'tenant_id%' THEN '42501' ELSE '22023' END,
                  HINT = 'Nothing was written; fix the row and ingest the batch again.';
    END IF;

    -- an app role writes chunks whatever their ACL labels (RLS would hide rows it upserts)
    v_labels := hybrid._with_all_labels();

    INSERT INTO hybrid.corpus (tenant_id, corpus_id) VALUES (v_tenant, finish_ingest.corpus_id)
    ON CONFLICT ON CONSTRAINT corpus_pkey DO NOTHING;

    -- re-ingesting a document supersedes its chunks that the new batch does not carry
    UPDATE hybrid.chunk c SET superseded = true, updated_at = now()
    WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
      AND NOT c.superseded
      AND c.document_id IN (SELECT DISTINCT s.document_id FROM pg_temp.hybrid_chunk_stage s)
      AND NOT EXISTS (SELECT 1 FROM pg_temp.hybrid_chunk_stage s WHERE s.chunk_id = c.chunk_id);
    GET DIAGNOSTICS superseded = ROW_COUNT;

    SELECT count(*) INTO v_existing FROM hybrid.chunk c
    WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
      AND c.chunk_id IN (SELECT s.chunk_id FROM pg_temp.hybrid_chunk_stage s);
    WITH src AS (
        SELECT s.chunk_id, s.document_id, coalesce(s.position, 0) AS position, s.content,
               s.embedding::vector AS embedding, hybrid._sparse(s.sparse_embedding) AS sparse_embedding,
               coalesce(s.acl_labels, '{}') AS acl_labels, coalesce(s.metadata, '{}') AS metadata,
               hybrid.content_hash(s.document_id, coalesce(s.position, 0), s.content, coalesce(s.acl_labels, '{}'),
                                   coalesce(s.metadata, '{}'), finish_ingest.corpus_id) AS content_hash
        FROM pg_temp.hybrid_chunk_stage s
    ), up AS (
        INSERT INTO hybrid.chunk AS c (tenant_id, chunk_id, corpus_id, document_id, position, content,
                                       embedding, sparse_embedding, acl_labels, metadata, content_hash, tenant_key,
                                       text_config)
        SELECT v_tenant, src.chunk_id, finish_ingest.corpus_id, src.document_id, src.position, src.content,
               src.embedding, src.sparse_embedding, src.acl_labels, src.metadata, src.content_hash, v_key, v_config
        FROM src
        ON CONFLICT ON CONSTRAINT chunk_pkey DO UPDATE
            SET corpus_id = excluded.corpus_id, document_id = excluded.document_id, position = excluded.position,
                content = excluded.content, embedding = excluded.embedding, sparse_embedding = excluded.sparse_embedding,
                acl_labels = excluded.acl_labels, metadata = excluded.metadata, content_hash = excluded.content_hash,
                superseded = false, updated_at = now()
            WHERE c.content_hash IS DISTINCT FROM excluded.content_hash OR c.superseded
               OR c.embedding IS DISTINCT FROM excluded.embedding OR c.sparse_embedding IS DISTINCT FROM excluded.sparse_embedding
        RETURNING 1
    )
    SELECT count(*) INTO updated FROM up;  -- inserted and updated rows, told apart below
    -- (a partitioned table has no xmax to tell an insert from an update in RETURNING)
    SELECT count(*) - v_existing INTO inserted FROM pg_temp.hybrid_chunk_stage;
    updated := updated - inserted;
    SELECT count(*) - inserted - updated INTO unchanged FROM pg_temp.hybrid_chunk_stage;
    PERFORM hybrid._analyze_partition(v_key, inserted);
    IF inserted + updated + superseded > 0 THEN
        PERFORM hybrid._bm25_written(v_key);  -- new BM25 index entries: re-scored until merged again
    END IF;
    DELETE FROM pg_temp.hybrid_chunk_stage;  -- not TRUNCATE: on a table older than the transaction it writes catalogs
    PERFORM set_config('hybrid.acl_labels', v_labels, true);
END
$$;
COMMENT ON FUNCTION hybrid.finish_ingest(text) IS
'Loads the staged chunks into corpus_id for the current tenant, atomically: validates every row first (the first bad row is named, SQLSTATE 22023, or 42501 for another tenant''s row; content whose text-search vector would pass PostgreSQL''s 1 MB limit is a bad row), supersedes chunks of re-ingested documents that the batch no longer carries, and upserts by chunk id (unchanged rows are not rewritten). Returns counts.';

-- hybrid.unchanged_documents: which documents of a batch are stored exactly so (nothing to embed)
CREATE OR REPLACE FUNCTION hybrid.unchanged_documents(corpus_id text, chunks jsonb) RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer: reads chunks for the caller's tenant
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    IF chunks IS NULL OR jsonb_typeof(chunks) <> 'array' THEN
        RAISE EXCEPTION 'chunks must be a JSON array of chunk records' USING ERRCODE = '22023';
    END IF;
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH sent AS (
        SELECT x.document_id, x.chunk_id,
               hybrid.content_hash(x.document_id, coalesce(x.position, 0), x.content, coalesce(x.acl_labels, '{}'),
                                   coalesce(x.metadata, '{}'), unchanged_documents.corpus_id) AS h
        FROM jsonb_to_recordset(chunks) AS x(chunk_id text, document_id text, position integer, content text,
                                             acl_labels text[], metadata jsonb)
    ), live AS (
        -- the documents' live chunks (any corpus: re-ingesting a document supersedes what it no longer carries)
        SELECT c.document_id, c.chunk_id, c.content_hash, c.corpus_id, c.embedding IS NOT NULL AS embedded,
               hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all) AS visible
        FROM hybrid.chunk c
        WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND NOT c.superseded
          AND c.document_id IN (SELECT sent.document_id FROM sent)
    )
    SELECT s.document_id FROM sent s
    LEFT JOIN live l ON l.chunk_id = s.chunk_id AND l.document_id = s.document_id AND l.content_hash = s.h
                    AND l.corpus_id = unchanged_documents.corpus_id AND l.embedded AND l.visible
    GROUP BY s.document_id
    HAVING bool_and(l.chunk_id IS NOT NULL)
       AND count(*) = (SELECT count(*) FROM live l2 WHERE l2.document_id = s.document_id);
END
$$;
COMMENT ON FUNCTION hybrid.unchanged_documents(text, jsonb) IS
'The document ids of a batch (chunks: JSON array of {chunk_id, document_id, position, content, acl_labels, metadata}) that the current tenant already stores exactly so in corpus_id: every chunk live, visible to the caller, embedded and with the same content hash, and no other live chunk. Ingesting them would change nothing, so a client may skip embedding them.';

-- hybrid.classify_ids: what each id names in the caller's tenant (for edge loads)
CREATE OR REPLACE FUNCTION hybrid.classify_ids(ids text[]) RETURNS TABLE (id text, kinds text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer: reads chunks for the caller's tenant
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
    v_entities text[] := '{}';
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    IF cardinality(ids) > 100000 THEN
        RAISE EXCEPTION 'ids must hold at most 100000 ids, got %', cardinality(ids) USING ERRCODE = '22023';
    END IF;
    IF v_tenant IS NULL OR v_key IS NULL OR ids IS NULL THEN
        RETURN;
    END IF;
    IF to_regclass('hybrid.graph_node') IS NOT NULL THEN
        -- an entity only where a chunk the caller can see links to it
        v_entities := hybrid._entities_seen(v_key, ids, v_tenant, v_acl, v_all);
    END IF;
    RETURN QUERY
    SELECT u.id, array_remove(ARRAY[
               CASE WHEN EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
                                 AND c.chunk_id = u.id
                                 AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all))
                    THEN 'chunk' END,
               CASE WHEN EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
                                 AND c.document_id = u.id
                                 AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all))
                    THEN 'document' END,
               CASE WHEN u.id = ANY (v_entities) THEN 'entity' END], NULL)
    FROM (SELECT DISTINCT x AS id FROM unnest(ids) x WHERE x IS NOT NULL) u;
END
$$;
COMMENT ON FUNCTION hybrid.classify_ids(text[]) IS
'For each distinct id, what it names in the current tenant: chunk (a live chunk the caller can see), document (the document id of such chunks), entity (an entity node of the graph that a chunk the caller can see links to); an empty array: nothing yet (an edge to it creates an entity node). pyhybrid ingest-edges uses it to refuse document ids and report new entities before loading edges.';

-- hybrid.delete_document: delete a document's chunks
CREATE OR REPLACE FUNCTION hybrid.delete_document(document_id text, corpus_id text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer;
    n bigint;
    v_labels text;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM hybrid._check_writer();
    v_key := hybrid._writer_key(v_tenant);  -- held: no move of the tenant runs meanwhile
    -- every chunk of the document, whatever its labels: an app role acting with some labels must not
    -- leave the others behind (a writer sees every row anyway)
    v_labels := hybrid._with_all_labels();
    DELETE FROM hybrid.chunk c
    WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.document_id = delete_document.document_id
      AND (delete_document.corpus_id IS NULL OR c.corpus_id = delete_document.corpus_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM hybrid._bm25_written(v_key);
    END IF;
    PERFORM set_config('hybrid.acl_labels', v_labels, true);
    RETURN n;
END
$$;
COMMENT ON FUNCTION hybrid.delete_document(text, text) IS
'Deletes every chunk of a document of the current tenant (optionally within one corpus), whatever their ACL labels, superseded ones too; returns how many. Writers only (hybrid._may_write).';
