"""The one interface every positional encoding implements: position maths only.

An encoding is an ``nn.Module`` owned by the model (``model.model.pe``); it holds all of
its parameters (per-layer ones in a ``ModuleList`` or stacked) and is called by the generic
attention and decoder layer. Every hook has a no-op default, so an encoding overrides only
what it contributes (SPEC 2.2):

(a) ``embed``           add an absolute embedding to the token embeddings;
(b) ``transform_qk``    rotate / scale / re-parametrise q and k before attention
                        (and ``scale`` to set the softmax temperature);
(c) ``bias``            one description of an additive attention bias: a ``PositionBias``
                        (positions only: any block of it, and optionally one entry for
                        FlexAttention) or a ``ContentBias`` (depends on q and k); the
                        back-ends (``peeval.models.attention``) derive the dense, blocked,
                        flex and flash forms from it;
(d) ``extra_values`` / ``after_attention`` / ``after_mlp``
                        position streams carried between layers (TAPE's E);
(e) ``remap``           the positions the maths sees (randpe: a random subset).

How the attention runs (widths, kernels, padding) is the back-ends' business; an encoding
with its own fused kernel offers it through ``fused_kernel`` (the ``triton`` back-end).

Parameters are initialised in ``init_weights`` with ``transformers.initialization``
functions, which skip tensors loaded from a checkpoint. Constant buffers are registered
non-persistent and recomputed there too (``from_pretrained`` builds on the meta device).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn


@dataclass(frozen=True)
class PositionBias:
    """A bias that depends on positions only, described once for every back-end.

    ``block_fn(rows, keys, *tensors)`` returns the (B|1, H, len(rows), len(keys)) block of the
    bias for query rows ``rows`` and key columns ``keys`` (slices). ``tensors`` are small
    (O(N·H)) tables that carry every learned parameter's gradient; the blocked back-end rebuilds
    blocks from them in the backward pass, so no N×N bias is ever held (SPEC 2.2, issue 17).
    ``element_fn(b, h, q_idx, kv_idx, *tensors)`` is one entry (FlexAttention; None: not offered),
    ``dense_fn()`` the encoding's own N×N formula (the eager reference; None: the whole block),
    ``alibi_slopes`` (H,) float32 when the bias is exactly flash-attn's ALiBi.
    """

    block_fn: Callable[..., torch.Tensor]
    tensors: tuple[torch.Tensor, ...]
    element_fn: Callable[..., torch.Tensor] | None = None
    dense_fn: Callable[[], torch.Tensor] | None = None
    alibi_slopes: torch.Tensor | None = None

    def block(self, rows: slice, keys: slice) -> torch.Tensor:
        return self.block_fn(rows, keys, *self.tensors)

    def dense(self, nq: int, nk: int) -> torch.Tensor:
        """(B|1, H, Nq, Nk): the reference formula, else every block at once."""
        return self.dense_fn() if self.dense_fn is not None else self.block(slice(0, nq), slice(0, nk))

    def score_mod(self) -> Callable | None:
        """FlexAttention's ``score_mod(score, b, h, q_idx, kv_idx)``, or None."""
        if self.element_fn is None:
            return None
        fn, tensors = self.element_fn, self.tensors

        def add_bias(score, b, h, q_idx, kv_idx):
            return score + fn(b, h, q_idx, kv_idx, *tensors)

        return add_bias


@dataclass(frozen=True)
class ContentBias:
    """A bias that depends on the (transformed) q and the keys (CoPE), described before they exist.

    ``dense_fn(q, k)`` returns the (B, H, Nq, Nk) bias (the reference); ``attend_fn(q, k, v,
    allowed, scale)``, when offered, the attention output computed with it in query blocks
    (no N×N tensor per head); ``recompute_fn`` (same arguments), when offered, the same attention
    with a hand-written backward that recomputes the blocks (``attn_backend='recompute'``).
    """

    dense_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    attend_fn: Callable[..., torch.Tensor] | None = None
    recompute_fn: Callable[..., torch.Tensor] | None = None


