"""What the dashboard asks beyond `db.queries`: the views shaped for its charts.

Same rules as db.queries: each function takes an open Connection, returns a DataFrame (or a dict,
said so), and filters the views by their partition columns. The numbers stay the views'; what is
added here are labels, the per-shape pick a chart highlights, and the roofline's coordinates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, func, select

from db import queries
from db.queries import Filter, conditions, frame
from db.records import Backend

SHAPE = ["m", "n", "k"]
# The compute roof is a dense bf16/fp16 tensor-core peak (farm.gpu's datasheet table).
ROOF_DTYPES = ("bfloat16", "float16")


def shape_label(df: pd.DataFrame) -> list[str]:
    return [f"{m}x{n}x{k}" for m, n, k in zip(df.m, df.n, df.k)]


def _with_shape(df: pd.DataFrame) -> pd.DataFrame:
    df.insert(0, "shape", shape_label(df))
    return df


def interpreter_gpus(conn: Connection) -> list[str]:
    """GPU names whose environments ran under Triton's interpreter: their times are CPU times."""
    env = queries.environments(conn)
    return sorted(env.loc[env.backend == Backend.INTERPRETER, "gpu_name"].unique())


# ---- split-K ----


def splitk_points(conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None) -> pd.DataFrame:
    """splitk_speedup, one row per (shape, block_m, block_n), with a shape and config label and
    `best_for_shape`: the row whose split wins most for its shape (ties: the first block shape)."""
    df = _with_shape(queries.splitk_speedup(conn, gpu_name=gpu_name, dtype=dtype))
    df["config"] = [
        f"{r.block_m}x{r.block_n}, split {r.best_split_k} ({r.best_split_variant})" for r in df.itertuples()
    ]
    scored = df.dropna(subset=["speedup"])
    best = scored.groupby(["gpu_name", "dtype", *SHAPE], sort=False).speedup.idxmax()
    df["best_for_shape"] = df.index.isin(best.to_numpy())
    return df


def splitk_curve_band(conn: Connection, *, gpu_name: str, dtype: str, m: int, n: int, k: int) -> pd.DataFrame:
    """queries.splitk_curve with the speedup's p20-p80 band (unsplit median over each split's p80, p20)."""
    df = queries.splitk_curve(conn, gpu_name=gpu_name, dtype=dtype, m=m, n=n, k=k)
    unsplit = df.speedup * df.ms
    df["speedup_lo"] = unsplit / df.ms_p80.fillna(df.ms)
    df["speedup_hi"] = unsplit / df.ms_p20.fillna(df.ms)
    return df


# ---- grouping / L2 ----


def grouping_points(conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None) -> pd.DataFrame:
    """grouping_effect with shape and config labels (one row per config and group_m > 1)."""
    df = _with_shape(queries.grouping_effect(conn, gpu_name=gpu_name, dtype=dtype))
    df["config"] = [
        f"{r.variant} {r.block_m}x{r.block_n}x{r.block_k} w{r.num_warps} s{r.num_stages}"
        for r in df.itertuples()
    ]
    return df


def size_bin(operand_to_l2: pd.Series) -> pd.Series:
    """The power-of-two bin [2^i, 2^(i+1)) of operand bytes / L2 that each problem falls in, as 2^i."""
    return np.exp2(np.floor(np.log2(operand_to_l2.astype(float))))


def grouping_heatmap(points: pd.DataFrame) -> pd.DataFrame:
    """Per (problem size bin, group_m) of grouping_points' rows: the median over configs and shapes of
    the speedup against group_m = 1 with the same config, with its range and counts.

    Problem size is operand bytes / L2 in power-of-two bins: the L2 effect depends on that ratio,
    and bins keep the heatmap readable from 3 shapes to 3,000. (From the page's rows, not the database:
    grouping_effect is the page's slowest query.)
    """
    df = points.dropna(subset=["operand_to_l2", "speedup"])
    df = df[df.operand_to_l2 > 0].assign(size_lo=lambda d: size_bin(d.operand_to_l2))
    cells = (
        df.groupby(["size_lo", "group_m"])
        .agg(
            speedup=("speedup", "median"),
            speedup_min=("speedup", "min"),
            speedup_max=("speedup", "max"),
            n_configs=("speedup", "size"),
            n_shapes=("shape", "nunique"),
        )
        .reset_index()
    )
    cells["size"] = [_bin_label(lo) for lo in cells.size_lo]
    return cells


def _bin_label(lo: float) -> str:
    return f"{_fraction(lo)}-{_fraction(2 * lo)} L2"


def _fraction(x: float) -> str:
    return f"1/{round(1 / x)}" if x < 1 else f"{x:g}"


# ---- versus cuBLAS and the roofline ----


