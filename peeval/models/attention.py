"""Attention back-ends, and the one place (``plan``) that picks one per layer call.

``BACKENDS`` maps each back-end to (can run, run), both taking one ``AttentionCall``: sdpa
(default), eager (explicit softmax: the reference), flash, triton (an encoding's own fused
kernel), content_blocks (a q/k-dependent bias in query blocks: CoPE), and for a bias that
depends on positions only (a ``PositionBias``): flex (FlexAttention, a compiled
``score_mod``) and blocked (sdpa over query blocks, the bias rebuilt per block, so memory
stays linear in N in training too). The back-ends derive every form of a bias from the
encoding's one description; the CPU kernels' needs (equal q/k/v widths) are met here too.

All take q (B, H, Nq, d'), k (B, Hk, Nk, d'), v (B, Hk, Nk, dv) — dv may exceed d' when
an encoding appends extra value channels — an optional additive ``bias`` (B|1, H, Nq, Nk)
and a boolean ``allowed`` mask (B, 1, Nq, Nk) or None when plain causal masking suffices.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._log import log_once, logger  # noqa: F401  (re-exported: older callers use attention.log_once)
from .encodings.base import ContentBias, Encoding, PEContext, PositionBias


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, Hk, N, d) -> (B, Hk*n_rep, N, d), each KV head serving n_rep query heads."""
    if n_rep == 1:
        return x
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, n, d).reshape(b, h * n_rep, n, d)


def causal_allowed(nq: int, nk: int, device) -> torch.Tensor:
    """(Nq, Nk) bool: the new queries are the last Nq of Nk positions."""
    i = torch.arange(nk - nq, nk, device=device)[:, None]
    return torch.arange(nk, device=device)[None, :] <= i


def build_allowed(attention_mask: torch.Tensor | None, nq: int, nk: int, device) -> torch.Tensor | None:
    """Boolean (B, 1, Nq, Nk) mask, or None when plain causal masking is exact.

    Padded keys are masked; every token may always see itself, so that rows of left
    padding stay finite instead of turning into NaN that leaks into later layers.
    """
    if attention_mask is not None and bool((attention_mask == 0).any()):
        pad = attention_mask[:, None, None, -nk:].bool()
        causal = causal_allowed(nq, nk, device)[None, None]
        diag = torch.zeros(nq, nk, dtype=torch.bool, device=device)
        diag[torch.arange(nq), torch.arange(nk - nq, nk)] = True
        return (causal & pad) | diag
    if nq == 1 or nq == nk:
        return None  # decode step (sees everything) or full causal: no tensor needed
    return causal_allowed(nq, nk, device)[None, None]


def _full_mask(allowed, nq, nk, device):
    return allowed if allowed is not None else causal_allowed(nq, nk, device)[None, None]


def equal_widths(q, k, v):
    """q, k, v zero-padded to one width: PyTorch's CPU flash kernel needs equal widths, and
    without it sdpa falls back to its math kernel, which holds the N×N scores and is ~2× slower
    (TAPE's [v | E] is wider than q·k, PoPE's 2d-wide q̃·k̃ than v). Zeros add nothing to q·k, and
    the zero value channels' output is cut off by the caller."""
    width = max(q.shape[-1], v.shape[-1])
    if q.shape[-1] < width:
        q, k = F.pad(q, (0, width - q.shape[-1])), F.pad(k, (0, width - k.shape[-1]))
    if v.shape[-1] < width:
        v = F.pad(v, (0, width - v.shape[-1]))
    return q, k, v


def sdpa_attention(q, k, v, *, bias=None, allowed=None, scale=None):
    nq, nk, dv = q.shape[2], k.shape[2], v.shape[-1]
    gqa = q.shape[1] != k.shape[1]
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if _cpu_kernels(q) and q.shape[-1] != dv:
        q, k, v = equal_widths(q, k, v)
    if bias is None:
        if allowed is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=nq > 1, scale=scale, enable_gqa=gqa)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale, enable_gqa=gqa)
    else:
        mask = _full_mask(allowed, nq, nk, q.device)
        bias = bias.to(q.dtype).masked_fill(~mask, torch.finfo(q.dtype).min)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale, enable_gqa=gqa)
    return out[..., :dv] if out.shape[-1] != dv else out


