"""Initial schema: environments, sweeps, measurements, their indexes and the five views.

Revision ID: 0001
Revises:
Create Date: 2025-11-29

Explicit DDL (not the models): a revision is a frozen snapshot, the models move on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.views import VIEWS_0001

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STATUSES = "'ok', 'wrong', 'compile_error', 'launch_error', 'crashed', 'timeout'"
BACKENDS = "'cuda', 'interpreter'"
SWEEP_STATUSES = "'running', 'finished', 'interrupted', 'failed'"
POINT = ("environment_id", "code_version", "variant", "dtype", "m", "n", "k", "config_key")


def _int(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def _float(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.Float(53), nullable=nullable)


def _str(name: str) -> sa.Column:
    return sa.Column(name, sa.String(), nullable=False)


def _text(name: str) -> sa.Column:
    return sa.Column(name, sa.Text(), server_default="", nullable=False)


def _time(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), primary_key=True),
        _str("fingerprint"),
        _str("gpu_name"),
        _int("sm_count"),
        sa.Column("l2_bytes", sa.BigInteger(), nullable=False),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=False),
        *map(_str, ("compute_capability", "driver_version", "cuda_version", "torch_version")),
        *map(_str, ("triton_version", "ray_version", "python_version", "host", "project_version", "backend")),
        _float("peak_tflops"),
        _float("peak_gbps"),
        _time("created_at"),
        sa.CheckConstraint(f"backend IN ({BACKENDS})", name=op.f("ck_environments_backend")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_environments_fingerprint")),
    )
    op.create_index(op.f("ix_environments_gpu_name"), "environments", ["gpu_name"])

    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), primary_key=True),
        _str("name"),
        sa.Column("spec", sa.Text(), nullable=False),
        _text("command"),
        _str("host"),
        _time("started_at"),
        _time("finished_at", nullable=True),
        _str("status"),
        _int("n_points"),
        sa.Column("n_ok", sa.Integer(), server_default="0", nullable=False),
        sa.Column("n_failed", sa.Integer(), server_default="0", nullable=False),
        sa.CheckConstraint(f"status IN ({SWEEP_STATUSES})", name=op.f("ck_sweeps_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
    )

    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), primary_key=True),
        _int("environment_id"),
        _int("sweep_id", nullable=True),
        *map(_str, ("code_version", "variant", "dtype")),
        *map(_int, ("m", "n", "k")),
        _str("config_key"),
        *map(_int, ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")),
        *map(_str, ("input_precision", "status")),
        _text("error"),
        *(_float(c, nullable=True) for c in ("ms", "ms_p20", "ms_p80")),
        _int("reps", nullable=True),
        *(_float(c, nullable=True) for c in ("tflops", "rel_err", "nondeterminism")),
        *(_int(c, nullable=True) for c in ("tiles", "programs")),
        *(_float(c, nullable=True) for c in ("tiles_per_sm", "waves")),
        _int("occupancy", nullable=True),
        sa.Column("operand_bytes", sa.BigInteger(), nullable=True),
        *(_int(c, nullable=True) for c in ("registers", "shared_mem")),
        _float("compile_s", nullable=True),
        *(_int(c, nullable=True) for c in ("sm_clock_mhz", "temperature_c")),
        sa.Column("throttled", sa.Boolean(), nullable=True),
        *map(_text, ("throttle_reasons", "worker", "gpu_uuid")),
        _str("backend"),
        _time("created_at"),
        _time("updated_at"),
        sa.CheckConstraint(f"status IN ({STATUSES})", name=op.f("ck_measurements_status")),
        sa.CheckConstraint(f"backend IN ({BACKENDS})", name=op.f("ck_measurements_backend")),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environments.id"], name=op.f("fk_measurements_environment_id_environments")
        ),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"], name=op.f("fk_measurements_sweep_id_sweeps")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measurements")),
        sa.UniqueConstraint(*POINT, name=op.f("uq_measurements_point")),
    )
    view_index = ("environment_id", "status", "dtype", "variant", "m", "n", "k", "block_m", "block_n")
    view_index += ("block_k", "split_k", "num_warps", "num_stages", "group_m", "ms")
    op.create_index(op.f("ix_measurements_view"), "measurements", list(view_index))
    op.create_index(op.f("ix_measurements_sweep_id"), "measurements", ["sweep_id"])

    for name, select in VIEWS_0001.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def downgrade() -> None:
    for name in reversed(VIEWS_0001):
        op.execute(f"DROP VIEW {name}")
    op.drop_table("measurements")
    op.drop_table("sweeps")
    op.drop_table("environments")
