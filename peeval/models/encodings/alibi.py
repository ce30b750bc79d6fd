"""ALiBi (Press et al. 2022): a fixed per-head linear penalty on distance, no parameters.

bias_h(i, j) = −m_h·(i − j). Slopes: 2^(−8h/H), h = 1..H, for power-of-two H; otherwise
the slopes for 2^⌊log2 H⌋ followed by every other slope of the 2·2^⌊log2 H⌋ list (the
paper's recipe, as in its reference code). The slopes are flash-attn's ``alibi_slopes``.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from transformers import initialization as init

from .distance import DistanceBias


def alibi_slopes(num_heads: int) -> torch.Tensor:
    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    p = 2 ** math.floor(math.log2(num_heads))
    slopes = geometric(p) + geometric(2 * p)[0::2][: num_heads - p]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(DistanceBias):
    name = "alibi"
    shared_table = True

    def __init__(self, config) -> None:
        super().__init__(config)
        self.register_buffer("alibi_slopes", alibi_slopes(self.num_heads), persistent=False)

    def init_weights(self) -> None:
        init.copy_(self.alibi_slopes, alibi_slopes(self.num_heads))

    def bias(self, layer, ctx):
        return dataclasses.replace(super().bias(layer, ctx), alibi_slopes=self.alibi_slopes.float())

    def distance_table(self, layer, dist):
        return -self.alibi_slopes[:, None] * dist

    def reference_bias(self, layer, ctx):
        key = ("alibi_bias", id(self))  # the same for every layer: built once per forward
        if key not in ctx.state:
            dist = ctx.relative_positions().clamp(min=0).float()  # (B, Nq, Nk)
            ctx.state[key] = -self.alibi_slopes[None, :, None, None] * dist[:, None]
        return ctx.state[key]
