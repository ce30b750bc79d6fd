"""Biases that are a per-head function of the distance i − j alone (alibi, t5, kerple).

Such a bias is fully described by a table over the distances that occur, (H, D): the
encoding's formula runs O(N·H) times instead of O(N²·H), and the same table serves the
blocked back-end (a gather per query block, rebuilt in the backward pass) and
FlexAttention (an index per entry). ``reference_bias`` stays the plain N×N formula (eager).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from .base import Encoding, PEContext, PositionBias


def distance_count(ctx: PEContext) -> int:
    """How many distances 0..D−1 a table needs for this forward: the bound the shapes give
    (``ctx.max_distance``: no host sync, so a compiled forward has no graph break; issue 57), else
    read from the positions (memoised: one sync). Entries past the largest distance are never read."""
    if ctx.max_distance is not None:
        return ctx.max_distance
    key = "distance_count"
    if key not in ctx.state:
        far = (ctx.position_ids.max() - ctx.key_position_ids.min()).clamp(min=0)
        ctx.state[key] = int(far) + 1
    return ctx.state[key]


def block_distances(rows: slice, keys: slice, qpos: torch.Tensor, kpos: torch.Tensor) -> torch.Tensor:
    """(B, r, k) distances i − j of a block, clamped at 0 (negative ones are masked anyway)."""
    return (qpos[:, rows, None] - kpos[:, None, keys]).clamp(min=0)


def gather_block(rows: slice, keys: slice, table: torch.Tensor, qpos: torch.Tensor, kpos: torch.Tensor):
    """Block (B, H, r, k) of the bias table[h, i − j]; index_select keeps the backward a fast index_add."""
    rel = block_distances(rows, keys, qpos, kpos)
    b, r, k = rel.shape
    return table.index_select(1, rel.reshape(-1)).view(-1, b, r, k).transpose(0, 1)


class DistanceBias(Encoding):
    """An encoding whose bias is ``distance_table(layer, d)[h, i − j]``."""

    #: one table serves every layer (built once per forward)
    shared_table: ClassVar[bool] = False

    def distance_table(self, layer: int, dist: torch.Tensor) -> torch.Tensor:
        """(H, D) bias at the float distances ``dist`` (D,) >= 0."""
        raise NotImplementedError

    def table(self, layer: int, ctx: PEContext) -> torch.Tensor:
        key = ("distance_table", id(self), None if self.shared_table else layer)
        if key not in ctx.state:
            dist = torch.arange(distance_count(ctx), device=ctx.position_ids.device).float()
            ctx.state[key] = self.distance_table(layer, dist)
        return ctx.state[key]

    def reference_bias(self, layer: int, ctx: PEContext) -> torch.Tensor:
        """(B|1, H, Nq, Nk) the formula on every pair: the eager reference (by default the table
        read at every pair; alibi, t5 and kerple evaluate their formulas directly)."""
        nq, nk = ctx.query_length, ctx.key_length
        return gather_block(slice(0, nq), slice(0, nk), self.table(layer, ctx), ctx.position_ids, ctx.key_position_ids)

    # -- the ``triton`` back-end: w[h, i − j] built inside peeval.kernels.bias_attention ------
    #: the kernel reads distances from the indices: never offered for remapped (randpe) positions
    index_distances: ClassVar[bool] = True
    #: padded keys masked in the kernel: the real tokens' distances are their indices' difference (left or
    #: right padding, position ids contiguous over the real tokens)
    fused_padding: ClassVar[bool] = True

    def fused_kernel(self, q):
        return self.fused_attention if q.dtype in (torch.float32, torch.float16, torch.bfloat16) else None

    def fused_attention(self, layer, q, k, v, ctx, key_valid=None):
        """The table (H, D) padded to N distances; its gradient reaches the parameters through torch."""
        from ...kernels.bias_attention import bias_attention

        w = self.table(layer, ctx)
        n = q.shape[2]
        if w.shape[1] < n:  # distances past the data's largest never occur; zeros keep the shape
            w = torch.nn.functional.pad(w, (0, n - w.shape[1]))
        return bias_attention(q, k, v, w, key_valid, self.scale())

    def bias(self, layer, ctx):
        return PositionBias(
            gather_block,
            (self.table(layer, ctx), ctx.position_ids, ctx.key_position_ids),
            element_fn=table_entry,
            dense_fn=lambda: self.reference_bias(layer, ctx),
        )


def table_entry(b, h, q_idx, kv_idx, table, qpos, kpos):
    """table[h, i − j] of one entry (FlexAttention's indices)."""
    return table[h, (qpos[b, q_idx] - kpos[b, kv_idx]).clamp(min=0)]
