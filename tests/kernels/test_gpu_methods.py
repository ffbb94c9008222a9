"""bench/gpu_methods' flushed graph time: a difference of two replayed graphs, taken in pairs so that a
clock drifting across the replays (an H200 under its power cap) cancels."""

import pytest

import bench.gpu_methods as gm


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

    paired = gm._paired_difference_ms(both, alone, replays=5)
    # the true difference is 2 ms, the clock 1-11% slow over the ten replays
    assert paired == pytest.approx(2.0 * 1.06, rel=0.03)
    assert [r.__name__ for r in replays] == ["both", "alone", "alone", "both"] * 2 + ["both", "alone"]
    replays.clear()
    blocks = gm._replay_ms(both, 5) - gm._replay_ms(alone, 5)  # the method before visit 116
    assert blocks == pytest.approx(12 * 1.03 - 10 * 1.08)  # 1.56 ms: 22% short of it
    assert abs(paired - 2.0) < abs(blocks - 2.0) / 3


def test_on_a_steady_clock_both_ways_read_the_same(monkeypatch):
    _drifting_gpu(monkeypatch, 0.0)
    assert gm._paired_difference_ms(lambda: 12.0, lambda: 10.0, replays=5) == 2.0
    assert gm._replay_ms(lambda: 12.0, 5) - gm._replay_ms(lambda: 10.0, 5) == 2.0
