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
        if ctx.n_positions is not None:  # positions 0..n-1 by construction: checked without a host sync
            self.check_length(ctx.n_positions)
        elif ctx.position_bound is not None and torch.compiler.is_compiling():  # compiled: the shapes' bound
            self.check_length(ctx.position_bound)  # (a padded row's positions stop short of it)
        else:
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

    Every row of the table has RMS exactly 1/√2 (each sin/cos pair has squared norm 1), so
    a scale s makes the position signal's RMS s/√2 at every position. Vaswani et al. add the
    unscaled sinusoid to token embeddings multiplied by √C; the token embedding here is
    shared with ``LlamaForCausalLM``-style code (normal, std ``initializer_range``, not
    multiplied), so the default ``scale: init_std`` is √2·initializer_range: at initialisation
    the position signal's RMS equals the token embeddings' (ratio 1; Vaswani's is ≈ 0.7).
    ``scale: null`` is the previous default 1/√C (RMS 1/√(2C): 3.1× the tokens' at C=128,
    std 0.02), kept so checkpoints saved with it load unchanged; a number is used as given
    (``1``: the raw ±1 sinusoid, which swamps the tokens).
    """

    name = "sinusoidal"
    options = {
        "base": Option(10000, check=is_number(1), help="a number > 1"),
        "scale": Option(
            "init_std",
            check=lambda v: v is None or v == "init_std" or is_number(0)(v),
            help="'init_std' (√2·initializer_range: the position signal's RMS equals the token embeddings' "
            "init std), a number > 0, or null (1/√C, the previous default)",
        ),
    }

    def position_scale(self, width: int) -> float:
        """The factor multiplying the ±1 sinusoid of ``width`` channels."""
        scale = self.opts["scale"]
        if scale == "init_std":
            return 2**0.5 * self.config.initializer_range
        return width**-0.5 if scale is None else float(scale)

    def embed(self, hidden: torch.Tensor, ctx: PEContext) -> torch.Tensor:
        pos = ctx.position_ids
        # one table row per distinct position, then gather (0..n-1 known from the shapes: no host sync)
        bound = ctx.n_positions if ctx.n_positions is not None else ctx.position_bound
        lo, hi = (0, bound - 1) if bound is not None else (int(pos.min()), int(pos.max()))
        table = sinusoid(torch.arange(lo, hi + 1, device=pos.device), hidden.shape[-1], float(self.opts["base"]))
        return hidden + (self.position_scale(hidden.shape[-1]) * table[pos - lo]).to(hidden.dtype)
