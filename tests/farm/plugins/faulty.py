"""Plugin variants that fail the way real kernels do, for the farm's fault tests.

`kills_itself` ends its own process (as a segfault or a CUDA error's exit would) and `hangs`
never returns, both only for block_n == 32, so the sweep has healthy points of each as well.
"""

import os
import signal
import time

import torch

from kernels import MatmulConfig, get_variant, register_variant


@register_variant("kills_itself", config_space="tiled")
def kills_itself(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Dies with SIGKILL on block_n == 32."""
    if cfg.block_n == 32:
        os.kill(os.getpid(), signal.SIGKILL)
    return get_variant("tiled").launch(a, b, cfg)


@register_variant("hangs", config_space="tiled")
def hangs(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Never returns on block_n == 32."""
    while cfg.block_n == 32:
        time.sleep(1)
    return get_variant("tiled").launch(a, b, cfg)
