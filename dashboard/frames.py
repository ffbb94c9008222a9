"""The charts' frames: db.queries' rows (already fetched, cached by dashboard.cache) reshaped for
display: labels, verdicts, bins, long forms, reference lines. Pure pandas, no database, no Streamlit,
so each can be tested on a hand-made frame (db.queries.rank_winners, the tie rule, is pure pandas too).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from dashboard.texts import NO_ENERGY
from db.queries import rank_winners
from db.records import FIRST_SUB_BLOCK_S
from db.splitk_rule import SIDES
from kernels.sizes import flop as matmul_flop

SHAPE = ["m", "n", "k"]
# The compute roof is a dense bf16/fp16 tensor-core peak (farm.gpu's datasheet table).
ROOF_DTYPES = ("bfloat16", "float16")
# Run-to-run noise of one point on an H200: ten do_bench medians differ by 2-3%; a ratio
# within 3% of 1 is drawn as "within noise" where a point has no p20-p80 of its own.
NOISE = 0.03


def shape_label(df: pd.DataFrame) -> list[str]:
    return [f"{m}x{n}x{k}" for m, n, k in zip(df.m, df.n, df.k)]


def with_shape(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out.insert(0, "shape", shape_label(out))
    return out


def _blocks(df: pd.DataFrame, prefix: str) -> list[str]:
    return [
        "" if pd.isna(bm) else f"{v} {bm}x{bn}x{bk}" + (f" split {s}" if s and s > 1 else "")
        for v, bm, bn, bk, s in zip(
            df[f"{prefix}variant"],
            df[f"{prefix}block_m"],
            df[f"{prefix}block_n"],
            df[f"{prefix}block_k"],
            df[f"{prefix}split_k"],
        )
    ]


def ratio_band(num_ms: pd.Series, num_lo: pd.Series, num_hi: pd.Series, den_ms, den_lo, den_hi):
    """(lo, hi) of num / den from both p20-p80 intervals: the ratio is "within noise" where lo <= 1 <= hi."""
    lo = num_lo.fillna(num_ms) / den_hi.fillna(den_ms)
    hi = num_hi.fillna(num_ms) / den_lo.fillna(den_ms)
    return lo, hi


def verdict(ratio: pd.Series, lo: pd.Series, hi: pd.Series, win: str, lose: str) -> list[str]:
    return [
        "" if pd.isna(r) else ("within noise" if lo_ <= 1 <= hi_ else (win if r > 1 else lose))
        for r, lo_, hi_ in zip(ratio, lo, hi)
    ]


# ---- readable units (tooltips: one number, the unit chosen to fit it) ----


def readable_time(ms: float) -> str:
    """Milliseconds as "12.5 us", "1.23 ms" or "2.5 s"; "" where unknown."""
    if ms is None or pd.isna(ms):
        return ""
    if ms < 1:
        return f"{ms * 1e3:.3g} us"
    return f"{ms:.3g} ms" if ms < 1e3 else f"{ms / 1e3:.3g} s"


def readable_energy(joules: float) -> str:
    """Joules as "34 mJ" or "1.2 J"; NO_ENERGY where unknown."""
    if joules is None or pd.isna(joules):
        return NO_ENERGY
    return f"{joules * 1e3:.3g} mJ" if joules < 1 else f"{joules:.3g} J"


def readable_watts(watts: float) -> str:
    return NO_ENERGY if watts is None or pd.isna(watts) else f"{watts:.0f} W"


def readable_per_tflop(joules_per_tflop: float) -> str:
    return NO_ENERGY if pd.isna(joules_per_tflop) else f"{joules_per_tflop:.3g} J/TFLOP"


def flop(m: pd.Series, n: pd.Series, k: pd.Series) -> pd.Series:
    """The work of one matmul launch (kernels.sizes.flop: 2MNK), as float64 columns."""
    return matmul_flop(m.astype("float64"), n.astype("float64"), k.astype("float64"))


def joules_per_tflop(joules: pd.Series, m: pd.Series, n: pd.Series, k: pd.Series) -> pd.Series:
    """Energy per unit of work: joules per launch over the launch's 2MNK FLOP, in J per TFLOP (what two
    shapes' energies compare on); NaN without a reading (NULL, or 0 J: NVML's counter did not tick)."""
    joules = pd.to_numeric(joules, errors="coerce").astype("float64")
    return (joules / (flop(m, n, k) / 1e12)).where(joules > 0)


def with_energy(df: pd.DataFrame, prefix: str = "") -> pd.DataFrame:
    """A copy with PREFIX + joules_per_tflop from PREFIX + joules_per_launch and the shape (m, n, k)."""
    out = df.copy()
    joules = out[f"{prefix}joules_per_launch"]
    out[f"{prefix}joules_per_tflop"] = joules_per_tflop(joules, out.m, out.n, out.k)
    return out


# (column, its text column, formatter): the measurement columns of revision 0002 as tooltips show them.
READABLE = (
    ("ms", "kernel_time", readable_time),
    ("stream_ms", "stream_time", readable_time),
    ("host_ms", "host_time", readable_time),
    ("eager_ms", "eager_time", readable_time),
    ("joules_per_launch", "energy", readable_energy),
    ("avg_watts", "power", readable_watts),
)


def with_readable(df: pd.DataFrame, prefix: str = "") -> pd.DataFrame:
    """A copy with text columns (PREFIX + kernel_time, stream_time, host_time, eager_time, energy, power)
    for those of PREFIX + ms, stream_ms, ... that df has."""
    out = df.copy()
    for col, text, fmt in READABLE:
        if prefix + col in out:
            out[prefix + text] = [fmt(v) for v in out[prefix + col]]
    return out


# ---- times in tables ----

# Every table on every page shows its times in microseconds, as numbers (sortable, one unit a column):
# the demo's kernels run from 5 us to 13 ms, and in ms a 9.25 us kernel read "0.0093". A column named
# ms, *_ms or ms_* is shown as us, *_us or us_*.
TIME_SCALE = 1e3  # us per ms


def us_column(column: str) -> str | None:
    """The table name of a time column in ms ("triton_ms" -> "triton_us", "ms_p20" -> "us_p20"); None
    for any other column."""
    words = column.split("_")
    return "_".join("us" if w == "ms" else w for w in words) if "ms" in words else None


def in_us(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of a table with its ms columns (us_column) renamed and in microseconds."""
    renamed = {c: us_column(c) for c in df.columns if us_column(c)}
    out = df.rename(columns=renamed)
    for column in renamed.values():
        out[column] = pd.to_numeric(out[column], errors="coerce") * TIME_SCALE
    return out


