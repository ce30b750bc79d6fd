"""The one interface every positional encoding implements.

An encoding is an ``nn.Module`` owned by the model (``model.model.pe``); it holds all of
its parameters (per-layer ones in a ``ModuleList``) and is called by the generic
attention and decoder layer through five hooks. Each hook has a no-op default, so an
encoding overrides only what it contributes (SPEC 2.2):

(a) ``embed``           add an absolute embedding to the token embeddings;
(b) ``transform_qk``    rotate / scale / re-parametrise q and k before attention
                        (and ``scale`` to set the softmax temperature);
(c) ``bias``            an additive (B|1, H, Nq, Nk) attention bias (the reference),
                        with optional fast forms of the same bias: ``bias_blocks``
                        (any block of it, recomputable), ``score_mod`` (FlexAttention)
                        and ``flash_alibi_slopes`` (flash-attn's ALiBi);
(d) ``extra_values`` / ``after_attention`` / ``after_mlp``
                        state carried between layers (TAPE's position streams).

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
class BiasBlocks:
    """A position-only bias that can be built one block at a time.

    ``fn(rows, keys, *tensors)`` returns the (B|1, H, len(rows), len(keys)) block of the
    bias for query rows ``rows`` and key columns ``keys`` (slices). ``tensors`` are small
    (O(N·H)) tables that carry every learned parameter's gradient; the attention rebuilds
    blocks from them in the backward pass, so no N×N bias is ever held (SPEC 2.2, issue 17).
    """

    fn: Callable[..., torch.Tensor]
    tensors: tuple[torch.Tensor, ...]

    def block(self, rows: slice, keys: slice) -> torch.Tensor:
        return self.fn(rows, keys, *self.tensors)


@dataclass(frozen=True)
class Option:
    """A declared ``pe_options`` entry: default, and either allowed choices or a check."""

    default: Any
    choices: tuple | None = None
    check: Callable[[Any], bool] | None = None
    help: str = ""

    def allowed(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return self.help or "see the encoding's documentation"

    def validate(self, name: str, pe: str, value: Any) -> None:
        ok = value in self.choices if self.choices is not None else True
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
    from an attention mask give every pad token a repeated one (pads are masked keys).
    ``state`` is per-forward scratch space shared by all layers (TAPE's E, memoised biases).
    """

    position_ids: torch.Tensor
    key_position_ids: torch.Tensor
    past_length: int
    cache: Any = None
    state: dict = field(default_factory=dict)
    #: (B, Hk, Nk, dv) every value the attention sees (cached + new), set before ``bias``
    values: torch.Tensor | None = None
    #: True while the ``triton`` back-end runs this encoding's ``fused_attention``
    fused: bool = False
    #: (B, Nq, C) the current layer's attention input (normalised h), set before ``transform_qk``
    attn_input: torch.Tensor | None = None

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
    """Base strategy: no positional information at all (``nope`` is this class)."""

    name: ClassVar[str] = "nope"
    options: ClassVar[dict[str, Option]] = {}
    #: k (and v) are transformed per *query* head: the attention repeats KV heads first.
    kv_per_query_head: ClassVar[bool] = False
    #: the encoding needs the explicit score matrix (no fused / flash kernel can express it)
    needs_scores: ClassVar[bool] = False

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
    def bias(self, layer: int, q: torch.Tensor, k: torch.Tensor, ctx: PEContext) -> torch.Tensor | None:
        """q: (B, H, Nq, d') transformed, k: (B, Hk, Nk, d') all keys. Return (B|1, H, Nq, Nk)."""
        return None

    def bias_blocks(self, layer: int, ctx: PEContext) -> BiasBlocks | None:
        """``bias`` in blocks, for a bias that depends on positions only (None: not offered)."""
        return None

    def score_mod(self, layer: int, ctx: PEContext) -> Callable | None:
        """``bias`` as a FlexAttention ``score_mod(score, b, h, q_idx, kv_idx)`` (None: not offered)."""
        return None

    def flash_alibi_slopes(self) -> torch.Tensor | None:
        """(H,) float32 slopes when ``bias`` is exactly flash-attn's ALiBi (None otherwise)."""
        return None

    def attention(self, layer: int, q, k, v, ctx: PEContext, allowed) -> torch.Tensor | None:
        """The attention output (B, H, Nq, dv) for an encoding that computes it itself on the
        sdpa back-end (CoPE: its bias in query blocks, never N×N); None: the generic path."""
        return None

    # -- (d) state carried between layers --------------------------------------------
    def extra_values(self, layer: int, ctx: PEContext) -> torch.Tensor | None:
        """(B, H, Nq, X) channels appended to v (attended with the same weights, and cached)."""
        return None

    def after_attention(self, layer: int, extra_out: torch.Tensor, ctx: PEContext) -> None:
        """Receives the attended extra channels (B, H, Nq, X)."""

    def after_mlp(
        self, layer: int, mlp_out: torch.Tensor, ctx: PEContext, attn_out: torch.Tensor | None = None
    ) -> None:
        """Receives the token MLP output (B, Nq, C) of ``layer`` (and its attention output)."""

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

    # -- fused kernels (the ``triton`` back-end) ---------------------------------------
    def supports_fused(self, q: torch.Tensor) -> bool:
        """Whether ``fused_attention`` can run for these (raw) queries (B, H, N, d)."""
        return False

    def fused_attention(self, layer, q, k, v, ctx, mask) -> torch.Tensor | None:
        """The attention output computed by an encoding-specific kernel from *raw* q/k.

        Called only when ``supports_fused``, for a causal pass with no cache history and no
        padding, after ``transform_qk`` (which sees
        ``ctx.fused`` and may leave q/k raw for a kernel that transforms them itself).
        """
        raise NotImplementedError

    # -- weights ------------------------------------------------------------------
    def init_weights(self) -> None:
        """(Re)initialise own parameters and constant buffers; see the module docstring."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.opts.items())


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
