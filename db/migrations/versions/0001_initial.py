"""Initial schema: environments, sweeps, measurements, their indexes and the five views.

Revision ID: 0001
Revises:
Create Date: 2025-11-29

Explicit DDL (not the models) and the views' SQL as text: a revision is a frozen snapshot, the
models and db.views move on (downgrading from 0002 recreates exactly these views).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STATUSES = "'ok', 'wrong', 'compile_error', 'launch_error', 'crashed', 'timeout'"
BACKENDS = "'cuda', 'interpreter'"
SWEEP_STATUSES = "'running', 'finished', 'interrupted', 'failed'"
POINT = ("environment_id", "code_version", "variant", "dtype", "m", "n", "k", "config_key")

# The views as revision 0001 created them, frozen here: db.views moves on, this revision must not.
VIEWS = {
    "results": (
        "SELECT m.id, m.environment_id, m.sweep_id, e.gpu_name, e.sm_count, e.l2_bytes, e.host, "
        "e.peak_tflops, e.peak_gbps, m.code_version, m.variant, m.dtype, m.m, m.n, m.k, m.config_key, "
        "m.block_m, m.block_n, m.block_k, m.group_m, m.split_k, m.num_warps, m.num_stages, "
        "m.input_precision, m.status, m.error, m.ms, m.ms_p20, m.ms_p80, m.reps, m.tflops, m.rel_err, "
        "m.nondeterminism, m.tiles, m.programs, m.tiles_per_sm, m.waves, m.occupancy, m.operand_bytes, "
        "m.registers, m.shared_mem, m.compile_s, m.sm_clock_mhz, m.temperature_c, m.throttled, "
        "m.throttle_reasons, m.worker, m.gpu_uuid, m.backend, m.created_at, m.updated_at FROM "
        "measurements m JOIN environments e ON e.id = m.environment_id"
    ),
    "best_configs": (
        "SELECT b.id, r.environment_id, r.sweep_id, b.gpu_name, r.sm_count, r.l2_bytes, r.host, "
        "r.peak_tflops, r.peak_gbps, r.code_version, b.variant, b.dtype, b.m, b.n, b.k, r.config_key, "
        "r.block_m, r.block_n, r.block_k, r.group_m, r.split_k, r.num_warps, r.num_stages, "
        "r.input_precision, r.status, r.error, r.ms, r.ms_p20, r.ms_p80, r.reps, r.tflops, r.rel_err, "
        "r.nondeterminism, r.tiles, r.programs, r.tiles_per_sm, r.waves, r.occupancy, r.operand_bytes, "
        "r.registers, r.shared_mem, r.compile_s, r.sm_clock_mhz, r.temperature_c, r.throttled, "
        "r.throttle_reasons, r.worker, r.gpu_uuid, r.backend, r.created_at, r.updated_at FROM (SELECT "
        "id, gpu_name, dtype, m, n, k, variant, ROW_NUMBER() OVER (PARTITION BY gpu_name, dtype, m, n, "
        "k, variant ORDER BY ms, id) AS rn FROM results WHERE status = 'ok' AND ms IS NOT NULL) b JOIN "
        "results r ON r.id = b.id WHERE b.rn = 1"
    ),
    "splitk_speedup": (
        "SELECT p.gpu_name, p.dtype, p.m, p.n, p.k, p.block_m, p.block_n, u.tiles, u.sm_count, "
        "u.tiles_per_sm, u.ms AS unsplit_ms, u.variant AS unsplit_variant, p.ms AS split_ms, p.split_k "
        "AS best_split_k, p.variant AS best_split_variant, u.ms / NULLIF(p.ms, 0) AS speedup FROM "
        "(SELECT gpu_name, dtype, m, n, k, block_m, block_n, split_k, variant, ms, LAG(-CASE WHEN "
        "split_k = 1 THEN -1 ELSE 1 END * id) OVER w AS base_id FROM results WHERE status = 'ok' AND ms "
        "IS NOT NULL AND variant <> 'cublas' WINDOW w AS (PARTITION BY gpu_name, dtype, m, n, k, "
        "block_m, block_n ORDER BY CASE WHEN split_k = 1 THEN -1 ELSE 1 END, CASE WHEN split_k = 1 THEN "
        "-1 ELSE 1 END * ms, CASE WHEN split_k = 1 THEN -1 ELSE 1 END * id)) p JOIN results u ON u.id = "
        "p.base_id WHERE p.split_k > 1 AND p.base_id > 0"
    ),
    "grouping_effect": (
        "SELECT gpu_name, dtype, m, n, k, variant, block_m, block_n, block_k, split_k, num_warps, "
        "num_stages, group_m, operand_bytes, l2_bytes, CAST(operand_bytes AS DOUBLE PRECISION) / "
        "NULLIF(l2_bytes, 0) AS operand_to_l2, ms, ms_group1, ms_group1 / NULLIF(ms, 0) AS speedup FROM "
        "(SELECT g.*, (SELECT MIN(b.ms) FROM results b WHERE b.gpu_name = g.gpu_name AND b.dtype = "
        "g.dtype AND b.m = g.m AND b.n = g.n AND b.k = g.k AND b.variant = g.variant AND b.block_m = "
        "g.block_m AND b.block_n = g.block_n AND b.block_k = g.block_k AND b.split_k = g.split_k AND "
        "b.num_warps = g.num_warps AND b.num_stages = g.num_stages AND b.group_m = 1 AND b.status = "
        "'ok') AS ms_group1 FROM (SELECT gpu_name, dtype, m, n, k, variant, block_m, block_n, block_k, "
        "split_k, num_warps, num_stages, group_m, MIN(ms) AS ms, MAX(operand_bytes) AS operand_bytes, "
        "MAX(l2_bytes) AS l2_bytes FROM results WHERE status = 'ok' AND ms IS NOT NULL AND group_m > 1 "
        "GROUP BY gpu_name, dtype, m, n, k, variant, block_m, block_n, block_k, split_k, num_warps, "
        "num_stages, group_m) g) x WHERE ms_group1 IS NOT NULL"
    ),
    "vs_cublas": (
        "SELECT p.gpu_name, p.dtype, p.m, p.n, p.k, t.ms AS triton_ms, t.variant AS triton_variant, "
        "t.config_key AS triton_config_key, t.tflops AS triton_tflops, p.ms AS cublas_ms, c.tflops AS "
        "cublas_tflops, p.ms / NULLIF(t.ms, 0) AS ratio FROM (SELECT gpu_name, dtype, m, n, k, id, "
        "variant, ms, LAG(-CASE WHEN variant <> 'cublas' THEN -1 ELSE 1 END * id) OVER w AS base_id FROM "
        "results WHERE status = 'ok' AND ms IS NOT NULL WINDOW w AS (PARTITION BY gpu_name, dtype, m, n, "
        "k ORDER BY CASE WHEN variant <> 'cublas' THEN -1 ELSE 1 END, CASE WHEN variant <> 'cublas' THEN "
        "-1 ELSE 1 END * ms, CASE WHEN variant <> 'cublas' THEN -1 ELSE 1 END * id)) p JOIN results t ON "
        "t.id = p.base_id JOIN measurements c ON c.id = p.id WHERE p.variant = 'cublas' AND p.base_id > 0"
    ),
}


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

    for name, select in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def downgrade() -> None:
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW {name}")
    op.drop_table("measurements")
    op.drop_table("sweeps")
    op.drop_table("environments")