def eager_scores(q, k, *, bias=None, allowed=None, scale=None) -> torch.Tensor:
    """Masked pre-softmax scores in float32 (float64 inputs: float64), (B, H, Nq, Nk)."""
    k = repeat_kv(k, q.shape[1] // k.shape[1])
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    dt = torch.promote_types(q.dtype, torch.float32)
    s = torch.matmul(q.to(dt), k.to(dt).transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias.to(dt)
    mask = _full_mask(allowed, q.shape[2], k.shape[2], q.device)
    return s.masked_fill(~mask, float("-inf"))


def eager_attention(q, k, v, *, bias=None, allowed=None, scale=None):
    probs = torch.softmax(eager_scores(q, k, bias=bias, allowed=allowed, scale=scale), dim=-1)
    v = repeat_kv(v, q.shape[1] // v.shape[1])
    return torch.matmul(probs.to(v.dtype), v), probs


def flash_available(t: torch.Tensor) -> bool:
    return t.is_cuda and importlib.util.find_spec("flash_attn") is not None


def triton_available(t: torch.Tensor) -> bool:
    import os

    if importlib.util.find_spec("triton") is None:
        return False
    return t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def flash_attention(q, k, v, *, alibi_slopes=None, scale=None):
    """flash-attn 2 (causal, no padding): extra value channels go through extra calls."""
    try:  # optional: transformers' import check of an exported checkpoint's code (peeval export) skips a try
        from flash_attn import flash_attn_func
    except ImportError as e:
        raise ImportError("the flash back-end needs flash-attn (pip install flash-attn)") from e

    d = q.shape[-1]
    qt, kt = q.transpose(1, 2), k.transpose(1, 2)
    outs = []
    for vc in v.split(d, dim=-1):
        width = vc.shape[-1]
        if width < d:  # flash-attn wants equal head dims: pad the last chunk
            vc = F.pad(vc, (0, d - width))
        o = flash_attn_func(qt, kt, vc.transpose(1, 2), softmax_scale=scale, causal=True, alibi_slopes=alibi_slopes)
        outs.append(o.transpose(1, 2)[..., :width])
    return torch.cat(outs, dim=-1)


# -- position-only biases: blocked sdpa and FlexAttention ------------------------------------

#: a bias block holds at most this many elements (B·H·rows·keys): 4 MiB in float32; smaller
#: blocks skip more of the masked upper triangle, larger ones pay less per-call overhead
BLOCK_ELEMENTS = 1 << 20
MIN_BLOCK_ROWS = 64


def block_rows(b: int, h: int, nq: int, nk: int) -> int:
    """Query rows per block: as many as fit in ``BLOCK_ELEMENTS`` (memory O(N) for a fixed budget)."""
    return max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // max(1, b * h * nk))


def _block_mask(allowed, rows: slice, kv: int, past: int, device) -> torch.Tensor:
    """(B|1, 1, r, kv) bool: the rows' part of ``allowed`` or of the causal mask."""
    if allowed is not None:
        return allowed[:, :, rows, :kv]
    i = torch.arange(rows.start + past, rows.stop + past, device=device)[:, None]
    return (torch.arange(kv, device=device)[None, :] <= i)[None, None]


def _masked_block(block_fn, tensors, allowed, rows, kv, past, dtype, device) -> torch.Tensor:
    mask = _block_mask(allowed, rows, kv, past, device)
    return block_fn(rows, slice(0, kv), *tensors).to(dtype).masked_fill(~mask, float("-inf"))


class _BlockedBiasAttention(torch.autograd.Function):
    """softmax(q·kᵀ·scale + bias)·v over query blocks; keys past a block's last query are skipped.

    Saves q, k, v, the output and the log-sum-exp (O(N)); the backward rebuilds each bias
    block from the small ``PositionBias.tensors`` and returns their gradients through autograd.
    """

    @staticmethod
    def forward(actx, scale, rows, allowed, blocks_fn, q, k, v, *tensors):
        nq, nk = q.shape[2], k.shape[2]
        past, rep = nk - nq, q.shape[1] // k.shape[1]
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        out = q.new_empty(*q.shape[:3], v.shape[-1])
        lse = q.new_empty(q.shape[:3], dtype=torch.float32 if q.dtype != torch.float64 else q.dtype)
        for s in range(0, nq, rows):
            r = slice(s, min(nq, s + rows))
            kv = past + r.stop
            cpu = _cpu_kernels(q)
            wd = q.dtype if cpu else torch.promote_types(q.dtype, torch.float32)
            bias = _masked_block(blocks_fn, tensors, allowed, r, kv, past, wd, q.device)
            if cpu:
                o, m = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    q[:, :, r], k[:, :, :kv], v[:, :, :kv], attn_mask=bias, scale=scale
                )
            else:  # float32 scores at least (bfloat16 models on a GPU without FlexAttention)
                sc = torch.matmul(q[:, :, r].to(wd), k[:, :, :kv].to(wd).transpose(-1, -2)).mul_(scale).add_(bias)
                m = torch.logsumexp(sc, dim=-1)
                o = torch.matmul(sc.sub_(m[..., None]).exp_(), v[:, :, :kv].to(wd))
            out[:, :, r], lse[:, :, r] = o, m
        actx.save_for_backward(q, k, v, out, lse, *tensors)
        actx.meta = (scale, rows, allowed, blocks_fn, rep)
        return out

    @staticmethod
    def backward(actx, dout):
        q, k, v, out, lse, *tensors = actx.saved_tensors
        scale, rows, allowed, blocks_fn, rep = actx.meta
        nq, nk = q.shape[2], k.shape[2]
        past = nk - nq
        wants = [t.requires_grad and t.is_floating_point() for t in tensors]
        fused = not any(wants) and _cpu_kernels(q)  # a constant bias: the CPU flash kernel
        dtypes = q.dtype, k.dtype, v.dtype
        if not fused:  # the explicit backward runs in float32 at least
            wd = torch.promote_types(q.dtype, torch.float32)
            q, k, v, out, dout = (t.to(wd) for t in (q, k, v, out, dout))
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dts = [torch.zeros_like(t) if w else None for t, w in zip(tensors, wants)]
        delta = (dout * out).sum(-1, keepdim=True)
        for s in range(0, nq, rows):
            r = slice(s, min(nq, s + rows))
            kv = past + r.stop
            with torch.enable_grad():
                leaves = [t.detach().requires_grad_(w) for t, w in zip(tensors, wants)]
                bias = _masked_block(blocks_fn, leaves, allowed, r, kv, past, q.dtype, q.device)
            qb, kb, vb, dob = q[:, :, r], k[:, :, :kv], v[:, :, :kv], dout[:, :, r]
            if fused:
                gq, gk, gv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
                    dob, qb, kb, vb, out[:, :, r], lse[:, :, r], 0.0, False, attn_mask=bias, scale=scale
                )
                dq[:, :, r], dk[:, :, :kv], dv[:, :, :kv] = gq, dk[:, :, :kv] + gk, dv[:, :, :kv] + gv
                continue
            p = torch.matmul(qb, kb.transpose(-1, -2)).mul_(scale).add_(bias.detach())
            p = p.sub_(lse[:, :, r, None].to(p.dtype)).exp_()
            dv[:, :, :kv] += torch.matmul(p.transpose(-1, -2), dob)
            ds = torch.matmul(dob, vb.transpose(-1, -2)).sub_(delta[:, :, r]).mul_(p)
            dq[:, :, r] = torch.matmul(ds, kb).mul_(scale)
            dk[:, :, :kv] += torch.matmul(ds.transpose(-1, -2), qb).mul_(scale)
            if any(wants):
                if bias.shape[0] == 1 and ds.shape[0] > 1:
                    ds = ds.sum(0, keepdim=True)
                got = torch.autograd.grad(bias, [t for t, w in zip(leaves, wants) if w], ds)
                for i, g in zip([i for i, w in enumerate(wants) if w], got):
                    dts[i] += g
        if rep > 1:
            dk = dk.view(dk.shape[0], -1, rep, *dk.shape[2:]).sum(2)
            dv = dv.view(dv.shape[0], -1, rep, *dv.shape[2:]).sum(2)
        dq, dk, dv = (g.to(t) for g, t in zip((dq, dk, dv), dtypes))
        return (None, None, None, None, dq, dk, dv, *dts)


def _cpu_kernels(t: torch.Tensor) -> bool:
    """Whether the CPU flash kernels (forward with log-sum-exp, backward) serve this tensor."""
    return t.device.type == "cpu"


def blocked_bias_attention(q, k, v, bias, *, allowed=None, scale=None, rows=None):
    """Attention with ``bias`` (a ``PositionBias``), one query block at a time."""
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    rows = rows or block_rows(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, *bias.tensors))
    if needs_grad:
        return _BlockedBiasAttention.apply(scale, rows, allowed, bias.block_fn, q, k, v, *bias.tensors)
    nq, nk = q.shape[2], k.shape[2]
    past, gqa = nk - nq, q.shape[1] != k.shape[1]
    out = []
    for s in range(0, nq, rows):
        r = slice(s, min(nq, s + rows))
        kv = past + r.stop
        block = _masked_block(bias.block_fn, bias.tensors, allowed, r, kv, past, q.dtype, q.device)
        out.append(
            F.scaled_dot_product_attention(
                q[:, :, r], k[:, :, :kv], v[:, :, :kv], attn_mask=block, scale=scale, enable_gqa=gqa
            )
        )
    return torch.cat(out, dim=2)


