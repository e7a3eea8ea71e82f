"""The results table: one row per evaluation, headline figures as columns, the whole record as JSON.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("label", sa.Text),
        sa.Column("submitter", sa.Text),
        sa.Column("hash", sa.String(64)),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("task_hash", sa.String(64)),
        sa.Column("protocol", sa.Integer),
        sa.Column("language", sa.String(20), nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("mode", sa.String(10), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("timed", sa.Boolean, nullable=False),
        sa.Column("median_ms", sa.Float),
        sa.Column("speedup", sa.Float),
        sa.Column("speedup_vs_compile", sa.Float),
        sa.Column("roofline_fraction", sa.Float),
        sa.Column("kerneldojo_version", sa.String(40)),
        sa.Column("torch_version", sa.String(80)),
        sa.Column("triton_version", sa.String(80)),
        sa.Column("nvcc_version", sa.String(80)),
        sa.Column("cuda_driver", sa.String(80)),
        sa.Column("slot", sa.String(80)),
        sa.Column("source", sa.Text),
        sa.Column("record", sa.JSON, nullable=False),
    )
    op.create_index("ix_results_recorded_at", "results", ["recorded_at"])
    op.create_index("ix_results_label_hash", "results", ["label", "hash"])
    op.create_index("ix_results_board", "results", ["task", "task_hash", "protocol", "device", "status"])


def downgrade() -> None:
    op.drop_table("results")
