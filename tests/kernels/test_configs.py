"""Config keys are stable, config spaces are data, pruning rules say why they drop a config."""

import json

import pytest
import torch

from kernels import LIBRARY_CONFIG, MatmulConfig, Problem, get_variant, register_variant
from kernels.registry import _REGISTRY
from kernels.space import (
    blocks_fit_problem,
    fits_registers,
    fits_shared_memory,
    fits_shared_memory_tma,
    grouping_matters,
    pipeline_fits_k_loop,
    precision_applies,
    split_chunks_fill,
    warps_have_work,
)
from kernels.tuned import TunedConfigs


def test_config_keys_are_stable():
    cfg = MatmulConfig(block_m=64, block_n=128, block_k=32, group_m=8, split_k=1, num_warps=4, num_stages=3)
    assert cfg.key == "bm64_bn128_bk32_gm8_sk1_w4_s3_ieee"
    assert cfg.replace(input_precision="tf32", extras=(("swizzle", 2),)).key == (
        "bm64_bn128_bk32_gm8_sk1_w4_s3_tf32_swizzle=2"
    )
    assert LIBRARY_CONFIG.key == "library_ieee"
    assert MatmulConfig.from_dict(cfg.as_dict()) == cfg


BF16 = torch.bfloat16
RULE_CASES = [
    pytest.param(
        fits_shared_memory,
        MatmulConfig(256, 256, 128, num_warps=8, num_stages=4),
        Problem(4096, 4096, 4096, BF16),
        "needs 524288 B of shared memory > 232448",
        id="smem",
    ),
    pytest.param(
        fits_shared_memory,
        MatmulConfig(128, 128, 64, num_stages=4),
        Problem(4096, 4096, 4096, BF16),
        None,
        id="smem-fits",
    ),
    pytest.param(
        fits_registers,
        MatmulConfig(128, 256, 32, num_warps=4),
        Problem(4096, 4096, 4096, BF16),
        "256 accumulator registers per thread",
        id="registers",
    ),
    pytest.param(
        blocks_fit_problem,
        MatmulConfig(128, 64, 32),
        Problem(40, 4096, 4096, BF16),
        "block_m=128 exceeds the problem (40)",
        id="block-over-m",
    ),
    pytest.param(
        blocks_fit_problem,
        MatmulConfig(64, 64, 32),
        Problem(40, 4096, 4096, BF16),
        None,
        id="block-next-pow2-ok",
    ),
    pytest.param(
        split_chunks_fill,
        MatmulConfig(64, 64, 64, split_k=16),
        Problem(512, 512, 512, BF16),
        "K/split_k = 32 < block_k=64",
        id="chunk-under-block",
    ),
    pytest.param(
        split_chunks_fill,
        MatmulConfig(64, 64, 16, split_k=4),
        Problem(512, 512, 80, BF16),
        "split_k=4 leaves empty chunks at K=80, block_k=16",
        id="empty-chunks",
    ),
    pytest.param(
        split_chunks_fill,
        MatmulConfig(64, 64, 32, split_k=4),
        Problem(512, 512, 256, BF16),
        None,
        id="chunks-fill",
    ),
    pytest.param(
        grouping_matters,
        MatmulConfig(64, 128, 32, group_m=8),
        Problem(4096, 128, 4096, BF16),
        "group_m > 1 with a single tile column is the ungrouped order",
        id="one-column",
    ),
    pytest.param(
        grouping_matters,
        MatmulConfig(64, 64, 32, group_m=8),
        Problem(256, 4096, 4096, BF16),
        "group_m=8 > 4 tile rows (same order as group_m=4)",
        id="group-over-rows",
    ),
    pytest.param(
        pipeline_fits_k_loop,
        MatmulConfig(64, 64, 128, split_k=16, num_stages=5),
        Problem(512, 512, 4096, BF16),
        "num_stages=5 > 2 K iterations + 1",
        id="stages-over-k-loop",
    ),
    pytest.param(
        pipeline_fits_k_loop,
        MatmulConfig(64, 64, 128, split_k=8, num_stages=5),
        Problem(512, 512, 4096, BF16),
        None,
        id="stages-fit-k-loop",
    ),
    pytest.param(
        warps_have_work,
        MatmulConfig(16, 64, 64, num_warps=8),
        Problem(16, 4096, 4096, BF16),
        "8 warps for 4 accumulators per thread",
        id="eight-warps-tiny-tile",
    ),
    pytest.param(
        warps_have_work, MatmulConfig(64, 64, 64, num_warps=8), Problem(64, 64, 64, BF16), None, id="warps-ok"
    ),
    pytest.param(
        fits_shared_memory_tma,
        MatmulConfig(128, 256, 64, num_warps=8, num_stages=4),
        Problem(4096, 4096, 4096, BF16),
        None,  # 196,608 B of stages + 32,768 B for half a C tile = 229,376 B
        id="tma-smem-fits",
    ),
    pytest.param(
        fits_shared_memory_tma,
        MatmulConfig(256, 256, 64, num_warps=8, num_stages=3),
        Problem(4096, 4096, 4096, BF16),
        "needs 262144 B of shared memory > 232448",
        id="tma-smem-epilogue",
    ),
    pytest.param(
        precision_applies,
        MatmulConfig(input_precision="tf32"),
        Problem(64, 64, 64, BF16),
        "input_precision applies to float32 inputs only",
        id="tf32-on-bf16",
    ),
]


