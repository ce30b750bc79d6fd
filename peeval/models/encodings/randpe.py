"""Randomized positions (Ruoss et al. 2023): the base encoding sees, instead of 0..N−1,
a sorted random subset of [0, L), L = ``max_positions``, so that in training it meets
every position up to L and at test time a longer input still uses known positions.

Only the positions change: ``remap`` hands the model the base encoding (a submodule,
``self.base``; the model's init reaches its ``init_weights`` directly) and a context whose
``position_ids`` / ``key_position_ids`` are remapped (position p -> table[p]), once per
forward; every hook then runs on the base itself, so each of its forms (a blocked or flex
bias, a fused kernel that takes explicit positions) sees the drawn positions. Kernels that
derive positions from indices (flash-attn's ALiBi) refuse a remapped context.

- training: a fresh draw per forward (torch's global RNG) of a sorted n-subset of [0, L),
  one subset shared by the rows of the batch (as the reference; keeps bias encodings at
  (1, H, N, N));
- evaluation: the reference samples at test time too, which makes scores random. Here one
  table is fixed per model: the sorted seeded (``seed``) draw of M = ``eval_length``
  positions from [0, L) (default M = L, where the draw is all of [0, L) in order, i.e. the
  base's own positions), and token t of *every* sequence gets table[t]. That is the paper's
  test-time draw for an input of length M, and shorter inputs read its prefix, so that
  a token's position depends on nothing but its index in its own sequence: not on the
  batch, its padding or partners (positions come from the attention mask, see
  ``PeevalModel``), nor on later tokens (causal: a prefix gets the logits it gets inside the
  longer input, and KV-cache decoding equals the full forward). The price: an input
  shorter than M sees denser positions than the paper's draw for its own length would
  give; set ``eval_length`` to the longest evaluated length to match the paper there.
L (in training) or M (in evaluation) smaller than the length asked for raises (never a
silent fallback).
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from . import ENCODINGS, get_encoding_class
from .base import Encoding, Option, PEContext, is_int


def bases() -> tuple[str, ...]:
    """Registered encodings whose maths reads the position ids (``Encoding.reads_positions``)."""
    return tuple(pe for pe in ENCODINGS if get_encoding_class(pe).reads_positions)


def draw_positions(n: int, max_positions: int, generator=None, device=None) -> torch.Tensor:
    """A sorted uniformly random n-subset of [0, max_positions), (n,) long, on ``device``
    (the generator's device, the CPU for the seeded evaluation draw)."""
    scores = torch.rand(max_positions, generator=generator, device=device)
    return scores.topk(n).indices.sort().values


class RandPE(Encoding):
    name = "randpe"
    reads_positions = False  # it replaces them: no randpe over randpe
    options = {
        "base": Option("rope", choices=bases),
        "max_positions": Option(32768, check=is_int(1), help="an int >= 1 (L)"),
        "seed": Option(0, check=is_int(0), help="an int >= 0"),
        "eval_length": Option(
            None, check=lambda v: v is None or is_int(1)(v), help="null (= max_positions) or an int >= 1 (M)"
        ),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        L, M = self.opts["max_positions"], self.opts["eval_length"]
        if M is not None and M > L:
            raise ValueError(
                f"pe_options eval_length={M} is not valid for pe='randpe': allowed at most max_positions={L}"
            )
        self.eval_length = L if M is None else M
        base_cfg = copy.deepcopy(config)
        base_cfg.pe, base_cfg.pe_options = self.opts["base"], {}
        # the base sees positions up to L: its table (learned), centre (xpos) and the
        # original length of dynamic rope scalings are sized for L, not the training length
        base_cfg.max_position_embeddings = L
        self.base = get_encoding_class(self.opts["base"])(base_cfg)
        self._eval_tables: dict[str, torch.Tensor] = {}

    # -- positions ------------------------------------------------------------------
    def check_length(self, n: int) -> None:
        L, M = self.opts["max_positions"], self.eval_length
        if self.training and n > L:
            raise ValueError(
                f"pe='randpe' draws positions from [0, max_positions={L}) but {n} positions were "
                "asked for: set pe_options max_positions above the longest trained length"
            )
        if not self.training and n > M:
            raise ValueError(
                f"pe='randpe' evaluates with {M} fixed positions (eval_length={self.opts['eval_length']}, "
                f"max_positions={L}) but {n} positions were asked for: set pe_options max_positions "
                "(and eval_length) above the longest evaluated length"
            )

    def set_generation_length(self, total_length: int | None) -> None:
        """Fail before decoding rather than at the first step past the table."""
        if total_length is not None:
            self.check_length(total_length)
        self.base.set_generation_length(total_length)

    def eval_table(self, device) -> torch.Tensor:
        """(M,) the fixed evaluation positions: token t of any sequence gets table[t]."""
        key = str(device)
        table = self._eval_tables.get(key)
        if table is None:
            L, M = self.opts["max_positions"], self.eval_length
            if M == L:  # the only L-subset of [0, L): skip the draw
                table = torch.arange(L)
            else:
                table = draw_positions(M, L, generator=torch.Generator().manual_seed(self.opts["seed"]))
            table = self._eval_tables[key] = table.to(device)
        return table

    def remap(self, ctx: PEContext) -> tuple[Encoding, PEContext]:
        """The base, and the context it sees: a fresh draw (training) or the fixed table."""
        need = ctx.n_positions  # known from the shapes: no host sync (issue 57)
        if need is None:
            need = int(torch.maximum(ctx.position_ids.max(), ctx.key_position_ids.max())) + 1
        self.check_length(need)
        if self.training:
            if ctx.past_length > 0:
                raise ValueError(
                    "pe='randpe' draws new positions at every training forward: decoding with a "
                    "KV cache needs model.eval() (fixed positions)"
                )
            table = draw_positions(need, self.opts["max_positions"], device=ctx.position_ids.device)
        else:
            table = self.eval_table(ctx.position_ids.device)
        inner = dataclasses.replace(  # < 0: pads of explicit left-padded positions, masked keys
            ctx,
            position_ids=table[ctx.position_ids.clamp(min=0)],
            key_position_ids=table[ctx.key_position_ids.clamp(min=0)],
            remapped=True,
            n_positions=None,
            max_distance=self.opts["max_positions"],  # drawn positions lie in [0, max_positions)
            position_bound=self.opts["max_positions"],
        )
        return self.base, inner