# ---- split-K ----


def splitk_table(
    best: pd.DataFrame, eager: pd.DataFrame | None = None, details: pd.DataFrame | None = None
) -> pd.DataFrame:
    """db.queries.splitk_best's rows with a shape label, the configs in words, the p20-p80 range of the
    speedup and a verdict (split wins / split loses / within noise).

    With `eager` (db.queries.splitk_eager): eager_speedup and the eager caller's configs
    (unsplit_eager_config, split_eager_config; NaN where the shape has no host time). With `details`
    (db.queries.measurement_details of the unsplit and split ids): each side's stream_ms, host_ms,
    joules_per_launch, avg_watts, timing_regime as unsplit_... and split_..., and their readable texts.
    """
    df = with_shape(best)
    if eager is not None:
        df = df.merge(eager, on=["gpu_name", "dtype", *SHAPE], how="left")
        for side in SIDES:
            df[f"{side}_eager_config"] = [
                "" if pd.isna(v) else f"{v} {c}"
                for v, c in zip(df[f"{side}_eager_variant"], df[f"{side}_eager_config_key"])
            ]
    else:
        df["eager_speedup"] = np.nan
        df["unsplit_eager_config"] = df["split_eager_config"] = ""
    for side in SIDES:
        if details is not None:
            side_details = details.drop(columns="eager_ms", errors="ignore").add_prefix(f"{side}_")
            df = with_readable(df.merge(side_details, on=f"{side}_id", how="left"), f"{side}_")
        # Every text column a tooltip names, "" where unknown.
        for text in ("stream_time", "host_time", "energy", "power", "timing_regime"):
            df[f"{side}_{text}"] = df.get(f"{side}_{text}", pd.Series("", index=df.index)).fillna("")
    df["unsplit_config"] = _blocks(df, "unsplit_")
    df["split_config"] = _blocks(df, "split_")
    df["streamk_config"] = _blocks(df, "streamk_")
    df["speedup_lo"], df["speedup_hi"] = ratio_band(
        df.unsplit_ms, df.unsplit_ms_p20, df.unsplit_ms_p80, df.split_ms, df.split_ms_p20, df.split_ms_p80
    )
    df["verdict"] = verdict(df.speedup, df.speedup_lo, df.speedup_hi, "split wins", "split loses")
    df["tiles_per_sm"] = df.unsplit_tiles_per_sm
    df["waves"] = df.unsplit_waves
    df["gflop"] = flop(df.m, df.n, df.k) / 1e9
    df["throttled"] = df.unsplit_throttled.fillna(False) | df.split_throttled.fillna(False)
    for side in SIDES:
        if f"{side}_joules_per_launch" in df:
            df = with_energy(df, f"{side}_")
    return df


