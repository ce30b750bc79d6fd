"""The learning-rate schedule and the data order: both pure functions of (settings, seed, step), so a
resumed run (or one split over several processes) follows an uninterrupted one exactly."""

from __future__ import annotations

import math

import torch


def lr_lambda(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup to 1, then cosine decay to ``min_ratio`` at ``total`` steps."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    prog = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * prog))


def perm_cache(n_blocks: int, seed: int):
    """``get(epoch)``: the seeded permutation of the training rows for that epoch (cached)."""
    cache: dict[int, torch.Tensor] = {}

    def get(epoch: int) -> torch.Tensor:
        if epoch not in cache:
            cache[epoch] = torch.randperm(n_blocks, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
        return cache[epoch]

    return get
