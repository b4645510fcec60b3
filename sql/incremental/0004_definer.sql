-- pyhybrid 0.2: graph writes behind a definer. Runs exactly once per database (Alembic revision 0004).
-- hybrid_definer owns the SECURITY DEFINER functions that write the graph (hybrid.finish_edges). It is
-- not a login role, not a superuser and not the tables' owner, so RLS applies to it as to any caller
-- (the policies read the caller's tenant through hybrid._caller()), and code running as it cannot
-- ALTER a table. Tenant login roles lose every write privilege on the graph tables and sequences.
DO $definer$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hybrid_definer') THEN
        CREATE ROLE hybrid_definer NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOBYPASSRLS;
    END IF;
END
$definer$;
