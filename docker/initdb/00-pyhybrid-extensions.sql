-- Run once by the official postgres entrypoint, on the first start with an empty
-- data directory, as $POSTGRES_USER in $POSTGRES_DB (by default: postgres/postgres).
-- Re-running it is harmless (IF NOT EXISTS).

-- age goes first. The server loads age.so into every session
-- (session_preload_libraries=age), so AGE's hooks are active even in a database
-- where the age extension does not exist yet; creating it before any other DDL
-- gives those hooks the ag_catalog schema they look up.
CREATE EXTENSION IF NOT EXISTS age;

-- pg_textsearch only works when the server was started with it in
-- shared_preload_libraries; fail the first start loudly if it was not.
DO $check$
BEGIN
    IF NOT ('pg_textsearch' = ANY (string_to_array(
            replace(current_setting('shared_preload_libraries'), ' ', ''), ','))) THEN
        RAISE EXCEPTION 'pg_textsearch is not in shared_preload_libraries (it is "%")',
            current_setting('shared_preload_libraries')
            USING HINT = 'Start the server with -c shared_preload_libraries=pg_textsearch '
                         '(the image CMD and docker/compose.yaml do).';
    END IF;
END
$check$;

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_textsearch;
