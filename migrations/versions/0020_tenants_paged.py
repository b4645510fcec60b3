"""hybrid.tenants() becomes hybrid.tenants(after, max_tenants): a page of tenants, so that listing them at any
tenant count need not lock every partition in one transaction (each page a transaction of its own); and
sql/idempotent re-secures only the partitions that need it (hybrid._chunks_secured), so that a re-apply at any
tenant count locks none that are secured already.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # sql/idempotent/042_documents.sql creates the paged one after this (two would make a call without arguments
    # ambiguous)
    op.get_bind().connection.dbapi_connection.cursor().execute("DROP FUNCTION IF EXISTS hybrid.tenants()")


def downgrade() -> None:
    # the older release's sql/idempotent/ re-creates hybrid.tenants()
    op.get_bind().connection.dbapi_connection.cursor().execute(
        "DROP FUNCTION IF EXISTS hybrid.tenants(text, integer); DROP FUNCTION IF EXISTS hybrid._chunks_secured(regclass); "
        "DROP FUNCTION IF EXISTS hybrid._bm25_fixed(text, integer[])")
