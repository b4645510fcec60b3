-- pyhybrid 0.4: branches as data. Runs exactly once per database (Alembic revision 0017).
--  * hybrid.branch, the registry of retrieval branches: each branch's name, its place in hybrid_retrieve's
--    lists, how its own measure becomes a score, and the parameters and result columns that name it. Rows are
--    written by the idempotent file that defines the branch's search function; hybrid.retrieve, fusion,
--    explain, grants and the Python client read them.
--  * hybrid_retrieve's rows gain ranks and scores (jsonb, by branch name): a new branch needs no new column.
--  * hybrid_retrieve gains diversity (MMR over the fused list). The functions whose argument list or result
--    changes are dropped here; sql/idempotent/ re-creates them (with grants and comments) in the same transaction.

CREATE TABLE hybrid.branch (
    name         text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,30}$'),
    position     integer NOT NULL UNIQUE,
    stage        text NOT NULL CHECK (stage IN ('list', 'graph')),
    scale        text NOT NULL CHECK (scale IN ('distance', 'score', 'hops')),
    blend_k      double precision CHECK (blend_k > 0),
    query_param  text NOT NULL,
    weight_param text NOT NULL,
    floor_param  text NOT NULL,
    search       regprocedure,
    rank_column  text,
    value_column text,
    meaning      text NOT NULL
);
COMMENT ON TABLE hybrid.branch IS
'The retrieval branches, one row each (written by the sql/idempotent/ file that defines the branch): name; position (the order of the lists hybrid.retrieve fuses, and of ranks in its report); stage (list: searched from the query, fused; graph: expanded from the fused list''s seeds); scale (what its own measure is: a distance, lower is better, a score, higher is better, or hops), blend_k (blend''s saturation constant for a score: s / (s + blend_k)); the hybrid_retrieve parameters of its query, weight and floor; search (its search function); rank_column and value_column (the retrieve_row columns of the branches of 0.3, NULL for later ones, which appear in ranks and scores only).';

ALTER TYPE hybrid.retrieve_row ADD ATTRIBUTE ranks jsonb;
ALTER TYPE hybrid.retrieve_row ADD ATTRIBUTE scores jsonb;
COMMENT ON TYPE hybrid.retrieve_row IS
'A row of hybrid_retrieve: the chunk, its fused score, its rank and own measure in each branch (NULL where the branch did not find it; ranks and scores: every branch that found it, by name), its siblings and its graph neighbourhood when asked for.';

-- the old, fixed-branch internals
DROP FUNCTION IF EXISTS hybrid._hydrate(integer, text, text[], boolean, text[], double precision[], integer[], integer[],
    integer[], double precision[], double precision[], integer[], integer, integer, boolean, integer, boolean);
DROP FUNCTION IF EXISTS hybrid._fuse_branches(text, double precision, double precision, double precision, text[],
    double precision[], text[], double precision[]);
DROP FUNCTION IF EXISTS hybrid.hydrate(text[], double precision[], text[], double precision[], text[], double precision[],
    text[], integer[], integer, integer, boolean, integer, boolean);

-- diversity added
DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision, integer, boolean);
DROP FUNCTION IF EXISTS hybrid.explain_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision, integer, boolean);
DROP FUNCTION IF EXISTS hybrid.retrieve_many(vector[], text[], text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision, integer, boolean);
DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision, integer, boolean);