@pytest.mark.parametrize(("rule", "cfg", "problem", "reason"), RULE_CASES)
def test_pruning_rules(rule, cfg, problem, reason):
    assert rule(cfg, problem) == reason


def test_variant_configs_use_the_axes_they_have():
    axes = {
        "block_m": [32, 64],
        "block_n": [64],
        "block_k": [32],
        "group_m": [1, 4],
        "split_k": [1, 4],
        "num_warps": [4],
        "num_stages": [3],
    }
    grouped = get_variant("grouped").configs(256, 512, 1024, "bfloat16", axes)
    # 2 block_m x 2 group_m; split_k is not a grouped axis and keeps its default of 1.
    assert [(c.block_m, c.group_m, c.split_k) for c in grouped] == [
        (32, 1, 1),
        (32, 4, 1),
        (64, 1, 1),
        (64, 4, 1),
    ]
    tiled = get_variant("tiled").configs(256, 512, 1024, "bfloat16", axes)
    assert {c.group_m for c in tiled} == {1} and len(tiled) == 2
    splitk = get_variant("splitk").configs(256, 512, 1024, "bfloat16", axes)
    assert len(splitk) == 8 and {c.split_k for c in splitk} == {1, 4}


@pytest.mark.parametrize("variant", ["grouped", "persistent_tma", "splitk"])
def test_a_single_tile_row_keeps_its_configs_at_group_m_1(variant):
    """group_m 8 alone at 16 tokens (one tile row of 16): every order is group_m 1's, so the
    configs are kept as group_m 1 (visit 24's llm sweep had no Triton point at 16 tokens), once."""
    axes = {"block_m": [16], "block_n": [128], "block_k": [64], "num_warps": [4], "num_stages": [4]}
    only_8 = get_variant(variant).configs(16, 4096, 4096, "bfloat16", {**axes, "group_m": [8]})
    both = get_variant(variant).configs(16, 4096, 4096, "bfloat16", {**axes, "group_m": [1, 8]})
    assert only_8 and {c.group_m for c in only_8} == {1}
    assert both == only_8  # group_m 8 is the same config, not a second one
    # several tile rows and columns: group_m 8 stays what it is
    wide = get_variant(variant).configs(1024, 4096, 4096, "bfloat16", {**axes, "group_m": [8]})
    assert {c.group_m for c in wide} == {8}