def splitk_blocks(same_blocks: pd.DataFrame) -> pd.DataFrame:
    """The splitk_speedup view's rows (one per shape and block shape) with shape and config labels."""
    df = with_shape(same_blocks)
    df["config"] = [
        f"{r.block_m}x{r.block_n}, split {r.best_split_k} ({r.best_split_variant})" for r in df.itertuples()
    ]
    return df


def splitk_curve_band(curve: pd.DataFrame) -> pd.DataFrame:
    """db.queries.splitk_curve with the speedup's p20-p80 band (unsplit median over each split's p80, p20)."""
    df = curve.copy()
    unsplit = df.speedup * df.ms
    df["speedup_lo"] = unsplit / df.ms_p80.fillna(df.ms)
    df["speedup_hi"] = unsplit / df.ms_p20.fillna(df.ms)
    return df


# ---- grouping / L2 ----


def grouping_points(effect: pd.DataFrame) -> pd.DataFrame:
    """grouping_effect with shape and config labels (one row per config and group_m > 1)."""
    df = with_shape(effect)
    df["config"] = _config_label(df)
    return df


def _config_label(df: pd.DataFrame) -> list[str]:
    return [
        f"{v} {bm}x{bn}x{bk} w{w} s{s}"
        for v, bm, bn, bk, w, s in zip(
            df.variant, df.block_m, df.block_n, df.block_k, df.num_warps, df.num_stages
        )
    ]


GAIN_MEASURES = ("time", "energy")
_MEASURE_GAIN = {"time": "time_gain", "energy": "energy_gain"}
_SHAPE_KEY = ["shape", "m", "n", "k", "group_m"]


def grouping_pairs(gain: pd.DataFrame) -> pd.DataFrame:
    """db.queries.grouping_gain's pairs (or db.conclusions.grouping_gain_by_run's of one run), one row per
    config and group_m > 1, with shape and config labels and each side's joules per TFLOP; the largest
    time gain first."""
    df = with_shape(gain)
    df["config"] = _config_label(df)
    df["joules_per_tflop"] = joules_per_tflop(df.joules_per_launch, df.m, df.n, df.k)
    df["joules_per_tflop_group1"] = joules_per_tflop(df.joules_group1, df.m, df.n, df.k)
    return df.sort_values("time_gain", ascending=False, kind="stable").reset_index(drop=True)


