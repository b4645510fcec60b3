-- Which embedder filled each corpus (hybrid.corpus.metadata->'embedder'), and re-embedding a corpus in place
-- (metadata->'reembedding': the embedder it moves to and the last chunk id done). An embedder is a JSON object:
-- {"name": text, "kind": text, "dim": int, "normalize": bool, "query_prefix": text, "passage_prefix": text}; two
-- are the same embedder when all but kind agree. Nothing of where it runs (a path, a URL, a key) is kept.

-- hybrid._embedder_rule: why an embedder record is refused, or NULL
CREATE OR REPLACE FUNCTION hybrid._embedder_rule(embedder jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN embedder IS NULL OR jsonb_typeof(embedder) <> 'object' THEN 'embedder must be a JSON object'
        WHEN jsonb_typeof(embedder->'name') IS DISTINCT FROM 'string' OR btrim(embedder->>'name') = ''
             OR length(embedder->>'name') > 200 THEN 'embedder.name must be a non-empty string of at most 200 characters'
        WHEN jsonb_typeof(embedder->'dim') IS DISTINCT FROM 'number' OR (embedder->>'dim') !~ '^[0-9]{1,5}$'
             THEN 'embedder.dim must be a positive integer'
        WHEN embedder ? 'normalize' AND jsonb_typeof(embedder->'normalize') <> 'boolean'
             THEN 'embedder.normalize must be true or false'
        WHEN EXISTS (SELECT 1 FROM unnest(ARRAY['kind', 'query_prefix', 'passage_prefix']) k
                     WHERE embedder ? k AND (jsonb_typeof(embedder->k) <> 'string' OR length(embedder->>k) > 200))
             THEN 'embedder.kind, query_prefix and passage_prefix must be strings of at most 200 characters'
        WHEN EXISTS (SELECT 1 FROM jsonb_object_keys(embedder) k
                     WHERE k NOT IN ('name', 'kind', 'dim', 'normalize', 'query_prefix', 'passage_prefix'))
             THEN 'embedder has a key other than name, kind, dim, normalize, query_prefix and passage_prefix'
    END
$$;
COMMENT ON FUNCTION hybrid._embedder_rule(jsonb) IS
'Why an embedder record is refused (not an object; name, dim, normalize, kind or a prefix of the wrong type or size; an unknown key), or NULL.';

-- hybrid._embedder: an embedder record, checked and in its stored form (defaults filled in)
CREATE OR REPLACE FUNCTION hybrid._embedder(embedder jsonb, what text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rule text := hybrid._embedder_rule(embedder);
BEGIN
    IF v_rule IS NOT NULL THEN
        RAISE EXCEPTION '%: %', what, v_rule USING ERRCODE = '22023';
    END IF;
    IF (embedder->>'dim')::integer <> hybrid.embedding_dim() THEN
        RAISE EXCEPTION '%: embedder % makes % dimensions; this install stores %', what,
            hybrid._shown(embedder->>'name'), embedder->>'dim', hybrid.embedding_dim()
            USING ERRCODE = '22023',
                  HINT = 'The dimension is fixed at install (pyhybrid migrate --dim): use an embedder of that size.';
    END IF;
    RETURN jsonb_build_object('name', embedder->>'name', 'kind', coalesce(embedder->>'kind', 'python'),
                              'dim', (embedder->>'dim')::integer,
                              'normalize', coalesce((embedder->>'normalize')::boolean, true),
                              'query_prefix', coalesce(embedder->>'query_prefix', ''),
                              'passage_prefix', coalesce(embedder->>'passage_prefix', ''));
END
$$;
COMMENT ON FUNCTION hybrid._embedder(jsonb, text) IS
'An embedder record checked (hybrid._embedder_rule; 22023 naming what, also for a dimension other than the install''s) and with its defaults (kind python, normalize true, empty prefixes).';

-- hybrid._same_embedder: whether two records name the same embedder (all but kind agree)
CREATE OR REPLACE FUNCTION hybrid._same_embedder(a jsonb, b jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (a - 'kind') = (b - 'kind') $$;
COMMENT ON FUNCTION hybrid._same_embedder(jsonb, jsonb) IS
'Whether two stored embedder records (hybrid._embedder) are the same embedder: name, dim, normalize and both prefixes agree.';

-- hybrid._embedder_shown: an embedder record as words, for messages
CREATE OR REPLACE FUNCTION hybrid._embedder_shown(e jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('%s (%s dimensions', hybrid._shown(e->>'name'), e->>'dim')
        || CASE WHEN coalesce(e->>'query_prefix', '') <> '' THEN format(', query prefix %L', e->>'query_prefix') ELSE '' END
        || CASE WHEN coalesce(e->>'passage_prefix', '') <> '' THEN format(', passage prefix %L', e->>'passage_prefix') ELSE '' END
        || CASE WHEN (e->>'normalize')::boolean IS FALSE THEN ', not normalized' ELSE '' END || ')'
$$;
COMMENT ON FUNCTION hybrid._embedder_shown(jsonb) IS
'An embedder record as a phrase for messages: its name, dimensions, prefixes and normalization.';

-- hybrid._writable_corpus: the caller's corpus row, locked, for a write of its embedder record
CREATE OR REPLACE FUNCTION hybrid._writable_corpus(corpus_id text, create_it boolean, exclusive boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant text; v_key integer; v_meta jsonb;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._corpus_writer(corpus_id) s;  -- or why there is none
    IF create_it THEN
        INSERT INTO hybrid.corpus (tenant_id, corpus_id) VALUES (v_tenant, _writable_corpus.corpus_id)
        ON CONFLICT ON CONSTRAINT corpus_pkey DO NOTHING;
    END IF;
    IF exclusive THEN
        SELECT k.metadata INTO v_meta FROM hybrid.corpus k
        WHERE k.tenant_id = v_tenant AND k.corpus_id = _writable_corpus.corpus_id FOR UPDATE;
    ELSE  -- writers of one corpus go on side by side; a re-embedding's start waits for them
        SELECT k.metadata INTO v_meta FROM hybrid.corpus k
        WHERE k.tenant_id = v_tenant AND k.corpus_id = _writable_corpus.corpus_id FOR SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'corpus_id % does not exist in tenant %', hybrid._shown(corpus_id), hybrid._shown(v_tenant)
            USING ERRCODE = '22023';
    END IF;
    RETURN v_meta;
END
$$;
COMMENT ON FUNCTION hybrid._writable_corpus(text, boolean, boolean) IS
'The metadata of the caller''s corpus corpus_id, its row locked to the end of the transaction (FOR UPDATE, or FOR SHARE unless exclusive; created first when create_it): a writer only; 22023 for an empty or unknown corpus.';

-- hybrid.use_embedder: record the embedder that fills a corpus, or refuse another one
CREATE OR REPLACE FUNCTION hybrid.use_embedder(corpus_id text, embedder jsonb, replace boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_new jsonb := hybrid._embedder(embedder, 'embedder');
    v_key integer := (SELECT s.key FROM hybrid._writer_scope() s);
    v_peek jsonb; v_meta jsonb; v_old jsonb; v_next jsonb; v_empty boolean;
BEGIN
    PERFORM hybrid._check_flag('replace', replace);
    v_peek := (SELECT k.metadata FROM hybrid.corpus k
               WHERE k.tenant_id = hybrid._current_tenant() AND k.corpus_id = use_embedder.corpus_id);
    -- writers of a corpus with their embedder recorded go on side by side (a share lock, which a re-embedding's start
    -- waits for); one that may change the record takes the row alone (two that both upgraded would deadlock)
    v_meta := hybrid._writable_corpus(corpus_id, true, replace OR NOT coalesce(
        hybrid._same_embedder(v_peek->'reembedding'->'embedder', v_new)
        OR (v_peek->'reembedding' IS NULL AND hybrid._same_embedder(v_peek->'embedder', v_new)), false));
    v_old := v_meta->'embedder';
    v_next := v_meta->'reembedding'->'embedder';
    -- a corpus that holds no live chunk (new, emptied, or a first ingest that failed) takes any embedder
    v_empty := NOT EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.tenant_key = v_key
                           AND c.tenant_id = hybrid._current_tenant() AND c.corpus_id = use_embedder.corpus_id
                           AND NOT c.superseded);
    replace := replace OR v_empty;
    IF v_next IS NOT NULL AND NOT replace THEN  -- a corpus being re-embedded takes only the embedder it moves to
        IF hybrid._same_embedder(v_next, v_new) THEN
            RETURN v_next;
        END IF;
        RAISE EXCEPTION 'corpus % is being re-embedded with %; this write uses %', hybrid._shown(corpus_id),
            hybrid._embedder_shown(v_next), hybrid._embedder_shown(v_new)
            USING ERRCODE = '22023', HINT = 'Write with the embedder it moves to, or finish the re-embedding first.';
    END IF;
    IF v_old IS NOT NULL AND NOT replace AND NOT hybrid._same_embedder(v_old, v_new) THEN
        RAISE EXCEPTION 'corpus % was embedded with %; this write uses %', hybrid._shown(corpus_id),
            hybrid._embedder_shown(v_old), hybrid._embedder_shown(v_new)
            USING ERRCODE = '22023',
                  HINT = 'Vectors of two models do not compare: use the corpus''s embedder, re-embed the corpus '
                         '(pyhybrid reembed), or replace the record deliberately (replace => true).';
    END IF;
    IF v_old IS NULL OR NOT hybrid._same_embedder(v_old, v_new) OR (replace AND v_next IS NOT NULL) THEN
        UPDATE hybrid.corpus k SET metadata = k.metadata - 'reembedding' || jsonb_build_object('embedder', v_new)
        WHERE k.tenant_id = hybrid._current_tenant() AND k.corpus_id = use_embedder.corpus_id;
    END IF;
    RETURN v_new;
END
$$;
COMMENT ON FUNCTION hybrid.use_embedder(text, jsonb, boolean) IS
'Records embedder (a JSON object: name, dim, and optionally kind, normalize, query_prefix, passage_prefix) as the one that fills corpus_id of the current tenant, creating the corpus if needed, at its first use; refuses another embedder than the recorded one (22023 naming both) unless replace or the corpus holds no live chunk, and while the corpus is re-embedded takes only the embedder it moves to. Writers only. Returns the record kept.';

-- hybrid.begin_reembed: start (or resume) re-embedding a corpus with another embedder
CREATE OR REPLACE FUNCTION hybrid.begin_reembed(corpus_id text, embedder jsonb) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_new jsonb := hybrid._embedder(embedder, 'embedder');
    v_meta jsonb := hybrid._writable_corpus(corpus_id, false);
BEGIN
    IF hybrid._same_embedder(v_meta->'reembedding'->'embedder', v_new) THEN
        RETURN v_meta->'reembedding'->>'after';  -- resumed where it stopped
    END IF;
    UPDATE hybrid.corpus k
    SET metadata = k.metadata || jsonb_build_object('reembedding', jsonb_build_object('embedder', v_new, 'after', NULL))
    WHERE k.tenant_id = hybrid._current_tenant() AND k.corpus_id = begin_reembed.corpus_id;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hybrid.begin_reembed(text, jsonb) IS
'Starts re-embedding corpus_id of the current tenant with embedder (an embedder record, as hybrid.use_embedder takes): until hybrid.finish_reembed, writes must use it and queries may use either. Called again with the same embedder it resumes: returns the last chunk id done (NULL from the start). Writers only.';

-- hybrid.reembed_batch: the next chunks of a corpus being re-embedded
CREATE OR REPLACE FUNCTION hybrid.reembed_batch(corpus_id text, max_chunks integer DEFAULT 256)
RETURNS TABLE (chunk_id text, content text, content_hash text)
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer: reads the chunks of the caller's tenant
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer; v_state jsonb;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._writer_scope() s;
    PERFORM hybrid._check_writer();
    PERFORM hybrid._check_range('max_chunks', max_chunks, 1, 10000);
    SELECT k.metadata->'reembedding' INTO v_state FROM hybrid.corpus k
    WHERE k.tenant_id = v_tenant AND k.corpus_id = reembed_batch.corpus_id;
    IF v_state IS NULL THEN
        RAISE EXCEPTION 'corpus % is not being re-embedded', hybrid._shown(corpus_id)
            USING ERRCODE = '22023', HINT = 'Start with hybrid.begin_reembed(corpus_id, embedder).';
    END IF;
    RETURN QUERY
    SELECT c.chunk_id, c.content, c.content_hash FROM hybrid.chunk c
    WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.corpus_id = reembed_batch.corpus_id
      AND NOT c.superseded AND c.chunk_id > coalesce(v_state->>'after', '')
    ORDER BY c.chunk_id
    LIMIT max_chunks;
END
$$;
COMMENT ON FUNCTION hybrid.reembed_batch(text, integer) IS
'The next max_chunks (1 to 10000) live chunks of corpus_id, being re-embedded (hybrid.begin_reembed), after the last one done, in chunk id order: their id, content and content hash, for hybrid.reembed_chunks. Writers only.';

-- hybrid.reembed_chunks: write the new embeddings of a batch and move the re-embedding past it
CREATE OR REPLACE FUNCTION hybrid.reembed_chunks(corpus_id text, chunk_ids text[], content_hashes text[],
                                                 embeddings text[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer: callers cannot write chunks directly
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tenant text; v_key integer; v_dim integer := hybrid.embedding_dim();
    v_meta jsonb := hybrid._writable_corpus(corpus_id, false);
    v_bad integer; v_written bigint;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._writer_scope() s;
    IF v_meta->'reembedding' IS NULL THEN
        RAISE EXCEPTION 'corpus % is not being re-embedded', hybrid._shown(corpus_id)
            USING ERRCODE = '22023', HINT = 'Start with hybrid.begin_reembed(corpus_id, embedder).';
    END IF;
    IF chunk_ids IS NULL OR content_hashes IS NULL OR embeddings IS NULL
       OR cardinality(chunk_ids) <> cardinality(content_hashes) OR cardinality(chunk_ids) <> cardinality(embeddings) THEN
        RAISE EXCEPTION 'chunk_ids, content_hashes and embeddings must be arrays of one length' USING ERRCODE = '22023';
    END IF;
    SELECT min(e.n) INTO v_bad FROM unnest(embeddings) WITH ORDINALITY e(v, n)
    WHERE e.v IS NULL OR vector_dims(e.v::vector) <> v_dim;  -- pgvector refuses NaN and infinity itself
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'embeddings[%] (chunk_id %) is not a vector of % dimensions', v_bad,
            hybrid._shown(chunk_ids[v_bad]), v_dim USING ERRCODE = '22023';
    END IF;
    -- a chunk re-ingested since its batch was read (another content hash) was embedded by its writer: kept
    UPDATE hybrid.chunk c SET embedding = e.v::vector, updated_at = now()
    FROM unnest(chunk_ids, content_hashes, embeddings) e(id, h, v)
    WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.corpus_id = reembed_chunks.corpus_id
      AND c.chunk_id = e.id AND c.content_hash = e.h;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    UPDATE hybrid.corpus k
    SET metadata = jsonb_set(k.metadata, '{reembedding,after}',
                             to_jsonb(greatest(k.metadata->'reembedding'->>'after', (SELECT max(i) FROM unnest(chunk_ids) i))))
    WHERE k.tenant_id = v_tenant AND k.corpus_id = reembed_chunks.corpus_id;
    RETURN v_written;
END
$$;
COMMENT ON FUNCTION hybrid.reembed_chunks(text, text[], text[], text[]) IS
'Writes embeddings (pgvector text form, the install''s dimension) to the chunks chunk_ids of corpus_id whose content hash is still content_hashes (a chunk re-ingested meanwhile keeps its writer''s), and records the batch as done. In the caller''s transaction: readers see the batch whole or not at all. Writers only. Returns the chunks written.';

-- hybrid.finish_reembed: the corpus's embedder becomes the one it was re-embedded with
CREATE OR REPLACE FUNCTION hybrid.finish_reembed(corpus_id text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_meta jsonb := hybrid._writable_corpus(corpus_id, false);
BEGIN
    IF v_meta->'reembedding' IS NULL THEN
        RAISE EXCEPTION 'corpus % is not being re-embedded', hybrid._shown(corpus_id) USING ERRCODE = '22023';
    END IF;
    UPDATE hybrid.corpus k
    SET metadata = k.metadata - 'reembedding' || jsonb_build_object('embedder', v_meta->'reembedding'->'embedder')
    WHERE k.tenant_id = hybrid._current_tenant() AND k.corpus_id = finish_reembed.corpus_id;
    RETURN v_meta->'reembedding'->'embedder';
END
$$;
COMMENT ON FUNCTION hybrid.finish_reembed(text) IS
'Ends the re-embedding of corpus_id (hybrid.begin_reembed): its embedder record becomes the one it was re-embedded with, which alone it then takes. Writers only. Returns that record.';

-- hybrid.corpus_embedders: the embedder records of the caller's corpora, for a check before a query
CREATE OR REPLACE FUNCTION hybrid.corpus_embedders(corpus_ids text[] DEFAULT NULL)
RETURNS TABLE (corpus_id text, embedder jsonb, reembedding jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT k.corpus_id, k.metadata->'embedder', k.metadata->'reembedding'
    FROM hybrid.corpus k
    WHERE k.tenant_id = v_tenant AND (k.metadata ? 'embedder' OR k.metadata ? 'reembedding')
      AND (corpus_embedders.corpus_ids IS NULL OR k.corpus_id = ANY (corpus_embedders.corpus_ids))
      -- a corpus without a live chunk has no vectors to agree with (and takes any embedder: hybrid.use_embedder);
      -- as in hybrid.corpora, a reader meets only corpora it sees a chunk of
      AND EXISTS (
          SELECT 1 FROM hybrid.chunk c
          WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.corpus_id = k.corpus_id AND NOT c.superseded
            AND (v_all OR hybrid._may_write() OR hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)))
    ORDER BY k.corpus_id;
END
$$;
COMMENT ON FUNCTION hybrid.corpus_embedders(text[]) IS
'The embedder records (hybrid.use_embedder) of the current tenant''s corpora among corpus_ids (NULL: all) that hold a live chunk, and the embedder each moves to while it is re-embedded, without counting chunks: what a client checks its query embedder against. A reader that does not see every ACL label meets only corpora holding a chunk it can see, as in hybrid.corpora.';
