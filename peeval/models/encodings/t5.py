"""T5 relative position bias (Raffel et al. 2020), causal: a learned scalar per (head, bucket).

Distances n = i − j ≥ 0 fall into ``num_buckets`` buckets: exact for n < num_buckets/2,
log-spaced beyond, up to ``max_distance`` (everything farther shares the last bucket).
As in T5, one table serves every layer, so the bias is built once per forward.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import initialization as init

from .base import Option, is_int
from .distance import DistanceBias


def causal_buckets(n: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """Bucket of each distance n >= 0 (T5's ``_relative_position_bucket``, bidirectional=False)."""
    n = n.clamp(min=0)
    max_exact = num_buckets // 2
    large = (
        max_exact
        + (
            torch.log(n.float().clamp(min=1) / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = large.clamp(max=num_buckets - 1)
    return torch.where(n < max_exact, n, large)


class T5Bias(DistanceBias):
    name = "t5"
    shared_table = True
    options = {
        "num_buckets": Option(32, check=is_int(2), help="an int >= 2"),
        "max_distance": Option(128, check=is_int(2), help="an int >= 2 (> num_buckets/2)"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        if self.opts["max_distance"] <= self.opts["num_buckets"] // 2:
            raise ValueError("pe_options['max_distance'] must exceed num_buckets/2 for pe='t5'")
        self.relative_attention_bias = nn.Embedding(self.opts["num_buckets"], self.num_heads)

    def init_weights(self) -> None:
        init.normal_(self.relative_attention_bias.weight, std=self.config.initializer_range)

    def distance_table(self, layer, dist):
        buckets = causal_buckets(dist.long(), self.opts["num_buckets"], self.opts["max_distance"])
        return self.relative_attention_bias(buckets).t()  # (H, D)

    def reference_bias(self, layer, ctx):
        key = ("t5_bias", id(self))  # one table for the whole model: built once per forward
        if key not in ctx.state:
            buckets = causal_buckets(ctx.relative_positions(), self.opts["num_buckets"], self.opts["max_distance"])
            ctx.state[key] = self.relative_attention_bias(buckets).permute(0, 3, 1, 2)  # (B, H, Nq, Nk)
        return ctx.state[key]
