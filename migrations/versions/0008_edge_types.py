"""Edge types per tenant (hybrid.edge_type, under RLS) mapped to opaque AGE labels rel_<slot>.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0008_edge_types.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # edges back into labels named after their types, as 0.2 kept them (0.2's loader creates the
    # labels it needs; _ensure_edge_label comes back with 0.2's idempotent files)
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(_DOWN)
    cur.execute("DROP TABLE hybrid.edge_type")


_DOWN = """
DO $back$
DECLARE
    t record;
BEGIN
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('search_path', 'ag_catalog, pg_catalog, public', true);
    FOR t IN SELECT et.name, array_agg(DISTINCT 'rel_' || et.slot) AS labels FROM hybrid.edge_type et GROUP BY et.name ORDER BY 1
    LOOP
        IF NOT EXISTS (SELECT 1 FROM ag_catalog.ag_label al JOIN ag_catalog.ag_graph g ON g.graphid = al.graph
                       WHERE g.name = 'hybrid_graph' AND al.name = t.name) THEN
            PERFORM ag_catalog.create_elabel('hybrid_graph'::cstring, t.name::cstring);
        END IF;
        EXECUTE format(
            'INSERT INTO hybrid_graph.%I (start_id, end_id, properties) '
            'SELECT e.start_id, e.end_id, e.properties FROM hybrid_graph._ag_label_edge e '
            'JOIN pg_class c ON c.oid = e.tableoid '
            'JOIN hybrid.graph_node n ON n.vertex_id OPERATOR(ag_catalog.=) e.start_id '
            'JOIN hybrid.edge_type et ON et.tenant_id = n.tenant_id AND c.relname = ''rel_'' || et.slot '
            'WHERE et.name = $1 ORDER BY e.id', t.name) USING t.name;
    END LOOP;
    FOR t IN SELECT al.name FROM ag_catalog.ag_label al JOIN ag_catalog.ag_graph g ON g.graphid = al.graph
             WHERE g.name = 'hybrid_graph' AND al.kind = 'e' AND al.name::text ~ '^rel_[0-9]+$'
    LOOP
        PERFORM ag_catalog.drop_label('hybrid_graph'::name, t.name);
    END LOOP;
END
$back$;
"""
