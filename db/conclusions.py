"""What each dashboard page concludes from the database, in one sentence, and the run questions the
pages ask beyond db.queries: how a run is named, which two runs to compare first, every run's grouping
gains.

Every sentence is computed from the rows (never written per database), so it flips when the data do;
tests/dashboard/test_dashboard_conclusions.py crafts databases on both sides of each one.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

import pandas as pd
from sqlalchemy import Connection, select

from db.queries import (
    ENERGY_COLUMNS,
    GAIN_KEY,
    accuracy,
    best_configs,
    compare_runs,
    frame,
    newest_shared_pair,  # noqa: F401 (re-exported: the pair Compare runs and `farm compare` open on)
    splitk_best,
    summary,
    sweeps,
    trusted_energy,
    view,
    vs_cublas,
)

# Run-to-run noise on an H200: the same config differs by 0.8% between two runs at the median and 6.8%
# at the 90th percentile (docs/design.md, "Search"): a ratio within 3% of 1 concludes nothing.
NOISE = 0.03
# A result's relative error against the fp64 reference stays within a few units of the dtype's
# rounding (unit roundoff u = 2^-p for p significand bits) when a K-long fp32 accumulation is right.
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}
# Flags a sweep's stored command carries that say nothing about what it measured.
_QUIET_FLAGS = {"--no-progress"}
_VALUED_FLAGS = {"--db"}


def readable_ms(ms: float) -> str:
    """Milliseconds as "9.25 us" below 1 ms, "1.23 ms" below 1 s, else "2.5 s"."""
    if ms < 1:
        return f"{ms * 1e3:.3g} us"
    return f"{ms:.3g} ms" if ms < 1e3 else f"{ms / 1e3:.3g} s"


def _shape(row: Any) -> str:
    return f"{int(row.m)}x{int(row.n)}x{int(row.k)}"


# ---- runs ----


def short_command(command: str | None) -> str:
    """A sweep's stored command as a user types it: `farm sweep --preset grouping --repeat` (the
    interpreter's path, --db's value and --no-progress left out)."""
    if not command:
        return "command not stored"
    words = shlex.split(command)
    for i, word in enumerate(words):  # ".../cli/__main__.py sweep ..." or ".../farm sweep ..."
        if re.search(r"(^|/)(farm|cli/__main__\.py|cli)$", word):
            words = words[i + 1 :]
            break
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in _VALUED_FLAGS:
            skip = True
        elif word not in _QUIET_FLAGS and not any(word.startswith(f"{f}=") for f in _VALUED_FLAGS):
            kept.append(word)
    return "farm " + " ".join(kept)


def run_names(conn: Connection) -> dict[int, str]:
    """Every sweep's id -> "#2 2026-12-04 16:59 grouping: farm sweep --preset grouping --repeat" (its
    start, its name, which is its preset for a preset sweep, and its command), newest first."""
    runs = sweeps(conn)
    return {
        int(
            r.id
        ): f"#{int(r.id)} {pd.Timestamp(r.started_at):%Y-%m-%d %H:%M} {r.name}: {short_command(r.command)}"
        for r in runs.itertuples()
    }


def grouping_gain_by_run(conn: Connection, *, gpu_name: str, dtype: str) -> pd.DataFrame:
    """Per run, shape, block config and group_m > 1: the run's fastest row of that group_m against its
    fastest group_m = 1 row of the same config (time_gain = ms at 1 / ms; > 1: grouping pays), with
    operand_to_l2 and l2_bytes, and db.queries.grouping_gain's columns for each side (id, ms,
    joules_per_launch, avg_watts, timing_regime; the group_m = 1 row's with `_group1`, its joules as
    joules_group1) and energy_gain, so that a page draws any run's gains as it draws the newest ones.
    db.queries.grouping_gain asks the same of each point's newest run."""
    r = view("run_results")
    cols = ("sweep_id", *GAIN_KEY, "group_m", "id", "ms", "timing_regime", "operand_bytes", "l2_bytes")
    grouped = select(r.c.variant).where(r.c.group_m > 1, r.c.gpu_name == gpu_name).distinct()
    energy = [trusted_energy(r, c) for c in ENERGY_COLUMNS]
    stmt = select(*(r.c[c] for c in cols), *energy).where(
        r.c.gpu_name == gpu_name,
        r.c.dtype == dtype,
        r.c.status == "ok",
        r.c.ms.is_not(None),
        r.c.sweep_id.is_not(None),
        r.c.variant.in_(grouped),
    )
    rows = frame(conn, stmt)
    key = ["sweep_id", *GAIN_KEY]
    best = rows.sort_values("ms").drop_duplicates([*key, "group_m"])
    side = ["id", "ms", "joules_per_launch", "avg_watts", "timing_regime"]
    base = best[best.group_m == 1][[*key, *side]]
    out = best[best.group_m > 1].merge(base, on=key, suffixes=("", "_group1"))
    out = out.rename(columns={"joules_per_launch_group1": "joules_group1"})
    out["time_gain"] = out.ms_group1 / out.ms
    # 0 J: NVML's counter did not tick in a short block, no known energy (as db.queries.grouping_gain).
    metered = (out.joules_group1 > 0) & (out.joules_per_launch > 0)
    out["energy_gain"] = (out.joules_group1 / out.joules_per_launch).where(metered)
    out["operand_to_l2"] = out.operand_bytes.astype("float64") / out.l2_bytes.astype("float64")
    return out.sort_values(["sweep_id", *GAIN_KEY, "group_m"]).reset_index(drop=True)


