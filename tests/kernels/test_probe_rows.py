"""bench/probes' Rows: the CSV holds every row added so far after each one, so a probe killed at its
time limit keeps what it had measured; and the command line every probe starts from."""

import csv
import os

import pytest

from bench.probes import Rows, probe_parser


def test_every_row_is_on_disk_as_soon_as_it_is_added(tmp_path):
    out = Rows(str(tmp_path / "probe.csv"), ("shape", "op", "us"))
    out.add("3072x3072x3072", "cublas", 74.1)
    assert list(csv.reader((tmp_path / "probe.csv").open())) == [
        ["shape", "op", "us"],
        ["3072x3072x3072", "cublas", "74.1"],
    ]
    out.add("3072x3072x3072", "bands", 89.2)
    rows = list(csv.reader((tmp_path / "probe.csv").open()))
    assert rows[1:] == [["3072x3072x3072", "cublas", "74.1"], ["3072x3072x3072", "bands", "89.2"]]
    assert out.rows == [("3072x3072x3072", "cublas", 74.1), ("3072x3072x3072", "bands", 89.2)]


def test_the_summary_takes_the_fastest_row_of_each_kind_per_shape(tmp_path):
    out = Rows(str(tmp_path / "probe.csv"), ("shape", "op", "graph_us", "do_bench_us"))
    for row in [
        ("512x512x32768", "cublas", 33.3, 36.5),
        ("512x512x32768", "reduce sk8", 40.4, 45.8),
        ("512x512x32768", "reduce sk16", 40.0, 60.4),  # the fastest in graphs, whatever do_bench read
        ("256x256x65536", "reduce sk16", 34.1, 65.6),
        ("256x256x65536", "splitk_tma sk16", 41.6, 44.4),
    ]:
        out.add(*row)
    lines = out.best_lines(("cublas", "reduce", "splitk_tma"))
    assert [line.split() for line in lines] == [
        ["shape", "op", "graph_us", "do_bench_us"],
        ["512x512x32768", "cublas", "33.3", "36.5"],
        ["512x512x32768", "reduce", "sk16", "40.0", "60.4"],
        ["256x256x65536", "reduce", "sk16", "34.1", "65.6"],
        ["256x256x65536", "splitk_tma", "sk16", "41.6", "44.4"],
    ]


def test_a_probe_writes_under_out_and_takes_a_budget_only_where_it_has_one(monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    timed = probe_parser("A probe.\n\nMore.", "probe.csv", budget_s=150)
    assert timed.description == "A probe."
    args = timed.parse_args([])
    assert (args.out, args.budget_s) == (os.path.join(str(tmp_path), "probe.csv"), 150)
    assert timed.parse_args(["--budget-s", "60", "--out", "x.csv"]).budget_s == 60
    with pytest.raises(SystemExit):
        probe_parser("A probe.", "probe.csv").parse_args(["--budget-s", "60"])
