"""bench/probes/ncu_compare.py's reading of ncu's --csv output, in the format ncu 2025 wrote on the H200
(visit 130: its header, quoting, units and thousands separators)."""

import math

import pytest

from bench.probes.ncu_compare import metric_value, parse_ncu_csv, summarize

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _line(launch: int, kernel: str, metric: str, unit: str, value: str) -> str:
    fields = [str(launch), "820", "python3.12", "127.0.0.1", kernel, "1", "7", "(128, 1, 1)", "(128, 1, 1)"]
    fields += ["0", "9.0", "Command line profiler metrics", metric, unit, value]
    return ",".join(f'"{f}"' for f in fields)


# Two launches of the split-K product and its reduce, as visit 130 read 256x256x65536 (values its own)
LAUNCHES = [
    (0, "_splitk_tma_kernel", "24,896", "183,926,144", "1,776,477,418.79"),
    (1, "_reduce_splits_kernel", "3,712", "7,124,384", "1,960,668,103.45"),
    (2, "_splitk_tma_kernel", "24,928", "186,131,456", "1,775,933,337.23"),
    (3, "_reduce_splits_kernel", "3,680", "7,125,216", "1,969,729,907.77"),
    (4, "_splitk_tma_kernel", "24,896", "185,196,096", "1,779,478,230.64"),
]
OUTPUT = "\n".join(
    [
        "==PROF== Connected to process 820 (/opt/torch/.venv/bin/python3.12)",
        "==WARNING== Note: Running with unmodified GPU clocks.",
        HEADER,
        *(
            line
            for launch, kernel, ns, l2_bytes, hz in LAUNCHES
            for line in (
                _line(launch, kernel, "gpu__time_duration.sum", "ns", ns),
                _line(launch, kernel, "launch__cluster_dim_x", "", "2" if launch % 2 == 0 else "0"),
                _line(launch, kernel, "launch__shared_mem_per_block_dynamic", "byte/block", "196,640"),
                _line(launch, kernel, "lts__t_bytes.sum", "byte", l2_bytes),
                _line(launch, kernel, "sm__cycles_elapsed.avg.per_second", "hz", hz),
                _line(launch, kernel, "some__other_metric.sum", "", "7"),  # not a column: left out
            )
        ),
        "==PROF== Disconnected from process 820",
    ]
)


def test_each_launch_has_its_metrics_in_the_columns_units():
    launches = parse_ncu_csv(OUTPUT)
    assert [launch["kernel"] for launch in launches] == [kernel for _, kernel, *_ in LAUNCHES]
    first = launches[0]
    assert first["us"] == pytest.approx(24.896)
    assert first["l2_mb"] == pytest.approx(183.926144)
    assert first["sm_ghz"] == pytest.approx(1.77647741879)
    assert first["smem_kb"] == pytest.approx(196.64)
    assert first["cluster"] == 2
    assert "some__other_metric.sum" not in first and len(first) == 6


def test_a_row_per_kernel_in_first_run_order_with_medians():
    rows = summarize(parse_ncu_csv(OUTPUT))
    assert [(row["kernel"], row["launches"]) for row in rows] == [
        ("_splitk_tma_kernel", 3),
        ("_reduce_splits_kernel", 2),
    ]
    product, reduce = rows
    assert product["us"] == pytest.approx(24.896)  # median of 24.896, 24.928, 24.896
    assert product["l2_mb"] == pytest.approx(185.196096)
    assert reduce["us"] == pytest.approx(3.696)  # two launches: their mean
    assert math.isnan(product["tensor_busy_pct"])  # not in this output


def test_an_unknown_unit_is_an_error_and_output_without_a_header_too():
    assert metric_value("us", "ms", "1.5") == pytest.approx(1500.0)
    with pytest.raises(ValueError, match="unit 'cycle'"):
        metric_value("us", "cycle", "12")
    with pytest.raises(ValueError, match="no ncu CSV header"):
        parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
