"""Attention back-ends, and the one place (``plan``) that picks one per layer call.

``BACKENDS`` maps each back-end to (can run, run), both taking one ``AttentionCall``: sdpa
(default), eager (explicit softmax: the reference), flash, triton (an encoding's own fused
kernel), content_blocks (a q/k-dependent bias in query blocks: CoPE), recompute (the same with a
hand-written backward that recomputes the blocks, never the default: issue 65), and for a bias that
depends on positions only (a ``PositionBias``): flex (FlexAttention, a compiled
``score_mod``) and blocked (sdpa over query blocks). The computations themselves live in
:mod:`peeval.models.attention_ops` (re-exported here, where the runners look them up, so a test
can replace one by name); the back-ends derive every form of a bias from the encoding's one description.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._log import log_once, logger  # noqa: F401  (re-exported: older callers use attention.log_once)
from .attention_ops import block_rows as block_rows
from .attention_ops import blocked_bias_attention as blocked_bias_attention
from .attention_ops import build_allowed as build_allowed
from .attention_ops import causal_allowed as causal_allowed
from .attention_ops import causal_mod as causal_mod  # FlexAttention's causal mask (tests build it)
from .attention_ops import eager_attention as eager_attention
from .attention_ops import eager_scores as eager_scores
from .attention_ops import equal_widths as equal_widths
from .attention_ops import flash_attention as flash_attention
from .attention_ops import flash_available as flash_available
from .attention_ops import flex_available as flex_available
from .attention_ops import flex_bias_attention as flex_bias_attention
from .attention_ops import repeat_kv as repeat_kv
from .attention_ops import sdpa_attention as sdpa_attention
from .attention_ops import triton_available as triton_available
from .encodings.base import ContentBias, Encoding, PEContext, PositionBias

# -- the back-ends: a registry of (can run, run), and the one place that picks one ------------------


@dataclass
class AttentionCall:
    """What a back-end sees of one layer's attention: ``plan`` fills it before q/k are transformed
    (``q`` raw, ``bias`` the encoding's description), ``attend`` after (q, k, v with the cache)."""

    pe: Encoding  # the encoding whose hooks run (randpe: its base)
    layer: int
    request: str  # config.attn_backend
    ctx: PEContext
    q: torch.Tensor
    attention_mask: torch.Tensor | None = None
    output_attentions: bool = False
    bias: PositionBias | ContentBias | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    allowed: torch.Tensor | None = None

    @property
    def padded(self) -> bool:
        state = self.ctx.state
        if "attn_padded" not in state:  # one host sync per forward, not per layer
            mask = self.attention_mask
            # compiled: a given mask counts as padding without a host sync (modeling_peeval._maybe_padded)
            state["attn_padded"] = mask is not None and (torch.compiler.is_compiling() or not bool(mask.all()))
        return state["attn_padded"]

    @property
    def whole(self) -> bool:
        """One causal pass over whole sequences: no cache history, no padding."""
        return self.ctx.past_length == 0 and not self.padded

    @property
    def scale(self) -> float:
        return self.pe.scale()

    def dense_bias(self) -> torch.Tensor | None:
        """The bias as one (B|1, H, Nq, Nk) tensor (eager, sdpa): derived from the description."""
        b = self.bias
        if b is None:
            return None
        if isinstance(b, PositionBias):
            return b.dense(self.q.shape[2], self.k.shape[2])
        return b.dense_fn(self.q, self.k)


def _is_position_bias(c: AttentionCall) -> bool:
    return isinstance(c.bias, PositionBias)


def _has_blocked_content(c: AttentionCall) -> bool:
    return isinstance(c.bias, ContentBias) and c.bias.attend_fn is not None


def _has_recompute(c: AttentionCall) -> bool:
    return isinstance(c.bias, ContentBias) and c.bias.recompute_fn is not None


def _can_fuse(c: AttentionCall) -> bool:
    by_index = c.pe.index_distances and c.ctx.remapped  # randpe: distances are not the indices' difference
    # padding only for a kernel that takes the mask's keys (no cache history: Nq == Nk)
    shape_ok = c.whole or (c.pe.fused_padding and c.ctx.past_length == 0 and c.padded)
    return c.pe.fused_kernel(c.q) is not None and triton_available(c.q) and shape_ok and not by_index


def _can_flash(c: AttentionCall) -> bool:
    plain = c.ctx.past_length == 0 or c.ctx.query_length == 1
    half = c.q.dtype in (torch.float16, torch.bfloat16)  # flash-attn's only dtypes (xpos lifts q/k to float32)
    # flash-attn's ALiBi derives distances from indices: never for remapped (randpe) positions
    slopes = _is_position_bias(c) and c.bias.alibi_slopes is not None and not c.ctx.remapped
    return flash_available(c.q) and half and not c.padded and plain and (c.bias is None or slopes)


def _can_flex(c: AttentionCall) -> bool:
    """FlexAttention: by default only on CUDA; asked for (``flex``) also on the CPU without autograd;
    never again for an encoding (on a device type) once its compilation failed (``BROKEN``)."""
    offered = _is_position_bias(c) and c.bias.element_fn is not None
    usable = offered and flex_available(c.q) and c.whole and (c.request == "flex" or _is_cuda(c.q))
    return usable and ("flex", c.pe.name, c.q.device.type) not in BROKEN


def _is_cuda(t: torch.Tensor) -> bool:
    return t.is_cuda


def _eager(c):
    return eager_attention(c.q, c.k, c.v, bias=c.dense_bias(), allowed=c.allowed, scale=c.scale)


def _sdpa(c):
    return sdpa_attention(c.q, c.k, c.v, bias=c.dense_bias(), allowed=c.allowed, scale=c.scale), None


def _fused(c):
    kernel = c.pe.fused_kernel(c.q)
    if c.padded:  # only for a ``fused_padding`` kernel (``_can_fuse``): the mask's keys, every token sees itself
        return kernel(c.layer, c.q, c.k, c.v, c.ctx, key_valid=c.attention_mask.bool()), None
    return kernel(c.layer, c.q, c.k, c.v, c.ctx), None


def _content_blocks(c):
    return c.bias.attend_fn(c.q, c.k, c.v, c.allowed, c.scale), None


def _recompute(c):
    return c.bias.recompute_fn(c.q, c.k, c.v, c.allowed, c.scale), None


def _flash(c):
    slopes = c.bias.alibi_slopes if c.bias is not None else None
    return flash_attention(c.q, c.k, c.v, alibi_slopes=slopes, scale=c.scale), None


def _flex(c):
    """FlexAttention, compiled. Under autograd a first call of each shape also runs a backward on
    detached copies (``_probe_flex_backward``): the backward is compiled there, inside this call, so
    that a failing compilation (FIRE's ``score_mod`` on an H200, issue 46) can still fall back."""
    try:
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (c.q, c.k, c.v, *c.bias.tensors))
        if grad and not torch.compiler.is_compiling():  # compiled whole, the model's graph holds the backward
            _probe_flex_backward(c)
        return flex_bias_attention(c.q, c.k, c.v, c.bias.score_mod(), scale=c.scale, state=c.ctx.state), None
    except torch.OutOfMemoryError:
        raise  # no other path needs less memory
    except Exception as e:  # InductorError, BackendCompilerFailed, a Triton error, ...
        return fall_back("flex", c, e)


