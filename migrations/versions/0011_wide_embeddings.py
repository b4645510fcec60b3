"""Embeddings of more than 2,000 dimensions: a fresh install's column gets its width here.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import context, op

from pyhybrid._paths import sql_dir

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    # only an upgrade that began at base (migrations/env.py) may set the width: the dimension of an
    # installed database stays what it was installed with
    wide = context.config.attributes.get("wide_embedding_dim") if context.config.attributes.get("fresh_install") else None
    cur.execute("SELECT set_config('hybrid.install_dim', %s, true)", (str(int(wide)) if wide else "",))
    cur.execute(sql_dir().joinpath("incremental", "0011_wide_embeddings.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("SELECT value::integer FROM hybrid.setting WHERE key = 'embedding_dim'")
    row = cur.fetchone()
    if row is not None and row[0] > 2000:
        raise RuntimeError(f"this database stores {row[0]}-dimension embeddings; releases before revision 0011 "
                           "index at most 2,000 (downgrade to base instead, which removes every tenant's data)")