def grouping_gains(pairs: pd.DataFrame) -> pd.DataFrame:
    """db.queries.grouping_gain's pairs (or grouping_pairs of them) summed up per shape and group_m > 1, in
    long form: one row per measure ("time":
    ms at group_m 1 / ms; "energy": joules at 1 / joules, over the pairs with energy on both rows) with
    `gain`, the median over the shape's configs, its range `gain_lo`-`gain_hi`, `configs` (the pairs it
    is over) and `best_config` (the config of gain_hi); `time_gain` and `energy_gain` are both measures'
    medians, operand_to_l2 the shape's.

    One row a shape, not a config: on the 100,000-row sample's H200 bfloat16 the page drew 8,288 marks
    (4,144 pairs, each in time and in energy) with 24 columns each, 2.2 s to show in Chromium; per shape
    it draws 784 (196 shapes x GROUP_SIZE_M 4 and 8, in time and in energy), and the table lists every
    config.
    """
    if "shape" not in pairs:
        pairs = grouping_pairs(pairs)
    medians = pairs.groupby(_SHAPE_KEY, sort=False).agg(
        operand_to_l2=("operand_to_l2", "first"),
        time_gain=("time_gain", "median"),
        energy_gain=("energy_gain", "median"),
    )
    parts = []
    for measure in GAIN_MEASURES:
        col = _MEASURE_GAIN[measure]
        rows = pairs[pairs[col].notna()]
        if rows.empty:
            continue
        by = rows.groupby(_SHAPE_KEY, sort=False)[col]
        out = by.agg(gain="median", gain_lo="min", gain_hi="max", configs="size")
        out["best_config"] = rows.config.loc[by.idxmax()].to_numpy()
        parts.append(out.join(medians).assign(measure=measure).reset_index())
    if not parts:
        cols = [*_SHAPE_KEY, "gain", "gain_lo", "gain_hi", "configs", "best_config", "operand_to_l2"]
        return pd.DataFrame(columns=[*cols, "time_gain", "energy_gain", "measure"])
    return pd.concat(parts, ignore_index=True)


def size_bin(operand_to_l2: pd.Series) -> pd.Series:
    """The power-of-two bin [2^i, 2^(i+1)) of operand bytes / L2 that each problem falls in, as 2^i."""
    return np.exp2(np.floor(np.log2(operand_to_l2.astype(float))))