#: (back-end, pe, device type) of compiled paths whose compilation failed: never tried again
BROKEN: set[tuple[str, str, str]] = set()
#: (pe, device type, shapes, dtypes, autocast) whose compiled FlexAttention backward ran once
_FLEX_PROBED: set[tuple] = set()


def _probe_flex_backward(c: AttentionCall) -> None:
    """FlexAttention forward and backward on detached copies of this call's inputs (same shapes,
    dtypes and ``requires_grad``, so the compiled graphs are the ones the real call uses); raises
    what the compiler raises. Once per shape: the cost is one extra attention forward + backward."""
    inputs = (c.q, c.k, c.v, *c.bias.tensors)
    key = (c.pe.name, c.q.device.type, torch.is_autocast_enabled(c.q.device.type),
           tuple((tuple(t.shape), t.dtype, t.requires_grad) for t in inputs))  # fmt: skip
    if key in _FLEX_PROBED:
        return
    leaves = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
    bias = dataclasses.replace(c.bias, tensors=tuple(leaves[3:]))
    out = flex_bias_attention(*leaves[:3], bias.score_mod(), scale=c.scale)
    wanted = [t for t in leaves if t.requires_grad]
    torch.autograd.grad(out, wanted, torch.ones_like(out), allow_unused=True)
    _FLEX_PROBED.add(key)


def fall_back(name: str, c: AttentionCall, error: Exception):
    """After compiled back-end ``name`` failed for this call: mark it broken for the encoding (on
    this device type), say so once, and run the next back-end that can (``fallback_for``)."""
    BROKEN.add((name, c.pe.name, c.q.device.type))
    nxt = fallback_for(c, name)
    what = " ".join(str(error).split())[:200] or "no message"
    log_once(f"attn_backend {name!r} failed for pe={c.pe.name!r} on {c.q.device.type} "
             f"({type(error).__name__}: {what}): using {nxt!r} instead")  # fmt: skip
    return BACKENDS[nxt].run(c)