# ---- the sentence each page opens with ----


def overview(conn: Connection) -> str:
    """How much of the database can be read as timings, and how its last sweep ended."""
    s = summary(conn)
    n, ok = s["measurements"], s["by_status"].get("ok", 0)
    if not n:
        return "This database holds no measurements yet."
    gpus = ", ".join(s["by_gpu"])
    failed = {k: v for k, v in s["by_status"].items() if k != "ok"}
    if ok * 2 >= n:
        said = f"{ok:,} of {n:,} measurements on {gpus} are usable timings (status ok)"
    else:
        worst = max(failed, key=failed.get)
        said = (
            f"Most measurements here failed: {n - ok:,} of {n:,} on {gpus}, mostly {worst}; "
            "read Explorer first"
        )
    last = s["last_sweep"]
    if last is not None and last["status"] != "finished":
        said += f", and the last sweep, #{last['id']} {last['name']!r}, is {last['status']}"
    return said + "."


def shape(conn: Connection, *, gpu_name: str, dtype: str, shape: tuple[int, int, int]) -> str:
    """Which config wins the shape, and whether Triton's best beats cuBLAS on it."""
    best = best_configs(conn, gpu_name=gpu_name, dtype=dtype, shape=shape)
    if best.empty:
        return f"No ok row on {'x'.join(map(str, shape))}."
    top = best.iloc[0]
    said = f"On {_shape(top)} the fastest kernel is {top.variant} {top.config_key} at {readable_ms(top.ms)}"
    cublas = best[best.variant == "cublas"]
    triton = best[best.variant != "cublas"]
    if len(cublas) and len(triton):
        ratio = float(cublas.ms.iloc[0] / triton.ms.iloc[0])
        if ratio > 1 + NOISE:
            said += f"; Triton's best beats cuBLAS by {ratio:.2f}x"
        elif ratio < 1 - NOISE:
            said += f"; cuBLAS beats Triton's best ({triton.variant.iloc[0]}) by {1 / ratio:.2f}x"
        else:
            said += "; Triton's best and cuBLAS are within noise"
    return said + "."


def splitk(conn: Connection, *, gpu_name: str, dtype: str) -> str:
    """Where split-K pays (beyond noise) and where the grid already fills the GPU."""
    return splitk_said(splitk_best(conn, gpu_name=gpu_name, dtype=dtype))