def grouping_heatmap(points: pd.DataFrame) -> pd.DataFrame:
    """Per (problem size bin, group_m) of grouping_points' rows: the median over configs and shapes of
    the speedup against group_m = 1 with the same config, with its range and counts; `stat` says what
    the number is ("median of 7 configs" or "1 config": one measurement is no median).

    Problem size is operand bytes / L2 in power-of-two bins: the L2 effect depends on that ratio,
    and bins keep the heatmap readable from 3 shapes to 3,000.
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
    cells["size"] = [bin_label(lo) for lo in cells.size_lo]
    cells["stat"] = [f"median of {n} configs" if n > 1 else "1 config" for n in cells.n_configs]
    return cells


def heatmap_bins(cells: pd.DataFrame) -> list[str]:
    """Every bin label from the smallest to the largest occupied bin, empty ones too: the axis to scale."""
    if cells.empty:
        return []
    lo, hi = (round(math.log2(v)) for v in (cells.size_lo.min(), cells.size_lo.max()))
    return [bin_label(2.0**i) for i in range(lo, hi + 1)]


def bin_label(lo: float) -> str:
    return f"{_fraction(lo)}-{_fraction(2 * lo)} L2"


def _fraction(x: float) -> str:
    return f"1/{round(1 / x)}" if x < 1 else f"{x:g}"


# ---- versus cuBLAS and the roofline ----


def with_intensity(df: pd.DataFrame, sizes: pd.DataFrame) -> pd.DataFrame:
    """Rows per shape with operand bytes (from queries.shape_sizes) and arithmetic intensity, 2 m n k /
    operand bytes (FLOP/B)."""
    out = with_shape(df).merge(sizes, on=["gpu_name", "dtype", *SHAPE], how="left")
    out["intensity"] = flop(out.m, out.n, out.k) / out.operand_bytes.astype(float)
    return out


def roofline_points(best: pd.DataFrame, sizes: pd.DataFrame, peak_tflops: float) -> pd.DataFrame:
    """queries.best_configs' rows as roofline points: per shape the best Triton config ("Triton (best)")
    and cuBLAS where it was measured, with TFLOP/s, intensity and percent of the compute peak.

    Needs no cuBLAS row: a shape at 7% of peak stands out under the roof on its own.
    """
    cols = ["id", "gpu_name", "dtype", *SHAPE, "variant", "config_key", "ms", "ms_p20", "ms_p80", "tflops"]
    cols += ["stream_ms", "host_ms"]
    df = rank_winners(best[cols])
    df["provider"] = np.where(df.variant == "cublas", "cuBLAS", "Triton (best)")
    df = df.drop_duplicates(["gpu_name", "dtype", *SHAPE, "provider"])
    df["config"] = np.where(df.variant == "cublas", "cuBLAS", df.variant + " " + df.config_key)
    df = with_intensity(df, sizes)
    df["pct_peak"] = 100 * df.tflops / peak_tflops if peak_tflops > 0 else np.nan
    return df.sort_values([*SHAPE, "provider"]).reset_index(drop=True)


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


# ---- one shape ----


def shape_configs(rows: pd.DataFrame, peak_tflops: float) -> pd.DataFrame:
    """Every ok row of one shape, fastest first (ties: db.queries.WINNER_ORDER), with percent of peak,
    joules per TFLOP and its time relative to the fastest (rel_lo..rel_hi: its p20-p80 on that scale)."""
    df = rank_winners(rows[(rows.status == "ok") & rows.ms.notna()])
    best = float(df.ms.iloc[0]) if len(df) else np.nan
    df["vs_best"] = df.ms / best
    df["rel_lo"] = df.ms_p20.fillna(df.ms) / best
    df["rel_hi"] = df.ms_p80.fillna(df.ms) / best
    df["pct_peak"] = 100 * df.tflops / peak_tflops if peak_tflops > 0 else np.nan
    # Ranked: the same config measured by two code versions is two rows.
    df["config"] = [f"{i + 1}. {v} {c}" for i, (v, c) in enumerate(zip(df.variant, df.config_key))]
    return with_readable(with_energy(df))


def with_trusted_energy(rows: pd.DataFrame, details: pd.DataFrame) -> pd.DataFrame:
    """rows (db.queries.results) with avg_watts and joules_per_launch from db.queries.measurement_details
    of their ids: NULL where a reading exceeded its power limit (a misread counter), as every page shows."""
    energy = ["avg_watts", "joules_per_launch"]
    return rows.drop(columns=energy).merge(details[["id", *energy]], on="id", how="left")


def winners_of(configs: pd.DataFrame, winners: pd.DataFrame) -> pd.DataFrame:
    """shape_configs' rows of db.queries.best_configs' winners (their ids), in the winners' order: the
    query ranks for an objective, shape_configs holds what the page derives (percent of peak, trusted
    energy, vs_best)."""
    rank = {int(i): n for n, i in enumerate(winners.id)}
    df = configs[configs.id.isin(rank)]
    return df.sort_values("id", key=lambda ids: ids.map(rank)).reset_index(drop=True)


# ---- sweeps ----


def compare_points(points: pd.DataFrame) -> pd.DataFrame:
    """db.queries.compare_runs' points with both runs' p20-p80 intervals over run a's median: a_lo..a_hi
    around 1, b_lo..b_hi around ratio_b_over_a (the query's ratio, run b over run a: < 1, b is faster)."""
    df = points.copy()
    for side in "ab":
        ms = df[f"ms_{side}"]
        df[f"{side}_lo"] = df[f"ms_p20_{side}"].fillna(ms) / df.ms_a
        df[f"{side}_hi"] = df[f"ms_p80_{side}"].fillna(ms) / df.ms_a
    return df


# ---- accuracy ----

EXACT = "exact"


def log_points(acc: pd.DataFrame, column: str) -> pd.DataFrame:
    """acc's rows with `value` to draw on a log axis: zero (bit-exact) sits a decade under the smallest
    positive value, labelled "exact"; missing values are dropped."""
    df = acc.dropna(subset=[column]).copy()
    positive = df.loc[df[column] > 0, column]
    floor = float(positive.min()) / 10 if len(positive) else 1e-12
    df["value"] = df[column].where(df[column] > 0, floor)
    df["shown"] = [EXACT if v == 0 else f"{v:.3g}" for v in df[column]]
    return df


def mib(n_bytes: float) -> str:
    """Bytes as MiB, e.g. an H200's L2 62914560 -> "60 MiB"."""
    return f"{n_bytes / 2**20:g} MiB"


def sweep_timing(spec: str | None) -> str:
    """How a sweep timed its points, from its stored spec (`timing:`): the regime, and for `steady`
    whether configs at the power limit settled first (a max_settle_s over db.records.FIRST_SUB_BLOCK_S;
    why not: docs/design.md, "No settling at the power limit") and how many passes they took. Empty for a
    sweep whose spec says nothing of timing (a database built by hand)."""
    try:
        timing = json.loads(spec or "{}").get("timing") or {}
    except (ValueError, AttributeError):
        return ""
    regime = timing.get("regime")
    if regime is None:
        return ""
    if regime == "rest":
        return f"rest, {timing.get('rest_s', 1.0):g} s before each launch"
    if regime != "steady":
        return regime
    words = ["steady"]
    settle = timing.get("max_settle_s")  # None: a spec stored before the setting existed
    if settle is not None:
        settles = settle > FIRST_SUB_BLOCK_S
        words.append(f"settling up to {settle:g} s at the limit" if settles else "no settling")
    if timing.get("limit_passes", 1) > 1:
        words.append(f"{timing['limit_passes']} passes at the limit")
    return ", ".join(words)


def readable_environments(env: pd.DataFrame) -> pd.DataFrame:
    """Environments with byte counts as MiB / GiB text and peaks with their units."""
    out = env.copy()
    if "l2_bytes" in out:
        out["l2"] = [mib(b) if pd.notna(b) else "" for b in out.l2_bytes]
    if "memory_bytes" in out:
        out["memory"] = [f"{b / 2**30:.0f} GiB" if pd.notna(b) else "" for b in out.memory_bytes]
    return out.drop(columns=[c for c in ("l2_bytes", "memory_bytes") if c in out])


def with_launch_geometry(table: pd.DataFrame, geometry: pd.DataFrame) -> pd.DataFrame:
    """splitk_table's rows with the why-columns db.conclusions.launch_geometry gives: `occupancy` of the
    unsplit grid (its waves = tiles per SM / occupancy) and `split_programs_per_sm` of the best split."""
    geo = geometry.set_index("id")
    out = table.copy()
    out["occupancy"] = out.unsplit_id.map(geo.occupancy).astype("float64")
    out["split_programs_per_sm"] = out.split_id.map(geo.programs_per_sm).astype("float64")
    return out


def grouping_by_run(gains: pd.DataFrame, runs: dict[int, str]) -> pd.DataFrame:
    """db.conclusions.grouping_gain_by_run's pairs summed up per run and shape: run (its name), shape,
    operand_to_l2, pairs, best_gain, median_gain; newest run first, then the largest operands."""
    if gains.empty:
        cols = ["run", "shape", "operand_to_l2", "pairs", "best_gain", "median_gain"]
        return pd.DataFrame(columns=cols)
    # Grouped on the shape's numbers and labelled after: labelling every pair first (5,275 on the
    # 100,000-row sample) cost more than the grouping.
    out = (
        gains.groupby(["sweep_id", "m", "n", "k"], sort=False)
        .agg(
            operand_to_l2=("operand_to_l2", "first"),
            pairs=("time_gain", "size"),
            best_gain=("time_gain", "max"),
            median_gain=("time_gain", "median"),
        )
        .reset_index()
        .sort_values(["sweep_id", "operand_to_l2"], ascending=[False, False])
    )
    out.insert(0, "shape", shape_label(out))
    out.insert(0, "run", [runs.get(int(i), f"#{int(i)}") for i in out.sweep_id])
    return out.drop(columns=["sweep_id", "m", "n", "k"]).reset_index(drop=True)
