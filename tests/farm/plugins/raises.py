"""A plugin whose launcher raises before launching anything, as a launcher's own check does."""

import torch

from kernels import MatmulConfig, register_variant


@register_variant("raises", config_space="tiled")
def launch(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Refuses every call."""
    raise RuntimeError(f"raises: refused {a.shape[0]}x{b.shape[1]} with {cfg.key}")