@dataclass(frozen=True)
class Option:
    """A declared ``pe_options`` entry: default, and either allowed choices or a check.

    ``choices`` may be a function returning them, for choices read from the registry."""

    default: Any
    choices: tuple | Callable[[], tuple] | None = None
    check: Callable[[Any], bool] | None = None
    help: str = ""

    def allowed_choices(self) -> tuple | None:
        return self.choices() if callable(self.choices) else self.choices

    def allowed(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.allowed_choices())
        return self.help or "see the encoding's documentation"

    def validate(self, name: str, pe: str, value: Any) -> None:
        ok = value in self.allowed_choices() if self.choices is not None else True
        if ok and self.check is not None:
            try:
                ok = bool(self.check(value))
            except Exception:
                ok = False
        if not ok:
            raise ValueError(f"pe_options[{name!r}]={value!r} is not valid for pe={pe!r}: allowed {self.allowed()}")


def is_int(lo: int | None = None, hi: int | None = None) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo) and (hi is None or v <= hi)

    return check


def is_number(lo: float | None = None) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and (lo is None or v > lo)


BOOL = (True, False)


@dataclass
class PEContext:
    """What the hooks of one forward pass see.

    ``position_ids`` (B, Nq) are the positions of the tokens of this call;
    ``key_position_ids`` (B, Nk) those of every key the attention sees (cached + new):
    keys are contiguous (the key index plus each row's offset), except that positions derived
    from an attention mask give every pad token a repeated one (pads are masked keys), and
    that a ``remap`` (randpe) replaces them all (``remapped``).
    ``state`` is per-forward scratch space shared by all layers (TAPE's E, memoised biases).
    """

    position_ids: torch.Tensor
    key_position_ids: torch.Tensor
    past_length: int
    cache: Any = None
    state: dict = field(default_factory=dict)
    #: (B, Hk, Nk, dv) every value the attention sees (cached + new), set before the bias is used
    values: torch.Tensor | None = None
    #: True while the ``triton`` back-end runs this encoding's ``fused_kernel`` (q/k may stay raw)
    fused: bool = False
    #: positions are not the key index plus an offset (randpe): no kernel may derive them from indices
    remapped: bool = False
    #: (B, Nq, C) the current layer's attention input (normalised h), set before ``transform_qk``
    attn_input: torch.Tensor | None = None
    #: max position + 1, where the shapes alone say it (positions 0..Nk-1 of every row); None: read from data
    n_positions: int | None = None
    #: every position is below this (from the shapes: Nk for positions built from the indices or a mask); None: unknown
    position_bound: int | None = None
    #: an upper bound on i − j + 1 known from the shapes (keys contiguous: Nk; randpe: max_positions), so that
    #: distance tables are sized without a host sync (a compiled graph's break, issue 57); None: read from data
    max_distance: int | None = None

    @property
    def query_length(self) -> int:
        return self.position_ids.shape[1]

    @property
    def key_length(self) -> int:
        return self.key_position_ids.shape[1]

    def relative_positions(self) -> torch.Tensor:
        """(B, Nq, Nk) signed distances i - j (>= 0 where attention is allowed)."""
        return self.position_ids[:, :, None] - self.key_position_ids[:, None, :]


