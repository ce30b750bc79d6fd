"""Randomized positions (Ruoss et al. 2023): the base encoding sees, instead of 0..N−1,
a sorted random subset of [0, L), L = ``max_positions``, so that in training it meets
every position up to L and at test time a longer input still uses known positions.

Only the positions change: ``ctx.position_ids`` / ``ctx.key_position_ids`` are remapped
(position p -> table[p]) and every hook is delegated to the base encoding, a submodule
(``self.base``; the model's init reaches its ``init_weights`` directly).

- training: a fresh draw per forward (torch's global RNG), one subset shared by the
  rows of the batch (as the reference; keeps bias encodings at (1, H, N, N));
- evaluation: a seeded draw (``seed``) that depends only on the length, so the same input
  always gets the same positions;
- KV-cache generation: the model calls ``set_generation_length(total)`` first, the draw is
  made once for ``total`` and earlier positions never move. A cached call (past > 0)
  without it raises rather than mixing positions drawn for different lengths.
L smaller than the length asked for raises (never a silent fallback).
"""

from __future__ import annotations

import copy

import torch

from . import get_encoding_class
from .base import Encoding, Option, PEContext, is_int

#: encodings whose contribution depends on the position ids (``nope``/``cope`` do not)
BASES = ("rope", "xpos", "sinusoidal", "learned", "alibi", "fire", "t5", "kerple", "pope", "tape")


def draw_positions(n: int, max_positions: int, generator=None, device=None) -> torch.Tensor:
    """A sorted uniformly random n-subset of [0, max_positions), (n,) long, on ``device``
    (the generator's device, the CPU for the seeded evaluation draw)."""
    scores = torch.rand(max_positions, generator=generator, device=device)
    return scores.topk(n).indices.sort().values


class RandPE(Encoding):
    name = "randpe"
    options = {
        "base": Option("rope", choices=BASES),
        "max_positions": Option(32768, check=is_int(1), help="an int >= 1 (L)"),
        "seed": Option(0, check=is_int(0), help="an int >= 0"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        base_cfg = copy.deepcopy(config)
        base_cfg.pe, base_cfg.pe_options = self.opts["base"], {}
        # the base sees positions up to L: its table (learned), centre (xpos) and the
        # original length of dynamic rope scalings are sized for L, not the training length
        base_cfg.max_position_embeddings = self.opts["max_positions"]
        self.base = get_encoding_class(self.opts["base"])(base_cfg)
        self.kv_per_query_head = self.base.kv_per_query_head
        self.needs_scores = self.base.needs_scores
        # fused kernels (and flash's ALiBi) may derive positions from indices: never used
        self.generation_length: int | None = None
        self._eval_draw: tuple[int, torch.Tensor] | None = None

    # -- positions ------------------------------------------------------------------
    def check_length(self, n: int) -> None:
        L = self.opts["max_positions"]
        if n > L:
            raise ValueError(
                f"pe='randpe' draws positions from [0, max_positions={L}) but {n} positions were "
                "asked for: set pe_options max_positions above the longest evaluated length"
            )

    def set_generation_length(self, total_length: int | None) -> None:
        if total_length is not None:
            self.check_length(total_length)
        self.generation_length = total_length
        self.base.set_generation_length(total_length)

    def positions(self, n: int, device) -> torch.Tensor:
        """The (n,) table that replaces 0..n−1 in this forward."""
        self.check_length(n)
        L = self.opts["max_positions"]
        if self.training and self.generation_length is None:
            return draw_positions(n, L, device=device)
        if self._eval_draw is None or self._eval_draw[0] != n:
            g = torch.Generator().manual_seed(self.opts["seed"])
            self._eval_draw = (n, draw_positions(n, L, generator=g, device="cpu"))
        return self._eval_draw[1].to(device)

    def remap(self, ctx: PEContext) -> PEContext:
        """The context the base sees, built once per forward (memoised in ``ctx.state``)."""
        key = ("randpe_ctx", id(self))
        inner = ctx.state.get(key)
        if inner is None:
            need = int(torch.maximum(ctx.position_ids.max(), ctx.key_position_ids.max())) + 1
            if self.generation_length is not None:
                if need > self.generation_length:
                    raise ValueError(
                        f"pe='randpe': position {need - 1} beyond set_generation_length({self.generation_length})"
                    )
                n = self.generation_length
            elif ctx.past_length > 0:
                raise ValueError(
                    "pe='randpe': decoding with a KV cache needs set_generation_length(total) first "
                    "(PeevalForCausalLM.generate does it), so that cached positions never move"
                )
            else:
                n = need
            table = self.positions(n, ctx.position_ids.device)
            inner = PEContext(
                position_ids=table[ctx.position_ids],
                key_position_ids=table[ctx.key_position_ids.clamp(min=0)],  # < 0: left padding, masked
                past_length=ctx.past_length,
                cache=ctx.cache,
                state=ctx.state,
            )
            ctx.state[key] = inner
        inner.fused = ctx.fused
        return inner

    # -- hooks: the base's, on remapped positions ---------------------------------------
    def embed(self, hidden, ctx):
        return self.base.embed(hidden, self.remap(ctx))

    def transform_qk(self, layer, q, k, ctx):
        return self.base.transform_qk(layer, q, k, self.remap(ctx))

    def scale(self) -> float:
        return self.base.scale()

    def bias(self, layer, q, k, ctx):
        return self.base.bias(layer, q, k, self.remap(ctx))

    def extra_values(self, layer, ctx):
        return self.base.extra_values(layer, self.remap(ctx))

    def after_attention(self, layer, extra_out, ctx):
        self.base.after_attention(layer, extra_out, self.remap(ctx))

    def after_mlp(self, layer, mlp_out, ctx, attn_out=None):
        self.base.after_mlp(layer, mlp_out, self.remap(ctx), attn_out=attn_out)
