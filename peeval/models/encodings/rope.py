"""RoPE (Su et al.) in transformers' ``rotate_half`` convention, so that a ``pe="rope"``
checkpoint and a ``LlamaForCausalLM`` with the same weights give the same logits.

Frequencies and scalings (linear, dynamic NTK, yarn, longrope, llama3) come from
transformers' own ``LlamaRotaryEmbedding`` / rope-init functions, configured through the
usual ``rope_theta`` / ``rope_scaling`` (``rope_parameters``) config fields.
"""

from __future__ import annotations

import torch
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, rotate_half

from .base import Encoding, PEContext


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, N, d); cos/sin (B, N, d)."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


class RoPE(Encoding):
    name = "rope"

    def __init__(self, config) -> None:
        super().__init__(config)
        self.rotary = LlamaRotaryEmbedding(config)

    def cos_sin(self, x: torch.Tensor, position_ids: torch.Tensor, ctx: PEContext | None = None):
        """cos/sin (B, N, d) for ``position_ids``, memoised per forward (all layers share them)."""
        key = ("rope_cos_sin", id(self))
        if ctx is not None and key in ctx.state:
            return ctx.state[key]
        cs = self.rotary(x, position_ids)
        if ctx is not None:
            ctx.state[key] = cs
        return cs

    def transform_qk(self, layer, q, k, ctx):
        cos, sin = self.cos_sin(q, ctx.position_ids, ctx)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

    def positional_state(self, layer, q, ctx):
        """Each position's rotation as TAPE's E (L=2, R=2, M=d/2 blocks of rotate_half's pairs):
        (B, H, N, 2, 2, M), the same for every layer."""
        cos, sin = self.cos_sin(q, ctx.position_ids, ctx)
        m = cos.shape[-1] // 2
        ca, cb, sa, sb = cos[..., :m], cos[..., m:], sin[..., :m], sin[..., m:]
        e = torch.stack([torch.stack([ca, sb], -2), torch.stack([-sa, cb], -2)], -3)  # (B, N, 2, 2, M)
        return e[:, None].expand(-1, q.shape[1], -1, -1, -1, -1)