class Encoding(nn.Module):
    """Base strategy: every hook a no-op (``NoPE`` adds nothing else)."""

    name: ClassVar[str] = "nope"
    options: ClassVar[dict[str, Option]] = {}
    #: k (and v) are transformed per *query* head: the attention repeats KV heads first.
    kv_per_query_head: ClassVar[bool] = False
    #: the maths reads the position ids, so a remap of them (randpe's ``base``) changes it
    reads_positions: ClassVar[bool] = True

    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.opts = resolve_options(type(self), config.pe_options or {}, config.pe)
        self.head_dim = config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_layers = config.num_hidden_layers

    # -- (a) input embedding ------------------------------------------------------
    def embed(self, hidden: torch.Tensor, ctx: PEContext) -> torch.Tensor:
        return hidden

    # -- (b) q/k transform ---------------------------------------------------------
    def transform_qk(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, ctx: PEContext
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q: (B, H, Nq, d), k: (B, Hk, Nq, d) for the new tokens only (keys are cached after)."""
        return q, k

    def scale(self) -> float:
        return self.head_dim**-0.5

    # -- (c) additive bias ----------------------------------------------------------
    def bias(self, layer: int, ctx: PEContext) -> PositionBias | ContentBias | None:
        """This layer's bias, described before q/k are transformed (None: no bias)."""
        return None

    # -- (d) position streams carried between layers ------------------------------------
    def extra_values(self, layer: int, ctx: PEContext) -> torch.Tensor | None:
        """(B, H, Nq, X) channels appended to v (attended with the same weights, and cached)."""
        return None

    def after_attention(self, layer: int, extra_out: torch.Tensor, ctx: PEContext) -> None:
        """Receives the attended extra channels (B, H, Nq, X)."""

    def after_mlp(
        self, layer: int, mlp_out: torch.Tensor, ctx: PEContext, attn_out: torch.Tensor | None = None
    ) -> None:
        """Receives the token MLP output (B, Nq, C) of ``layer`` (and its attention output)."""

    # -- (e) positions ------------------------------------------------------------------
    def remap(self, ctx: PEContext) -> tuple[Encoding, PEContext]:
        """(the encoding whose hooks run, the context they see), once per forward: itself and
        ``ctx``, except for a position remap (randpe: its base, on the drawn positions)."""
        return self, ctx

    # -- an encoding's own kernel (the ``triton`` back-end) -------------------------------
    #: the fused kernel derives distances from the indices (refused for remapped positions)
    index_distances: ClassVar[bool] = False
    #: the fused kernel takes ``key_valid=`` (B, N) padded keys (a causal pass with no cache history)
    fused_padding: ClassVar[bool] = False

    def fused_kernel(self, q: torch.Tensor) -> Callable | None:
        """``kernel(layer, q, k, v, ctx) -> out`` that computes the attention from these raw
        queries' shape (B, H, N, d), or None. Called for a causal pass with no cache history
        and no padding; ``transform_qk`` then sees ``ctx.fused`` and may leave q/k raw."""
        return None

    # -- positional state (TAPE table 8's measurement) ----------------------------------
    #: while a list, the attention appends every layer's ``positional_state`` to it
    recorded_states: list | None = None

    def positional_state(self, layer: int, q: torch.Tensor, ctx: PEContext) -> torch.Tensor | None:
        """The explicit positional state (B, H, N, L, R, M) this layer's attention uses, for an
        encoding that has one (TAPE's E; RoPE's rotations, a never-updated E); else None."""
        return None

    @contextlib.contextmanager
    def recording_states(self):
        """``with pe.recording_states() as states: model(...)``: each layer's positional state."""
        self.recorded_states = []
        try:
            yield self.recorded_states
        finally:
            self.recorded_states = None

    # -- generation ----------------------------------------------------------------
    def set_generation_length(self, total_length: int | None) -> None:
        """Told the final length before ``generate()`` decodes (None after it): encodings
        whose positions depend on the whole sequence length (randpe) fix them once."""

    # -- weights ------------------------------------------------------------------
    def init_weights(self) -> None:
        """(Re)initialise own parameters and constant buffers; see the module docstring."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.opts.items())


class NoPE(Encoding):
    """No positional information at all: causal masking alone orders the tokens."""

    name = "nope"
    reads_positions = False


def resolve_options(cls: type[Encoding], given: dict, pe: str) -> dict:
    """Merge ``given`` into the declared defaults; unknown names or bad values raise."""
    unknown = sorted(set(given) - set(cls.options))
    if unknown:
        allowed = ", ".join(sorted(cls.options)) or "none"
        raise ValueError(f"unknown pe_options {unknown} for pe={pe!r}; allowed options: {allowed}")
    opts = {}
    for name, opt in cls.options.items():
        value = given.get(name, opt.default)
        opt.validate(name, pe, value)
        opts[name] = value
    return opts
