-- The registries the engine reads its methods from, written once: the fusion methods here (pyhybrid reads this
-- file's rows: pyhybrid.fusion.FUSIONS), the branches in hybrid.branch (each row written by the file that defines
-- the branch's search function: sql/idempotent/050_search.sql).

-- hybrid.fusion_methods: every fusion method, in the order the docs list them (the default first)
CREATE OR REPLACE FUNCTION hybrid.fusion_methods() RETURNS TABLE (name text, needs_scores boolean, rule text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    VALUES
        -- fusion methods: one a line, (name, needs_scores, rule); pyhybrid/fusion.py parses these lines
        ('convex', true, 'weight * (s - lo) / (hi - lo), lo and hi the lowest and highest score of the list (1 when they are equal)'),
        ('rrf', false, 'weight / (rrf_k + rank)'),
        ('dbsf', true, 'weight * (s - (mean - 3 sd)) / (6 sd) clipped to 0..1, mean and sd (population) over the list (1 when sd = 0)'),
        ('blend', true, 'weight * s, the branch score on an absolute 0..1 scale (no per-list normalization)')
        -- end of fusion methods
$$;
COMMENT ON FUNCTION hybrid.fusion_methods() IS
'Every fusion method of hybrid_retrieve and hybrid.fuse: name, whether it reads scores (rrf reads ranks only) and its rule for one list''s term of an item''s fused score (hybrid._fusion_term); an item''s score is the sum of its lists'' terms. The one list of methods: every check and the Python client read it.';

-- hybrid.branches: the retrieval branches
CREATE OR REPLACE FUNCTION hybrid.branches() RETURNS SETOF hybrid.branch
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM hybrid.branch ORDER BY position $$;
COMMENT ON FUNCTION hybrid.branches() IS
'The retrieval branches (hybrid.branch) in the order hybrid.retrieve runs and fuses them.';

-- hybrid._no_such: raise for a name no registry holds
CREATE OR REPLACE FUNCTION hybrid._no_such(what text, value text) RETURNS double precision
LANGUAGE plpgsql STABLE  -- not IMMUTABLE: an unreachable CASE arm with constant arguments must not run at planning
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% must be one of %, got %', what,
        CASE what WHEN 'fusion' THEN (SELECT string_agg(quote_literal(f.name), ', ' ORDER BY f.o)
                                      FROM hybrid.fusion_methods() WITH ORDINALITY f(name, needs_scores, rule, o))
                  ELSE (SELECT string_agg(quote_literal(b.name), ', ' ORDER BY b.position) FROM hybrid.branch b) END,
        hybrid._shown(value) USING ERRCODE = '22023';
END
$$;
COMMENT ON FUNCTION hybrid._no_such(text, text) IS
'Raises 22023 "<what> must be one of <the registry''s names>, got <value>" (what: fusion or branch); the ELSE of every CASE over a registry, so nothing falls through to another method''s arithmetic.';

-- hybrid._check_fusion: validate the fusion method's name
CREATE OR REPLACE FUNCTION hybrid._check_fusion(fusion text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF fusion IS NULL OR NOT EXISTS (SELECT 1 FROM hybrid.fusion_methods() f WHERE f.name = fusion) THEN
        PERFORM hybrid._no_such('fusion', fusion);
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_fusion(text) IS
'Raises 22023 "fusion must be one of ..." (hybrid.fusion_methods) for any other value, NULL too.';