def cublas_points(conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None) -> pd.DataFrame:
    """vs_cublas per shape with operand bytes and arithmetic intensity (2 m n k / operand bytes, FLOP/B)."""
    df = _with_shape(queries.vs_cublas(conn, gpu_name=gpu_name, dtype=dtype))
    r = queries.view("results")
    stmt = (
        select(
            r.c.gpu_name, r.c.dtype, r.c.m, r.c.n, r.c.k, func.max(r.c.operand_bytes).label("operand_bytes")
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype), r.c.operand_bytes.is_not(None))
        .group_by(r.c.gpu_name, r.c.dtype, r.c.m, r.c.n, r.c.k)
    )
    sizes = frame(conn, stmt)
    df = df.merge(sizes, on=["gpu_name", "dtype", *SHAPE], how="left")
    flops = 2.0 * df.m.astype(float) * df.n.astype(float) * df.k.astype(float)
    df["intensity"] = flops / df.operand_bytes.astype(float)
    return df


def roofline_points(df: pd.DataFrame) -> pd.DataFrame:
    """cublas_points' rows in long form: one per shape and provider (best Triton, cuBLAS) with its TFLOP/s."""
    keep = ["gpu_name", "dtype", "shape", *SHAPE, "intensity"]
    triton = df[keep].assign(
        provider="Triton (best)", tflops=df.triton_tflops, ms=df.triton_ms, config=df.triton_config_key
    )
    cublas = df[keep].assign(provider="cuBLAS", tflops=df.cublas_tflops, ms=df.cublas_ms, config="cuBLAS")
    return pd.concat([triton, cublas], ignore_index=True)


def gpu_peaks(conn: Connection, *, gpu_name: str) -> dict[str, float]:
    """The GPU's roofs: peak_tflops and peak_gbps (0 where no environment of it knows them)."""
    env = queries.environments(conn)
    env = env[env.gpu_name == gpu_name]
    return {c: float(env[c].max()) if len(env) else 0.0 for c in ("peak_tflops", "peak_gbps")}


def roof_lines(
    peak_tflops: float, peak_gbps: float, intensity_lo: float, intensity_hi: float
) -> pd.DataFrame:
    """The two roofs over [intensity_lo, intensity_hi] (FLOP/B), as line vertices (roof, intensity, tflops).

    Bandwidth roof: TFLOP/s = GB/s x FLOP/B / 1000, up to the ridge where it meets the compute roof.
    Empty when either peak is unknown (0).
    """
    cols = ["roof", "intensity", "tflops"]
    if peak_tflops <= 0 or peak_gbps <= 0 or not intensity_lo > 0:
        return pd.DataFrame(columns=cols)
    ridge = peak_tflops * 1e3 / peak_gbps
    lo, hi = min(intensity_lo, ridge / 2), max(intensity_hi, ridge * 2)
    rows = [
        ("bandwidth", lo, peak_gbps * lo / 1e3),
        ("bandwidth", ridge, peak_tflops),
        ("compute", ridge, peak_tflops),
        ("compute", hi, peak_tflops),
    ]
    return pd.DataFrame(rows, columns=cols)


# ---- explorer ----


def count_results(conn: Connection, **filters: Any) -> int:
    """How many rows queries.results returns for the same filters (the explorer shows a capped page)."""
    r = queries.view("results")
    return int(conn.scalar(select(func.count()).select_from(r).where(*conditions(r, **filters))) or 0)


# ---- sweeps ----


def sweep_gpus(conn: Connection) -> pd.DataFrame:
    """Per sweep and GPU model: its ok rows with a time (what compare_sweeps can match)."""
    r = queries.view("results")
    stmt = (
        select(r.c.sweep_id, r.c.gpu_name, func.count().label("n_ok"))
        .where(r.c.status == "ok", r.c.ms.is_not(None), r.c.sweep_id.is_not(None))
        .group_by(r.c.sweep_id, r.c.gpu_name)
        .order_by(r.c.sweep_id, r.c.gpu_name)
    )
    return frame(conn, stmt)


def compare_points(conn: Connection, *, sweep_a: int, sweep_b: int) -> pd.DataFrame:
    """queries.compare_sweeps with every time over sweep a's median: b_over_a (< 1: b is faster) and the
    p20-p80 intervals of both sweeps on that scale (a_lo..a_hi around 1, b_lo..b_hi around b_over_a)."""
    df = queries.compare_sweeps(conn, sweep_a, sweep_b)
    df["b_over_a"] = df.ms_b / df.ms_a
    for side in "ab":
        ms = df[f"ms_{side}"]
        df[f"{side}_lo"] = df[f"ms_p20_{side}"].fillna(ms) / df.ms_a
        df[f"{side}_hi"] = df[f"ms_p80_{side}"].fillna(ms) / df.ms_a
    return df


def default_comparison(conn: Connection) -> tuple[int, int] | None:
    """(a, b) to compare first: b the newest sweep with ok rows that an older one shares a GPU model
    with, a the newest such older one; else the two newest sweeps with ok rows; None with fewer."""
    df = sweep_gpus(conn)
    gpus = {int(i): set(g.gpu_name) for i, g in df.groupby("sweep_id")}
    ids = sorted(gpus, reverse=True)
    if len(ids) < 2:
        return None
    for pos, b in enumerate(ids):
        older = [a for a in ids[pos + 1 :] if gpus[a] & gpus[b]]
        if older:
            return older[0], b
    return ids[1], ids[0]