def splitk_said(best: pd.DataFrame) -> str:
    """splitk's sentence from splitk_best's rows, for a page that holds them already (running the query
    a second time took 0.17 s of the Split-K page's first visit on 100,000 rows)."""
    best = best[best.speedup.notna()]
    if best.empty:
        return "No shape here has both a split and an unsplit row."
    pays = best[best.speedup > 1 + NOISE]
    if pays.empty:
        top = best.loc[best.speedup.idxmax()]
        return (
            f"Split-K pays on none of the {len(best)} shapes here (best {top.speedup:.2f}x at {_shape(top)}, "
            f"{top.unsplit_tiles_per_sm:.2g} tiles per SM): the unsplit grids already keep the SMs busy."
        )
    top = pays.loc[pays.speedup.idxmax()]
    under = int((pays.unsplit_tiles_per_sm < 1).sum())
    return (
        f"Split-K pays on {len(pays)} of {len(best)} shapes, {under} of them under one output tile per SM; "
        f"the most at {_shape(top)}, {top.speedup:.2f}x ({top.unsplit_tiles_per_sm:.2g} tiles per SM "
        f"unsplit, SPLIT_K {int(top.split_split_k)})."
    )


def grouping(conn: Connection, *, gpu_name: str, dtype: str) -> str:
    """Whether grouped program order pays, in which run, and where the operands stand against L2."""
    return grouping_said(grouping_gain_by_run(conn, gpu_name=gpu_name, dtype=dtype))


def grouping_said(gains: pd.DataFrame) -> str:
    """grouping's sentence from grouping_gain_by_run's rows, for a page that holds them already (running
    the query a second time took 0.09 s of the Grouping page's first visit on 100,000 rows)."""
    if gains.empty:
        return "No grouped pair (GROUP_SIZE_M > 1 and = 1, same config) here."
    l2 = f"{gains.l2_bytes.iloc[0] / 2**20:.0f} MiB L2"
    top = gains.loc[gains.time_gain.idxmax()]
    if top.time_gain <= 1 + NOISE:
        return (
            f"Grouped program order gains nothing beyond noise here (best {top.time_gain:.3f}x, run "
            f"#{int(top.sweep_id)}): operands up to {gains.operand_to_l2.max():.2g}x the {l2}."
        )
    per_run = gains.groupby("sweep_id").time_gain.max()
    runs = ", ".join(f"#{int(i)} up to {g:.2f}x" for i, g in per_run.items())
    return (
        f"Grouped program order pays once the operands outgrow the {l2}: up to {top.time_gain:.2f}x at "
        f"{_shape(top)} ({top.operand_to_l2:.2g}x L2, GROUP_SIZE_M {int(top.group_m)}); by run: {runs}."
    )


def cublas(conn: Connection, *, gpu_name: str, dtype: str) -> str:
    """On how many shapes Triton's best config beats cuBLAS."""
    vs = vs_cublas(conn, gpu_name=gpu_name, dtype=dtype).dropna(subset=["ratio"])
    if vs.empty:
        return "No shape here has both a Triton and a cuBLAS time."
    wins = vs[vs.ratio > 1 + NOISE]
    top = vs.loc[vs.ratio.idxmax()]
    if wins.empty:
        worst = vs.loc[vs.ratio.idxmin()]
        return (
            f"cuBLAS is as fast or faster on all {len(vs)} shapes; its widest lead is "
            f"{1 / worst.ratio:.2f}x at {_shape(worst)}."
        )
    return (
        f"Triton's best config beats cuBLAS beyond noise on {len(wins)} of {len(vs)} shapes, "
        f"by up to {top.ratio:.2f}x at {_shape(top)}."
    )


def explorer(conn: Connection) -> str:
    """How many rows there are to filter, and how many failed."""
    s = summary(conn)
    n, ok = s["measurements"], s["by_status"].get("ok", 0)
    runs = (
        f"{s['rows_all_runs']:,} rows of every run" if s["rows_all_runs"] > n else "no older run beside them"
    )
    if ok == n:
        return f"All {n:,} measurements (each point's newest run; {runs}) are ok: filter and sort them below."
    failed = ", ".join(f"{v:,} {k}" for k, v in s["by_status"].items() if k != "ok")
    return f"{n - ok:,} of {n:,} measurements did not time ({failed}; {runs}): the status filter finds them."


