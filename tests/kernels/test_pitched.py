"""`kernels.pitched.pitched_copy`: odd rows copied into rows 128 B apart, padding zeroed, any source
layout; its compiled kernel called directly only for a known key."""

import pytest
import torch
from kernelkit import StandInKernel

import kernels.pitched as pitched
from kernels.launching import DirectCalls


def _source(shape, dtype, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _whole_rows(dst: torch.Tensor) -> torch.Tensor:
    """dst with its padding columns: (rows, pitch)."""
    return dst.as_strided((dst.shape[0], dst.stride(0)), (dst.stride(0), 1))


SOURCES = {
    # 1100 columns: two column blocks of COPY_BLOCK, the second partly past the source's last
    "odd-bf16": lambda dev: _source((3, 1100), torch.bfloat16, dev),
    "odd-fp16": lambda dev: _source((5, 71), torch.float16, dev),
    "odd-fp32": lambda dev: _source((4, 33), torch.float32, dev),
    "column-major": lambda dev: _source((45, 7), torch.bfloat16, dev).t(),
    "view-at-odd-offset": lambda dev: _source((6, 90), torch.bfloat16, dev)[1:, 3:80],
    "one-row": lambda dev: _source((1, 5), torch.float16, dev),
}


@pytest.mark.parametrize("name", list(SOURCES))
def test_pitched_copy_copies_every_value_and_zeroes_the_padding(device, name, monkeypatch):
    src = SOURCES[name](device)
    made, aligned_rows = [], pitched.aligned_rows

    def aligned_rows_filled_with_nan(*args, **kwargs):  # a column left unwritten stays NaN
        made.append(aligned_rows(*args, **kwargs))
        _whole_rows(made[-1]).fill_(float("nan"))
        return made[-1]

    monkeypatch.setattr(pitched, "aligned_rows", aligned_rows_filled_with_nan)
    dst = pitched.pitched_copy(src)
    assert made == [dst] and (dst.stride(0) * dst.element_size()) % pitched.PAD_PITCH_BYTES == 0
    assert torch.equal(dst, src)
    padding = _whole_rows(dst)[:, src.shape[1] :]
    assert padding.numel() > 0 and torch.equal(padding, torch.zeros_like(padding))


def test_pitched_copy_goes_direct_only_for_a_known_key(device, monkeypatch):
    kernel = StandInKernel(pitched._copy_rows_kernel.arg_names)
    calls = DirectCalls(kernel)
    monkeypatch.setattr(pitched, "_COPIES", calls)
    base = _source((4, 80), torch.bfloat16, device)

    pitched.pitched_copy(base[:, :33])
    # the same sizes and strides, but starting 2 B in: Triton's path again, under a second key
    pitched.pitched_copy(base[:, 1:34])
    assert len(kernel.jit_calls) == 2 and kernel.compiled.calls == [] and len(calls.table) == 2
    # 32 B in: the first call's key, so the compiled kernel directly
    pitched.pitched_copy(base[:, 16:49])
    assert len(kernel.jit_calls) == 2
    (call,) = kernel.compiled.calls
    assert call[2:] == (4, 33, 80, 1, 64, pitched.COPY_BLOCK)  # rows, cols, strides, pitch, BLOCK
    assert kernel.compiled.grids == [(4, 1, 1)] * 2  # a runner kept for each of the two keys