_compiled_flex = None


def flex_available(q: torch.Tensor) -> bool:
    """FlexAttention runs compiled on CUDA; on the CPU only without autograd (no CPU backward)."""
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return q.is_cuda or not torch.is_grad_enabled()


def flex_bias_attention(q, k, v, score_mod, *, scale=None, state=None):
    """Causal FlexAttention (no padding, no cache history) with the encoding's ``score_mod``."""
    global _compiled_flex
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention)  # dynamic shapes after a first recompile
    nq, nk = q.shape[2], k.shape[2]
    key = ("flex_block_mask", nq, nk, q.device)
    mask = state.get(key) if state is not None else None
    if mask is None:
        mask = create_block_mask(_causal_mod, None, None, nq, nk, device=q.device)
        if state is not None:
            state[key] = mask
    return _compiled_flex(
        q, k, v, score_mod=score_mod, block_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )


def _causal_mod(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx


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
            state["attn_padded"] = mask is not None and not bool(mask.all())
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


def _can_fuse(c: AttentionCall) -> bool:
    return c.pe.fused_kernel(c.q) is not None and triton_available(c.q) and c.whole


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
    return c.pe.fused_kernel(c.q)(c.layer, c.q, c.k, c.v, c.ctx), None


def _content_blocks(c):
    return c.bias.attend_fn(c.q, c.k, c.v, c.allowed, c.scale), None


def _flash(c):
    slopes = c.bias.alibi_slopes if c.bias is not None else None
    return flash_attention(c.q, c.k, c.v, alibi_slopes=slopes, scale=c.scale), None


def _flex(c):
    """FlexAttention, compiled. Under autograd a first call of each shape also runs a backward on
    detached copies (``_probe_flex_backward``): the backward is compiled there, inside this call, so
    that a failing compilation (FIRE's ``score_mod`` on an H200, issue 46) can still fall back."""
    try:
        if torch.is_grad_enabled() and any(t.requires_grad for t in (c.q, c.k, c.v, *c.bias.tensors)):
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
    """The back-end after ``failed``: the encoding's measured default where one applies
    (``measured_default``), else the next of the request's ``PREFERENCE`` that can run."""
    order = PREFERENCE[c.request]
    after = order[order.index(failed) + 1 :] if failed in order else order
    measured = measured_default(c, any_request=True)
    for name in ([measured] if measured else []) + list(after):
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
    "flash": Backend(_can_flash, _flash),  # flash-attn 2: no bias, or exactly its ALiBi
    "flex": Backend(_can_flex, _flex),  # FlexAttention with the position bias's score_mod
    "blocked": Backend(_is_position_bias, _blocked),  # sdpa over query blocks, bias rebuilt per block
    "sdpa": Backend(_always, _sdpa),
}

