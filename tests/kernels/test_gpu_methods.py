"""bench/gpu_methods' flushed graph time: a difference of two replayed graphs, taken in pairs so that a
clock drifting across the replays (an H200 under its power cap) cancels."""

import pytest

import tools.gpu_methods as gm


def _drifting_gpu(monkeypatch, slowdown_per_replay: float):
    """Replays timed on a GPU whose clock falls `slowdown_per_replay` a replay: the flushed call takes
    12 ms at the start, the flushes alone 10."""
    replays = []

    def timed_ms(replay) -> float:
        replays.append(replay)
        return replay() * (1 + slowdown_per_replay * len(replays))

    monkeypatch.setattr(gm, "_timed_ms", timed_ms)
    return replays


def test_the_paired_difference_cancels_a_drifting_clock_that_two_blocks_of_replays_read(monkeypatch):
    replays = _drifting_gpu(monkeypatch, 0.01)

    def both():
        return 12.0

    def alone():
        return 10.0

    paired = gm._interleaved_differences_ms({"both": both}, alone, rounds=5)["both"]
    # the true difference is 2 ms, the clock 1-11% slow over the ten replays
    assert paired == pytest.approx(2.0 * 1.06, rel=0.03)
    assert [r.__name__ for r in replays] == ["both", "alone", "alone", "both"] * 2 + ["both", "alone"]
    replays.clear()
    blocks = gm._replay_ms(both, 5) - gm._replay_ms(alone, 5)  # the method before visit 116
    assert blocks == pytest.approx(12 * 1.03 - 10 * 1.08)  # 1.56 ms: 22% short of it
    assert abs(paired - 2.0) < abs(blocks - 2.0) / 3


def test_on_a_steady_clock_both_ways_read_the_same(monkeypatch):
    _drifting_gpu(monkeypatch, 0.0)
    assert gm._interleaved_differences_ms({"x": lambda: 12.0}, lambda: 10.0, rounds=5) == {"x": 2.0}
    assert gm._replay_ms(lambda: 12.0, 5) - gm._replay_ms(lambda: 10.0, 5) == 2.0


def test_rivals_timed_together_see_the_same_clocks(monkeypatch):
    """Two graphs of one kernel (12 ms with the flushes, 10 without) and a faster rival on a clock that
    falls 1% a replay: replayed in rotated rounds, each difference within its round, the two read the
    same and the rival reads its own gap; timed one after the other (each contender's pairs in its
    turn, as before visit 117) the second copy of the kernel reads 15% longer than the first."""
    replays = _drifting_gpu(monkeypatch, 0.01)
    ours, cublas, rival = (lambda: 12.0), (lambda: 12.0), (lambda: 11.0)
    together = gm._interleaved_differences_ms(
        {"ours": ours, "cublas": cublas, "rival": rival}, lambda: 10.0, 8
    )
    assert together["ours"] == pytest.approx(together["cublas"], rel=0.03)
    assert together["rival"] == pytest.approx(together["ours"] / 2, rel=0.1)
    assert len(replays) == 4 * 8
    replays.clear()
    apart = {
        name: gm._interleaved_differences_ms({name: fn}, lambda: 10.0, 8)[name]
        for name, fn in (("ours", ours), ("cublas", cublas))
    }
    assert apart["cublas"] / apart["ours"] > 1.1


def test_a_rival_that_cannot_be_captured_is_reported_and_the_rest_timed_together(monkeypatch):
    """Inductor's callable or a launcher that syncs fails its capture: the row keeps its rivals' GPU times."""
    _drifting_gpu(monkeypatch, 0.0)
    ran: list[str] = []

    def captured(body):
        ran.clear()
        body()  # the flushes and calls, as capture runs them
        if "bad" in ran:
            raise RuntimeError("operation not permitted when stream is capturing")
        ms = 10.0 + 2.0 * len(ran)  # the flushes alone 10 ms; a rival's call 2 ms more
        return type("Graph", (), {"replay": staticmethod(lambda: ms)})

    monkeypatch.setattr(gm, "captured", captured)
    flush = object.__new__(gm.Flush)  # no 256 MB buffer: the fake capture only counts the calls
    flush.buffer = type("Buffer", (), {"zero_": lambda self: None})()
    fns = {"ours": lambda: ran.append("ours"), "bad": lambda: ran.append("bad")}
    reported = []
    times = flush.graphs_flushed_us(fns, calls=1, replays=3, on_capture_error=lambda n, e: reported.append(n))
    assert reported == ["bad"] and times == {"ours": pytest.approx(2000.0)}
    with pytest.raises(RuntimeError, match="capturing"):
        flush.graphs_flushed_us(fns, calls=1, replays=3)
