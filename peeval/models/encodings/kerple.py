"""KERPLE (Chi et al. 2022): conditionally positive definite kernels of the distance.

log:   bias_h(i, j) = −r1_h·log(1 + r2_h·(i − j))
power: bias_h(i, j) = −r1_h·(i − j)^r2_h, r2 ∈ (0, 2]
r1 (the multiplier) and r2 (the inner scale, resp. the exponent) are learnable per head and
used clamped to >= 0.01 (and r2 <= 2 for power). As in the authors' code (chijames/KERPLE,
``ParallelKerpleLog`` / ``ParallelKerplePower``):
- initialisation: the parameter they call p ~ U(0, 2), a ~ U(0, 1). In the log kernel p is
  the multiplier (r1 ~ U(0, 2), r2 ~ U(0, 1)); in the power kernel p is the exponent
  (r2 ~ U(0, 2)) and a the multiplier (r1 ~ U(0, 1));
- one kernel module is built once and handed to every layer, so by default all layers share
  one (r1, r2) per head (``share_layers``); ``share_layers: false`` gives each layer its own.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

from .base import BOOL, Option
from .distance import DistanceBias

EPS = 1e-2


class Kerple(DistanceBias):
    name = "kerple"
    options = {
        "variant": Option("log", ("log", "power"), help="the kernel: log or power"),
        "share_layers": Option(True, BOOL, help="one kernel for all layers (the reference) or one per layer"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        n = 1 if self.opts["share_layers"] else self.num_layers
        self.r1 = nn.Parameter(torch.empty(n, self.num_heads))
        self.r2 = nn.Parameter(torch.empty(n, self.num_heads))

    def init_weights(self) -> None:
        if self.opts["variant"] == "power":  # exponent p ~ U(0, 2), multiplier a ~ U(0, 1)
            init.uniform_(self.r1, 0.0, 1.0)
            init.uniform_(self.r2, 0.0, 2.0)
        else:  # multiplier p ~ U(0, 2), inner scale a ~ U(0, 1)
            init.uniform_(self.r1, 0.0, 2.0)
            init.uniform_(self.r2, 0.0, 1.0)

    def kernel_params(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(r1, r2) of ``layer`` as used: clamped to the kernel's valid range."""
        row = 0 if self.opts["share_layers"] else layer
        r1 = self.r1[row].clamp(min=EPS)
        r2 = self.r2[row].clamp(min=EPS, max=2.0 if self.opts["variant"] == "power" else None)
        return r1, r2

    def distance_table(self, layer, dist):
        r1, r2 = (p[:, None] for p in self.kernel_params(layer))
        if self.opts["variant"] == "log":
            return -r1 * torch.log1p(r2 * dist)
        return -r1 * dist.pow(r2)

    def reference_bias(self, layer, ctx):
        key = ("kerple_bias", id(self), 0 if self.opts["share_layers"] else layer)  # shared: once per forward
        if key not in ctx.state:
            dist = ctx.relative_positions().clamp(min=0).float()[:, None]  # (B, 1, Nq, Nk)
            r1, r2 = (p[None, :, None, None] for p in self.kernel_params(layer))
            if self.opts["variant"] == "log":
                ctx.state[key] = -r1 * torch.log1p(r2 * dist)
            else:
                ctx.state[key] = -r1 * dist.pow(r2)
        return ctx.state[key]
