-- The roles pyhybrid's grants name. Roles belong to the cluster, not the database: they are made
-- here, where every upgrade re-checks them, so a database restored into a fresh server gets them back
-- from `pyhybrid migrate --reapply` (see docs/operations.md, "Backup and restore").
--  * hybrid_user: every role that may call the API (tenant login roles, app roles);
--  * hybrid_app: trusted app roles, which may act for any tenant;
--  * hybrid_definer: owns the SECURITY DEFINER functions that write the graph (hybrid.finish_edges).
--    Not a login role, not a superuser and not the tables' owner, so RLS applies to it as to any
--    caller (policies read the caller's tenant through hybrid._caller()), and code running as it
--    cannot ALTER a table.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hybrid_user') THEN
        CREATE ROLE hybrid_user NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hybrid_app') THEN
        CREATE ROLE hybrid_app NOLOGIN;
    END IF;
    IF NOT pg_has_role('hybrid_app', 'hybrid_user', 'MEMBER') THEN
        GRANT hybrid_user TO hybrid_app;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hybrid_definer') THEN
        CREATE ROLE hybrid_definer NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOBYPASSRLS;
    END IF;
END
$roles$;