@pytest.mark.parametrize("variant", ["grouped", "persistent_tma"])
def test_a_group_taller_than_the_grid_is_the_grid_s_rows(variant):
    """128 tokens in 64-row tiles: 2 tile rows, so group_m 8 walks the grid as group_m 2 does."""
    axes = {"block_m": [64], "block_n": [128], "block_k": [64], "num_warps": [4], "num_stages": [4]}
    tall = get_variant(variant).configs(128, 4096, 4096, "bfloat16", {**axes, "group_m": [8]})
    assert [c.group_m for c in tall] == [2]
    both = get_variant(variant).configs(128, 4096, 4096, "bfloat16", {**axes, "group_m": [2, 8]})
    assert both == tall


def test_library_baseline_has_one_config_per_precision():
    cublas = get_variant("cublas")
    assert cublas.configs(64, 64, 64, "bfloat16", {"input_precision": ["ieee", "tf32"]}) == [LIBRARY_CONFIG]
    fp32 = cublas.configs(64, 64, 64, torch.float32, {"input_precision": ["ieee", "tf32"]})
    assert [c.input_precision for c in fp32] == ["ieee", "tf32"]


def test_shared_memory_limit_comes_from_the_caller():
    axes = {"block_m": [128], "block_n": [128], "block_k": [64], "num_stages": [3, 4], "num_warps": [8]}
    roomy = get_variant("tiled").configs(4096, 4096, 4096, BF16, axes)
    small = get_variant("tiled").configs(4096, 4096, 4096, BF16, axes, smem_limit=101_376)  # an sm_86 GPU
    assert [c.num_stages for c in roomy] == [3, 4]
    assert [c.num_stages for c in small] == [3]  # 4 stages need 131072 B


def test_plugins_register_like_built_ins(tmp_path):
    try:

        @register_variant("test_plugin_grouped", config_space="grouped")
        def launch(a, b, cfg):
            """A plugin that reuses the grouped space."""
            return a @ b

        variant = get_variant("test_plugin_grouped")
        assert (
            variant.space.name == "grouped"
            and variant.description == "A plugin that reuses the grouped space."
        )
        assert variant.source_file == __file__
        with pytest.raises(ValueError, match="already registered"):
            register_variant("grouped", config_space="grouped")(launch)
        with pytest.raises(ValueError, match="unknown config space 'nope'"):
            register_variant("x_plugin", config_space="nope")
        with pytest.raises(ValueError, match="must be an identifier"):
            register_variant("my variant", config_space="tiled")
    finally:
        _REGISTRY.pop("test_plugin_grouped", None)


def test_exported_best_configs_load_into_launchers(tmp_path):
    cfg = MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=4)
    entry = lambda m, variant, ms, c: {
        "gpu_name": "NVIDIA H200",
        "dtype": "bfloat16",
        "m": m,
        "n": 4096,
        "k": 4096,
        "variant": variant,
        "ms": ms,
        "tflops": 1.0,
        "config": c.as_dict(),
    }
    path = tmp_path / "best.json"
    path.write_text(
        json.dumps(
            {
                "format": "triton-matmul-farm/best-configs",
                "version": 1,
                "entries": [
                    entry(4096, "grouped", 0.20, cfg),
                    entry(4096, "tiled", 0.25, cfg.replace(group_m=1)),
                    entry(512, "splitk", 0.05, cfg.replace(split_k=4)),
                ],
            }
        )
    )
    tuned = TunedConfigs.load(path)
    assert tuned.lookup(4096, 4096, 4096, BF16) == ("grouped", cfg)
    assert tuned.lookup(600, 4096, 4096, "bfloat16") == ("splitk", cfg.replace(split_k=4))  # nearest shape
    assert tuned.lookup(4096, 4096, 4096, BF16, variant="tiled") == ("tiled", cfg.replace(group_m=1))
    with pytest.raises(LookupError):
        tuned.lookup(64, 64, 64, torch.float16)
