"""Absolute encodings added to the token embeddings: ``learned`` (GPT-2) and
``sinusoidal`` (Vaswani et al. 2017).

Both read ``ctx.position_ids``, so left padding, the KV cache and ``random_offset`` all
index positions the same way the attention does. Given an ``attention_mask`` but no
``position_ids``, the model derives them from the mask as HF's ``generate`` does
(cumsum(mask) − 1), so pad tokens are not counted as positions: a left-padded row gets the
positions it has alone.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

from .base import Encoding, Option, PEContext, is_int, is_number


class LearnedPE(Encoding):
    """A trainable (``max_positions``, C) table; it has no row for longer positions, so asking
    for one raises instead of silently clamping (SPEC 2.1). ``max_positions`` defaults to the
    training length (max_position_embeddings); a larger table (GPT-2's 1024 rows trained on
    shorter texts) lets a length sweep run past the training length, where the rows were
    initialised but never trained: the honest "learned does not extrapolate" number."""

    name = "learned"
    options = {
        "max_positions": Option(
            None, check=lambda v: v is None or is_int(1)(v), help="null (= max_position_embeddings) or an int >= 1"
        ),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        rows = self.opts["max_positions"] or config.max_position_embeddings
        self.wpe = nn.Embedding(rows, config.hidden_size)

    def check_length(self, length: int) -> None:
        size = self.wpe.num_embeddings
        if length > size:
            raise ValueError(
                f"pe='learned' has a position table of {size} rows (max_position_embeddings="
                f"{self.config.max_position_embeddings}, pe_options max_positions={self.opts['max_positions']}), but "
                f"{length} positions were asked for: a learned absolute embedding cannot "
                "extrapolate (use a shorter input or another encoding)"
            )

    def embed(self, hidden: torch.Tensor, ctx: PEContext) -> torch.Tensor:
        pos = ctx.position_ids
        if int(pos.min()) < 0:
            raise ValueError(f"pe='learned': negative position id {int(pos.min())}")
        self.check_length(int(pos.max()) + 1)
        return hidden + self.wpe(pos).to(hidden.dtype)

    def set_generation_length(self, total_length: int | None) -> None:
        """Fail before decoding anything rather than at the first step past the table."""
        if total_length is not None:
            self.check_length(total_length)

    def init_weights(self) -> None:
        init.normal_(self.wpe.weight, mean=0.0, std=self.config.initializer_range)


def sinusoid(positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    """(...) -> (..., dim) float32: even channels sin(p·ω_i), odd cos(p·ω_i),
    ω_i = base^(-2i/dim) (Vaswani et al. §3.5). Angles in float64, exact for long positions."""
    omega = base ** (-torch.arange(0, dim, 2, device=positions.device, dtype=torch.float64) / dim)
    ang = positions.double()[..., None] * omega
    return torch.stack((ang.sin(), ang.cos()), dim=-1).flatten(-2)[..., :dim].float()


class SinusoidalPE(Encoding):
    """Fixed, computed on the fly for any position (so it extrapolates); no parameters.

    Vaswani et al. multiply the token embeddings by √C before adding the sinusoid; the token
    embedding here is shared with ``LlamaForCausalLM``-style code (std 0.02), so the sinusoid
    is scaled by 1/√C instead (``scale``, as x-transformers does), which keeps their
    token : position ratio. Unscaled (``scale: 1``), the ±1 sinusoid swamps the tokens and a
    small model stays at unigram perplexity.
    """

    name = "sinusoidal"
    options = {
        "base": Option(10000, check=is_number(1), help="a number > 1"),
        "scale": Option(None, check=lambda v: v is None or is_number(0)(v), help="a number > 0, or null: 1/√C"),
    }

    def embed(self, hidden: torch.Tensor, ctx: PEContext) -> torch.Tensor:
        pos = ctx.position_ids
        lo, hi = int(pos.min()), int(pos.max())  # one table row per distinct position, then gather
        table = sinusoid(torch.arange(lo, hi + 1, device=pos.device), hidden.shape[-1], float(self.opts["base"]))
        scale = self.opts["scale"] if self.opts["scale"] is not None else hidden.shape[-1] ** -0.5
        return hidden + (scale * table[pos - lo]).to(hidden.dtype)
