-- The rules bad input is refused by, written once: every parameter check names the parameter and the rule
-- (SQLSTATE 22023), and echoes at most a short prefix of what the caller sent.

-- hybrid._shown: a caller's value as an error message shows it, never longer than a line
CREATE OR REPLACE FUNCTION hybrid._shown(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    -- a 1 MB argument must not come back as a 1 MB error (issue 48: edge_type_label echoed it whole)
    SELECT CASE WHEN value IS NULL THEN 'NULL'
                WHEN length(value) <= 64 THEN quote_literal(value)
                ELSE quote_literal(left(value, 40)) || format('... (%s characters)', length(value)) END
$$;
COMMENT ON FUNCTION hybrid._shown(text) IS
'A value as error messages echo it: quoted, at most 64 characters whole, else its first 40 and its length; NULL as NULL.';

-- hybrid._check_range: validate an integer parameter's range
CREATE OR REPLACE FUNCTION hybrid._check_range(name text, value integer, low integer, high integer,
                                               low_name text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value < low OR value > high THEN
        RAISE EXCEPTION '% must be between % and %, got %', name, coalesce(low_name, low::text), high,
            coalesce(value::text, 'NULL') USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_range(text, integer, integer, integer, text) IS
'Raises 22023 "<name> must be between <low> and <high>, got <value>" unless low <= value <= high (NULL fails).';

-- hybrid._check_number: validate a weight or rrf_k
CREATE OR REPLACE FUNCTION hybrid._check_number(name text, value double precision, positive boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- PostgreSQL's NaN equals itself and sorts above every number: test for it by name. The upper
    -- bound keeps every fusion sum finite (three weights of 1e6 over ranks >= 1 stay far from
    -- float8's overflow); pyhybrid/query.py states the same ranges.
    IF value IS NULL OR value IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)
       OR value < 0 OR (positive AND value = 0) OR value > 1000000 THEN
        RAISE EXCEPTION '% must be a finite number %, got %', name,
            CASE WHEN positive THEN '> 0 and <= 1000000' ELSE 'between 0 and 1000000' END,
            coalesce(value::text, 'NULL')
            USING ERRCODE = '22023', HINT = CASE WHEN positive THEN 'The usual value of rrf_k is 60.'
                                                 ELSE 'A weight of 0 disables that source.' END;
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_number(text, double precision, boolean) IS
'Raises 22023 "<name> must be a finite number > 0 and <= 1000000" (positive: rrf_k) or "between 0 and 1000000" (a weight) unless value is such a number (NULL, NaN and infinities fail).';

-- hybrid._check_flag: validate a boolean parameter
CREATE OR REPLACE FUNCTION hybrid._check_flag(name text, value boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must be true or false, got NULL', name USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_flag(text, boolean) IS 'Raises 22023 "<name> must be true or false" for NULL.';

-- hybrid._check_text: validate a text parameter's length
CREATE OR REPLACE FUNCTION hybrid._check_text(name text, value text, most integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF length(value) > most THEN
        RAISE EXCEPTION '% must be at most % characters, got %', name, most, length(value) USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_text(text, text, integer) IS
'Raises 22023 "<name> must be at most <most> characters, got <length>" for a longer value (NULL passes).';

-- hybrid._check_scores: validate the numbers a caller brings as scores
CREATE OR REPLACE FUNCTION hybrid._check_scores(name text, scores double precision[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i integer;
BEGIN
    -- finite and at most 1e12 in size: weights (at most 1e6) times such scores, summed over the lists of a
    -- call, stay far from float8's overflow, and no score anyone computes (cosine, BM25, a reranker's logit)
    -- comes near it
    FOR i IN 1..coalesce(cardinality(scores), 0) LOOP
        IF scores[i] IS NULL OR scores[i] IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)
           OR abs(scores[i]) > 1e12 THEN
            RAISE EXCEPTION '%[%] must be a finite number between -1e12 and 1e12, got %', name, i,
                coalesce(scores[i]::text, 'NULL') USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid._check_scores(text, double precision[]) IS
'Raises 22023 "<name>[i] must be a finite number between -1e12 and 1e12" for the first entry of scores that is NULL, NaN, infinite or larger: what fusion and hydration accept as a caller''s scores.';