def accuracy_verdict(conn: Connection, *, gpu_name: str | None = None) -> str:
    """Whether every checked result is within its dtype's rounding, or which failed."""
    acc = accuracy(conn, gpu_name=gpu_name)
    if acc.empty:
        return "No row was checked for accuracy."
    wrong = acc[acc.n_wrong > 0]
    if len(wrong):
        listed = ", ".join(f"{r.variant} {r.dtype} ({int(r.n_wrong)})" for r in wrong.itertuples())
        return f"{int(wrong.n_wrong.sum()):,} checked rows are wrong: {listed}."
    units = acc.rel_err_max / acc.dtype.map(UNIT_ROUNDOFF).astype("float64")
    worst = acc.loc[units.idxmax()]
    if units.max() > 1:
        return (
            f"No checked row is wrong, but {worst.variant} in {worst['dtype']} errs by "
            f"{worst.rel_err_max:.2g}, {units.max():.2g} units of {dtype_rounding(worst['dtype'])}: more "
            "than rounding explains."
        )
    return (
        f"Every checked result is within {dtype_rounding(worst['dtype'])}: the largest relative error, "
        f"{worst.rel_err_max:.2g} ({worst.variant}, {worst['dtype']}), is {units.max():.2g} units of "
        "rounding."
    )


def dtype_rounding(dtype: str) -> str:
    """ "bfloat16 rounding (2^-8)": the dtype and its unit roundoff."""
    u = UNIT_ROUNDOFF.get(dtype)
    return f"{dtype} rounding (2^{round(math.log2(u))})" if u else f"{dtype} rounding"


def sweeps_verdict(conn: Connection) -> str:
    """How the newest run ended, and how many runs there are."""
    runs = sweeps(conn)
    if runs.empty:
        return "No sweep has run into this database."
    last = runs.iloc[0]
    failed = runs[runs.status != "finished"]
    said = f"{len(runs)} runs; the newest, #{int(last.id)} {last['name']}, {last.status}"
    said += f" with {int(last.n_ok):,} ok of {int(last.n_points):,} points"
    if len(failed):
        said += f"; {len(failed)} did not finish ({', '.join(f'#{int(i)}' for i in failed.id)})"
    return said + "."


def compare_itself(run: int) -> str:
    return f"Run #{run} against itself is 100% within noise by construction: that says nothing."


def compare(conn: Connection, *, run_a: int, run_b: int) -> str:
    """Whether run b reproduces run a, is faster or slower, over the points both timed."""
    if run_a == run_b:
        return compare_itself(run_a)
    return compare_sentence(compare_runs(conn, run_a, run_b).summary)


def compare_sentence(s: dict[str, Any]) -> str:
    """`compare`'s sentence from a comparison's summary (db.queries.compare_runs), for a page that holds
    the comparison already (computing it twice cost the Compare page 0.4 s at 100,000 rows)."""
    run_a, run_b = s["run_a"], s["run_b"]
    n = s["n_points"]
    if not n:
        return f"Runs #{run_a} and #{run_b} share no ok point."
    ratio = s["median_ratio_b_over_a"]
    if s["share_same"] >= 0.5 and abs(ratio - 1) <= NOISE:
        return (
            f"Run #{run_b} reproduces run #{run_a}: {s['share_same']:.0%} of {n:,} shared points within "
            f"noise, median time b / a {ratio:.3f}."
        )
    side = "faster" if ratio < 1 else "slower"
    return (
        f"Run #{run_b} is {side} than run #{run_a}: median time b / a {ratio:.3f} over {n:,} shared points "
        f"({s['n_faster']} faster, {s['n_slower']} slower beyond noise)."
    )


# ---- what the split-K table's why-columns need beyond splitk_best ----


def launch_geometry(conn: Connection, *, ids: list[int]) -> pd.DataFrame:
    """Per measurement id: occupancy (resident programs per SM), programs and programs per SM (programs
    over the GPU's SMs: tiles / tiles_per_sm)."""
    r = view("results")
    wanted = sorted({int(i) for i in ids if pd.notna(i)})
    stmt = select(r.c.id, r.c.occupancy, r.c.programs, r.c.tiles, r.c.tiles_per_sm).where(r.c.id.in_(wanted))
    df = frame(conn, stmt)
    sms = df.tiles.astype("float64") / df.tiles_per_sm.astype("float64")
    df["programs_per_sm"] = df.programs.astype("float64") / sms
    return df[["id", "occupancy", "programs", "programs_per_sm"]]
