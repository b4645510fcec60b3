"""Each corpus records the embedder that filled it (hybrid.use_embedder) and can be re-embedded in place
(hybrid.begin_reembed, reembed_batch, reembed_chunks, finish_reembed), read back without counting chunks
(hybrid.corpus_embedders): hybrid.corpora() gains the columns embedder and
reembedding, so the old one (another result type) is dropped before sql/idempotent re-creates it.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_NEW = ("hybrid.use_embedder(text, jsonb, boolean)", "hybrid.begin_reembed(text, jsonb)",
        "hybrid.reembed_batch(text, integer)", "hybrid.reembed_chunks(text, text[], text[], text[])",
        "hybrid.finish_reembed(text)", "hybrid.corpus_embedders(text[])", "hybrid._writable_corpus(text, boolean, boolean)", "hybrid._embedder_shown(jsonb)",
        "hybrid._same_embedder(jsonb, jsonb)", "hybrid._corpus_writer(text)", "hybrid._embedder(jsonb, text)", "hybrid._embedder_rule(jsonb)")


def upgrade() -> None:
    op.get_bind().connection.dbapi_connection.cursor().execute("DROP FUNCTION IF EXISTS hybrid.corpora()")


def downgrade() -> None:
    # the older release's sql/idempotent/ re-creates hybrid.corpora() with its own columns; the records stay in
    # hybrid.corpus.metadata, where it does not look
    op.get_bind().connection.dbapi_connection.cursor().execute(
        "DROP FUNCTION IF EXISTS hybrid.corpora(); " + " ".join(f"DROP FUNCTION IF EXISTS {f};" for f in _NEW))