def fallback_for(c: AttentionCall, failed: str) -> str:
    """The back-end after ``failed``: the next of the request's ``PREFERENCE`` that can run (on CUDA
    never ``blocked`` unless asked for: sdpa with the N×N bias)."""
    order = _candidates(c, PREFERENCE[c.request])
    after = order[order.index(failed) + 1 :] if failed in order else order
    for name in after:
        if name != failed and BACKENDS[name].can_run(c):
            return name
    return "sdpa"


def _blocked(c):
    return blocked_bias_attention(c.q, c.k, c.v, c.bias, allowed=c.allowed, scale=c.scale), None


@dataclass(frozen=True)
class Backend:
    """``can_run(call)``: whether it can run this call (judged before q/k are transformed);
    ``run(call)``: (out (B, H, Nq, dv), probs or None)."""

    can_run: Callable[[AttentionCall], bool]
    run: Callable[[AttentionCall], tuple]


def _always(c: AttentionCall) -> bool:
    return True


BACKENDS: dict[str, Backend] = {
    "eager": Backend(_always, _eager),  # explicit softmax: the reference, and attention maps
    "triton": Backend(_can_fuse, _fused),  # the encoding's own fused kernel (raw q/k allowed)
    "content_blocks": Backend(_has_blocked_content, _content_blocks),  # CoPE's bias in query blocks, never N×N
    "recompute": Backend(_has_recompute, _recompute),  # the same, its own backward recomputing the blocks
    "flash": Backend(_can_flash, _flash),  # flash-attn 2: no bias, or exactly its ALiBi
    "flex": Backend(_can_flex, _flex),  # FlexAttention with the position bias's score_mod
    "blocked": Backend(_is_position_bias, _blocked),  # sdpa over query blocks, bias rebuilt per block
    "sdpa": Backend(_always, _sdpa),
}

#: per ``attn_backend``: the back-ends tried in order; the first that can run does (on CUDA never
#: ``blocked`` unless asked for by name: sdpa with the N×N bias is the fallback there, issue 57).
PREFERENCE: dict[str, tuple[str, ...]] = {
    "eager": ("eager",),
    "triton": ("triton", "content_blocks", "flex", "blocked", "sdpa"),
    "flash": ("content_blocks", "flash", "flex", "blocked", "sdpa"),
    "sdpa": ("content_blocks", "flex", "blocked", "sdpa"),
    "flex": ("content_blocks", "flex", "blocked", "sdpa"),
    "blocked": ("content_blocks", "blocked", "sdpa"),
    "recompute": ("recompute", "content_blocks", "flex", "blocked", "sdpa"),
}


@dataclass(frozen=True)
class Row:
    """A measured row of ``benchmarks/results/<file>`` (its ``entry``; ``call``: which of a file's
    ``calls``): the timing that chose a CUDA default. The test reads it back and checks that it ran
    that back-end and that no row of the same encoding under the same header was faster within 1.3x
    rope's peak memory (tests/models/test_default_evidence.py)."""

    file: str
    entry: str
    call: int | None = None


#: a CUDA inference entry no forward timing has chosen yet (the test holds the list of them)
UNTIMED = "untimed"


@dataclass(frozen=True)
class Defaults:
    """An encoding's back-end for a whole causal pass (no cache history, no padding) of the default
    request: on the CPU, on CUDA for inference, and on CUDA under autograd (a training step); each CUDA
    entry with the ``Row`` that chose it (inference: a training row of that back-end, or ``UNTIMED``)."""

    cpu: str
    cuda: str
    cuda_train: str
    cuda_row: Row | str = UNTIMED
    cuda_train_row: Row | str = UNTIMED


_UNCOMPILED = "gpu_train_h200_default.json"  # issue 46: the defaults of then, uncompiled, 64 x 512
_COMPILED = "gpu_train_h200_compiled_2026-11-28.json"  # issue 57's defaults, compiled, 64 x 512
_ISSUES = "gpu_train_h200_transcribed.json"  # compiled rows of issues 57 (call 0) and 65 (1: 64 x 512, 2: 16 x 2,048)


_PLAIN = Defaults("sdpa", "sdpa", "sdpa")  # an encoding missing from the table


def _plain(row: Row) -> Defaults:
    return Defaults("sdpa", "sdpa", "sdpa", row, row)


