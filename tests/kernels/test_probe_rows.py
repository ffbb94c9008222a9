"""bench/probes' Rows: the CSV holds every row added so far after each one, so a probe killed at its
time limit keeps what it had measured."""

import csv

from bench.probes import Rows


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