#: per ``attn_backend``: the back-ends tried in order; the first that can run does. A position-only
#: bias defaults to FlexAttention on CUDA for a whole causal pass, else the blocked path (measured
#: faster than the N×N bias on the CPU, forward and training; issue 17); a training step on CUDA
#: first takes the encoding's ``cuda_train_backend`` (``measured_default``).
PREFERENCE: dict[str, tuple[str, ...]] = {
    "eager": ("eager",),
    "triton": ("triton", "content_blocks", "flex", "blocked", "sdpa"),
    "flash": ("content_blocks", "flash", "flex", "blocked", "sdpa"),
    "sdpa": ("content_blocks", "flex", "blocked", "sdpa"),
    "flex": ("content_blocks", "flex", "blocked", "sdpa"),
    "blocked": ("content_blocks", "blocked", "sdpa"),
}


def measured_default(c: AttentionCall, any_request: bool = False) -> str | None:
    """The encoding's ``cuda_train_backend`` (measured faster than this module's default in a
    training step of the gpu profile on an H200, issue 46: eager for t5 / kerple / cope / fire, up to
    ``EAGER_TRAIN_MAX_LEN`` tokens) when it applies:
    the default request (``sdpa``; any, after a failure), CUDA, autograd on, a whole causal pass,
    and it can run."""
    name = getattr(c.pe, "cuda_train_backend", None)
    default = any_request or c.request == "sdpa"
    if name is None or not default or not _is_cuda(c.q) or not torch.is_grad_enabled() or not c.whole:
        return None
    if (name, c.pe.name, c.q.device.type) in BROKEN or not BACKENDS[name].can_run(c):
        return None
    if name == "eager" and c.q.shape[-2] > EAGER_TRAIN_MAX_LEN:  # its N x N probabilities: measured at 512 only
        return None
    return name


#: the longest sequence a measured ``eager`` default trains on (the gpu profile's 512, with room): beyond it the
#: N x N probabilities of every layer would outgrow the memory the measurement saw (fire: 58.8 GiB at 64 x 512)
EAGER_TRAIN_MAX_LEN = 1024


def plan(call: AttentionCall) -> str:
    """The back-end of this layer call (a key of ``BACKENDS``), before q/k are transformed.

    Sets ``call.bias`` from the encoding. A requested back-end that cannot run here falls back
    (once logged) to the next of its ``PREFERENCE``; attention maps always come from eager.
    """
    call.bias = call.pe.bias(call.layer, call.ctx)
    if call.output_attentions:
        return "eager"
    measured = measured_default(call)
    if measured is not None:
        return measured
    for name in PREFERENCE[call.request]:
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