#: THE table of default back-ends (issue 57): ``plan`` and the tests read it, nothing else decides a default.
#: CPU: blocked sdpa for a position bias (issue 17: faster than the N×N bias, memory linear in N).
#: CUDA inference: FlexAttention (no N×N tensor at 32k tokens; t5 / kerple / fire untimed). CUDA training: each
#: entry's row. t5 trains on eager (issue 57: 2.06x compiled rope; sdpa with the N×N bias measured 5.0x, issue 65),
#: kerple / fire on sdpa with the N×N bias built once per forward (kerple) or layer (fire), alibi on FlexAttention,
#: CoPE on its query blocks (cope.block_elements). docs/gpu.md has the measured table.
DEFAULT_BACKENDS: dict[str, Defaults] = {
    "nope": _plain(Row(_UNCOMPILED, "nope")),
    "learned": _plain(Row(_UNCOMPILED, "learned")),
    "sinusoidal": _plain(Row(_UNCOMPILED, "sinusoidal")),
    "rope": _plain(Row(_COMPILED, "rope", 1)),
    "xpos": _plain(Row(_UNCOMPILED, "xpos")),
    "randpe": _plain(Row(_ISSUES, "randpe", 2)),  # its base's table applies (the encoding whose hooks run)
    "pope": _plain(Row(_ISSUES, "pope", 1)),
    "tape": _plain(Row(_ISSUES, "tape", 1)),
    "alibi": Defaults("blocked", "flex", "flex", Row(_ISSUES, "alibi", 1), Row(_ISSUES, "alibi", 1)),
    "t5": Defaults("blocked", "flex", "eager", UNTIMED, Row(_ISSUES, "t5", 0)),
    "kerple": Defaults("blocked", "flex", "sdpa", UNTIMED, Row(_ISSUES, "kerple", 1)),
    "fire": Defaults("blocked", "flex", "sdpa", UNTIMED, Row(_COMPILED, "fire", 1)),
    "cope": Defaults(
        "content_blocks", "content_blocks", "content_blocks", Row(_COMPILED, "cope", 1), Row(_COMPILED, "cope", 1)
    ),  # fmt: skip
}


def default_backend(pe: str, device_type: str, training: bool) -> str:
    """The table's entry (an encoding missing from it: plain sdpa)."""
    d = DEFAULT_BACKENDS.get(pe, _PLAIN)
    if device_type != "cuda":
        return d.cpu
    return d.cuda_train if training else d.cuda


def _candidates(c: AttentionCall, order) -> list[str]:
    """``order`` on this device: on CUDA without ``blocked`` unless it was asked for by name."""
    return [n for n in order if n != "blocked" or c.request == "blocked" or not _is_cuda(c.q)]


def _table_default(c: AttentionCall) -> str | None:
    """The table's back-end when it applies: the default request, a whole causal pass, and it can run."""
    if c.request != "sdpa" or not c.whole:
        return None
    training = torch.is_grad_enabled() and c.q.requires_grad
    name = default_backend(c.pe.name, "cuda" if _is_cuda(c.q) else "cpu", training)
    if (name, c.pe.name, c.q.device.type) in BROKEN or not BACKENDS[name].can_run(c):
        return None
    return name


def plan(call: AttentionCall) -> str:
    """The back-end of this layer call (a key of ``BACKENDS``), before q/k are transformed.

    Sets ``call.bias`` from the encoding. A requested back-end that cannot run here falls back
    (once logged) to the next of its ``PREFERENCE``; attention maps always come from eager.
    """
    call.bias = call.pe.bias(call.layer, call.ctx)
    if call.output_attentions:
        return "eager"
    table = _table_default(call)
    if table is not None:
        return table
    for name in _candidates(call, PREFERENCE[call.request]):
        if (name, call.pe.name, call.q.device.type) in BROKEN:  # ``fall_back`` said so already:
            return fallback_for(call, name)  # the back-end its line named, on every later call too
        if BACKENDS[name].can_run(call):
            return name
        decode_step = name == "triton" and call.pe.fused_kernel(call.q) is not None  # the kernel runs whole passes
        if name == call.request and not decode_step:
            log_once(f"attn_backend={name!r} cannot run for pe={call.pe.name!r} here: falling back")
    raise AssertionError("sdpa always runs")  # pragma: no cover


def attend(how: str, call: AttentionCall):
    """Run the back-end ``plan`` chose: (out (B, H, Nq, dv), probs or None)."""
    return BACKENDS[how].run(call)
