-- What a tenant holds, by document and corpus, and folder sync: list, prune, remember a corpus's folder.
-- A reader (a tenant login role without every ACL label) lists only what it can see: a document or
-- corpus whose chunks are all hidden from it is absent, as if it did not exist; it cannot prune or
-- remember a folder (writers only, one 42501 whatever it names).

-- hybrid.documents: the caller's visible documents, a row each
CREATE OR REPLACE FUNCTION hybrid.documents(corpus text DEFAULT NULL, id_prefix text DEFAULT NULL,
                                            document_ids text[] DEFAULT NULL)
RETURNS TABLE (corpus_id text, document_id text, chunks bigint, title text, source text, updated_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer: reads chunks for the caller's tenant
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    IF cardinality(document_ids) > 100000 THEN
        RAISE EXCEPTION 'document_ids must hold at most 100000 ids, got %', cardinality(document_ids) USING ERRCODE = '22023';
    END IF;
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.corpus_id, c.document_id, count(*), min(c.metadata->>'title'), min(c.metadata->>'source'),
           max(c.updated_at)
    FROM hybrid.chunk c
    WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
      AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
      AND (documents.corpus IS NULL OR c.corpus_id = documents.corpus)
      AND (id_prefix IS NULL OR left(c.document_id, length(id_prefix)) = id_prefix)
      AND (document_ids IS NULL OR c.document_id = ANY (document_ids))  -- by the document index
    GROUP BY c.corpus_id, c.document_id
    ORDER BY c.corpus_id, c.document_id;
END
$$;
COMMENT ON FUNCTION hybrid.documents(text, text, text[]) IS
'The current tenant''s documents that the caller can see, a row each (optionally of one corpus, with ids starting with id_prefix, and among document_ids, at most 100000): its corpus, id, live visible chunks, title and source (from the chunks'' metadata) and when it was last written. A document whose chunks are all hidden from the caller, superseded or deleted is not listed.';

-- hybrid.corpora: the caller's corpora, with their folder and size
CREATE OR REPLACE FUNCTION hybrid.corpora()
RETURNS TABLE (corpus_id text, source_root text, documents bigint, chunks bigint, embedder jsonb, reembedding jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH live AS (
        SELECT c.corpus_id, count(DISTINCT c.document_id) AS documents, count(*) AS chunks
        FROM hybrid.chunk c
        WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
          AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
        GROUP BY c.corpus_id
    )
    SELECT k.corpus_id, k.metadata->>'source_root', coalesce(l.documents, 0), coalesce(l.chunks, 0),
           k.metadata->'embedder', k.metadata->'reembedding'
    FROM hybrid.corpus k LEFT JOIN live l ON l.corpus_id = k.corpus_id
    WHERE k.tenant_id = v_tenant
      -- a reader meets only corpora it sees a chunk of: an empty or hidden one is like an unknown one
      AND (v_all OR hybrid._may_write() OR l.corpus_id IS NOT NULL)
    ORDER BY k.corpus_id;
END
$$;
COMMENT ON FUNCTION hybrid.corpora() IS
'The current tenant''s corpora: id, the folder pyhybrid ingest remembers for it (source_root, NULL if none), the live documents and chunks the caller can see, the embedder that filled it (hybrid.use_embedder; NULL if none was recorded) and, while it is re-embedded, the embedder it moves to and the last chunk id done (hybrid.begin_reembed). A reader (not hybrid._may_write) that does not see every ACL label meets only corpora holding a chunk it can see.';

-- hybrid.set_corpus_root: remember the folder a corpus is ingested from (document ids are relative to it)
CREATE OR REPLACE FUNCTION hybrid.set_corpus_root(corpus_id text, source_root text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_tenant text := hybrid._current_tenant();
BEGIN
    IF corpus_id IS NULL OR btrim(corpus_id) = '' THEN
        RAISE EXCEPTION 'corpus_id must not be empty' USING ERRCODE = '22023';
    END IF;
    IF source_root IS NOT NULL AND btrim(source_root) = '' THEN
        RAISE EXCEPTION 'source_root must be a path or NULL (to forget it), got an empty string' USING ERRCODE = '22023';
    END IF;
    IF v_tenant IS NULL OR hybrid._tenant_key(v_tenant) IS NULL THEN
        RAISE EXCEPTION 'no tenant context: act for a tenant first' USING ERRCODE = '42501';
    END IF;
    PERFORM hybrid._check_writer();
    INSERT INTO hybrid.corpus AS k (tenant_id, corpus_id, metadata)
    VALUES (v_tenant, set_corpus_root.corpus_id,
            CASE WHEN source_root IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('source_root', source_root) END)
    ON CONFLICT ON CONSTRAINT corpus_pkey DO UPDATE
        SET metadata = CASE WHEN set_corpus_root.source_root IS NULL THEN k.metadata - 'source_root'
                            ELSE k.metadata || jsonb_build_object('source_root', set_corpus_root.source_root) END;
END
$$;
COMMENT ON FUNCTION hybrid.set_corpus_root(text, text) IS
'Remembers source_root (a path on the ingesting machine; NULL forgets it) as the folder corpus_id of the current tenant is ingested from, creating the corpus if needed: pyhybrid ingest then keeps document ids relative to it. Writers only (hybrid._may_write).';

-- hybrid.prune_documents: supersede the documents of a corpus that a folder no longer holds
CREATE OR REPLACE FUNCTION hybrid.prune_documents(corpus_id text, keep text[], id_prefix text DEFAULT '',
                                                  dry_run boolean DEFAULT false)
RETURNS TABLE (document_id text, chunks bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer;
    v_labels text;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    IF corpus_id IS NULL OR btrim(corpus_id) = '' THEN
        RAISE EXCEPTION 'corpus_id must not be empty' USING ERRCODE = '22023';
    END IF;
    IF keep IS NULL THEN
        RAISE EXCEPTION 'keep must be an array of document ids (empty: prune every document under id_prefix)'
            USING ERRCODE = '22023';
    END IF;
    IF id_prefix IS NULL THEN
        RAISE EXCEPTION 'id_prefix must be a string ('''' for the whole corpus)' USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_flag('dry_run', dry_run);
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;
    END IF;
    PERFORM hybrid._check_writer();  -- a dry run too: a reader learns nothing of what it cannot see
    v_key := hybrid._writer_key(v_tenant);  -- held: no move of the tenant runs meanwhile
    v_labels := hybrid._with_all_labels();
    IF dry_run THEN
        RETURN QUERY
        SELECT c.document_id, count(*) FROM hybrid.chunk c
        WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.corpus_id = prune_documents.corpus_id
          AND NOT c.superseded AND left(c.document_id, length(id_prefix)) = id_prefix
          AND NOT (c.document_id = ANY (keep))
        GROUP BY c.document_id ORDER BY c.document_id;
    ELSE
        RETURN QUERY
        WITH gone AS (
            UPDATE hybrid.chunk c SET superseded = true, updated_at = now()
            WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.corpus_id = prune_documents.corpus_id
              AND NOT c.superseded AND left(c.document_id, length(id_prefix)) = id_prefix
              AND NOT (c.document_id = ANY (keep))
            RETURNING c.document_id
        )
        SELECT g.document_id, count(*) FROM gone g GROUP BY g.document_id ORDER BY g.document_id;
        PERFORM hybrid._audit_sample_written(v_key);
    END IF;
    PERFORM set_config('hybrid.acl_labels', v_labels, true);
END
$$;
COMMENT ON FUNCTION hybrid.prune_documents(text, text[], text, boolean) IS
'Folder sync: supersedes every live chunk of the documents of corpus_id whose id starts with id_prefix ('''' for all) and is not in keep (the document ids a folder still holds); returns each such document with its chunks, and with dry_run only reports them. Superseded chunks are never returned by any branch; ingesting the document again brings it back. Writers only (hybrid._may_write), a dry run too.';

-- hybrid.tenants: the tenants (a page of them), with what they hold (admin)
CREATE OR REPLACE FUNCTION hybrid.tenants(after text DEFAULT NULL, max_tenants integer DEFAULT NULL)
RETURNS TABLE (tenant_id text, created_at timestamptz, corpora bigint, documents bigint, chunks bigint,
               superseded bigint, roles text[], language text, placement text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    v_part regclass;
BEGIN
    PERFORM hybrid._check_bypasses_rls('hybrid.tenants(text, integer)');  -- it counts every row
    IF max_tenants IS NOT NULL THEN
        PERFORM hybrid._check_range('max_tenants', max_tenants, 1, 1000000);
    END IF;
    -- counting a dedicated tenant locks its partition to the end of the transaction: a page of max_tenants locks that
    -- many, where one transaction over every tenant runs out of lock slots at a few thousand (docs/tenancy.md); a
    -- pooled tenant is counted in its leaf of the pool (hybrid.chunk_pool), which the other pooled tenants share
    FOR t IN SELECT x.tenant_id, x.tenant_key, x.created_at, x.text_config FROM hybrid.tenant x
             WHERE after IS NULL OR x.tenant_id > after ORDER BY x.tenant_id LIMIT max_tenants LOOP
        tenant_id := t.tenant_id;
        created_at := t.created_at;
        language := t.text_config;
        corpora := (SELECT count(*) FROM hybrid.corpus k WHERE k.tenant_id = t.tenant_id);
        roles := (SELECT coalesce(array_agg(g.role_name::text ORDER BY g.role_name), '{}')
                  FROM hybrid.tenant_grant g WHERE g.tenant_id = t.tenant_id);
        documents := 0; chunks := 0; superseded := 0;
        placement := CASE WHEN hybrid._pooled(t.tenant_key) THEN 'pool' ELSE 'dedicated' END;
        v_part := hybrid._chunk_partition(t.tenant_key);
        IF placement = 'pool' THEN
            -- the key a constant: one leaf of the pool is planned, the tenant's rows found by its tenant_id index
            EXECUTE format('SELECT count(DISTINCT document_id) FILTER (WHERE NOT superseded), '
                           'count(*) FILTER (WHERE NOT superseded), count(*) FILTER (WHERE superseded) '
                           'FROM hybrid.chunk_pool WHERE tenant_key = %s AND tenant_id = $1', t.tenant_key)
            INTO documents, chunks, superseded USING t.tenant_id;
        ELSIF v_part IS NOT NULL THEN
            -- the tenant's partition by name: counting it reads no other tenant's rows
            EXECUTE format('SELECT count(DISTINCT document_id) FILTER (WHERE NOT superseded), '
                           'count(*) FILTER (WHERE NOT superseded), count(*) FILTER (WHERE superseded) FROM %s',
                           v_part)
            INTO documents, chunks, superseded;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.tenants(text, integer) IS
'The tenants whose id sorts after after (NULL: from the first), at most max_tenants of them (NULL: all), in id order: when each was created, its corpora, live documents and chunks, superseded chunks (kept until re-ingested or deleted), the login roles bound to it, its text-search language (hybrid.set_tenant_language) and its placement (pool: its chunks in hybrid.chunk_pool; dedicated: a partition of its own; hybrid.move_tenant). Admin only; reads each dedicated tenant''s partition once, and locks it to the end of the transaction: page through many tenants a transaction a page (pyhybrid''s tenants() does); pooled tenants lock only the pool''s leaves.';
REVOKE ALL ON FUNCTION hybrid.tenants(text, integer) FROM PUBLIC;
