"""Attention back-ends, and the one place (``plan``) that picks one per layer call.

sdpa (default), eager (explicit softmax: the reference), flash, triton (an encoding's own
fused kernel), and for a bias that depends on positions only (``Encoding.bias_blocks`` /
``score_mod``): flex (FlexAttention, a compiled ``score_mod``) and blocked (sdpa over query
blocks, the bias rebuilt per block, so memory stays linear in N in training too).

All take q (B, H, Nq, d'), k (B, Hk, Nk, d'), v (B, Hk, Nk, dv) — dv may exceed d' when
an encoding appends extra value channels — an optional additive ``bias`` (B|1, H, Nq, Nk)
and a boolean ``allowed`` mask (B, 1, Nq, Nk) or None when plain causal masking suffices.
"""

from __future__ import annotations

import importlib.util
import math

import torch
import torch.nn.functional as F

from .._log import log_once, logger  # noqa: F401  (re-exported: older callers use attention.log_once)


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


def sdpa_attention(q, k, v, *, bias=None, allowed=None, scale=None):
    nq, nk = q.shape[2], k.shape[2]
    gqa = q.shape[1] != k.shape[1]
    if bias is None:
        if allowed is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=nq > 1, scale=scale, enable_gqa=gqa)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale, enable_gqa=gqa)
    mask = _full_mask(allowed, nq, nk, q.device)
    bias = bias.to(q.dtype).masked_fill(~mask, torch.finfo(q.dtype).min)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale, enable_gqa=gqa)


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
    from flash_attn import flash_attn_func

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


def _masked_block(blocks, allowed, rows, kv, past, dtype, device) -> torch.Tensor:
    mask = _block_mask(allowed, rows, kv, past, device)
    return blocks.block(rows, slice(0, kv)).to(dtype).masked_fill(~mask, float("-inf"))


class _BlockedBiasAttention(torch.autograd.Function):
    """softmax(q·kᵀ·scale + bias)·v over query blocks; keys past a block's last query are skipped.

    Saves q, k, v, the output and the log-sum-exp (O(N)); the backward rebuilds each bias
    block from the small ``BiasBlocks.tensors`` and returns their gradients through autograd.
    """

    @staticmethod
    def forward(actx, scale, rows, allowed, blocks_fn, q, k, v, *tensors):
        blocks = _blocks(blocks_fn, tensors)
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
            bias = _masked_block(blocks, allowed, r, kv, past, wd, q.device)
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
                bias = _masked_block(_blocks(blocks_fn, leaves), allowed, r, kv, past, q.dtype, q.device)
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


def _blocks(fn, tensors):
    from .encodings.base import BiasBlocks

    return BiasBlocks(fn, tuple(tensors))


def blocked_bias_attention(q, k, v, blocks, *, allowed=None, scale=None, rows=None):
    """Attention with the bias of ``blocks`` (a ``BiasBlocks``), one query block at a time."""
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    rows = rows or block_rows(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, *blocks.tensors))
    if needs_grad:
        return _BlockedBiasAttention.apply(scale, rows, allowed, blocks.fn, q, k, v, *blocks.tensors)
    nq, nk = q.shape[2], k.shape[2]
    past, gqa = nk - nq, q.shape[1] != k.shape[1]
    out = []
    for s in range(0, nq, rows):
        r = slice(s, min(nq, s + rows))
        kv = past + r.stop
        bias = _masked_block(blocks, allowed, r, kv, past, q.dtype, q.device)
        out.append(
            F.scaled_dot_product_attention(
                q[:, :, r], k[:, :, :kv], v[:, :, :kv], attn_mask=bias, scale=scale, enable_gqa=gqa
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


# -- the one place that decides the back-end ----------------------------------------------------


def _offers(pe, hook: str) -> bool:
    from .encodings.base import Encoding

    return getattr(type(pe), hook) is not getattr(Encoding, hook)


def plan(backend: str, pe, q, ctx, attention_mask, output_attentions: bool = False) -> str:
    """How this layer's attention runs: fused | eager | flash | own | flex | blocked | sdpa.

    ``backend`` is ``config.attn_backend``; a requested back-end that cannot run here falls
    back (once logged) to the default choice. Default for a position-only bias: FlexAttention
    on CUDA for a causal pass without padding or cache history, else the blocked path
    (measured faster than the N×N bias on the CPU, forward and training; issue 17).
    """
    if "attn_padded" not in ctx.state:  # one host sync per forward, not per layer
        ctx.state["attn_padded"] = attention_mask is not None and not bool(attention_mask.all())
    padded = ctx.state["attn_padded"]
    whole = ctx.past_length == 0 and not padded  # one causal pass over a whole sequence
    if output_attentions or backend == "eager" or (pe.needs_scores and backend != "sdpa"):
        return "eager"
    if backend == "triton":
        if pe.supports_fused(q) and triton_available(q) and whole:
            return "fused"
        if not (pe.supports_fused(q) and triton_available(q)):
            log_once(f"attn_backend='triton': no fused kernel for pe={pe.name!r} on {q.device.type}: using sdpa")
    if _offers(pe, "attention"):  # the encoding computes its own attention (CoPE in query blocks)
        return "own"
    if backend == "flash":
        plain = ctx.past_length == 0 or ctx.query_length == 1
        fits = pe.flash_alibi_slopes() is not None or not _offers(pe, "bias_blocks")  # else: flex / blocked
        half = q.dtype in (torch.float16, torch.bfloat16)  # flash-attn's only dtypes (xpos lifts q/k to float32)
        if flash_available(q) and half and not padded and plain and fits:
            return "flash"
        log_once(f"attn_backend='flash' unavailable for pe={pe.name!r} here: using sdpa")
    if _offers(pe, "bias_blocks"):
        can_flex = _offers(pe, "score_mod") and flex_available(q) and whole
        if backend == "flex" and not can_flex:
            log_once(
                f"attn_backend='flex' cannot run for pe={pe.name!r} here (CPU training, padding or cache): blocked"
            )
        if can_flex and (backend == "flex" or (backend in ("sdpa", "triton", "flash") and q.is_cuda)):
            return "flex"
        return "blocked"
    if backend in ("flex", "blocked"):
        log_once(f"attn_backend={backend!r}: pe={pe.name!r} has no position-only bias: using sdpa")
    return "sdpa"


def attend(how: str, pe, layer: int, q, k, v, ctx, allowed):
    """Run the attention as ``plan`` decided: returns (out (B, H, Nq, dv), probs or None)."""
    scale = pe.scale()
    if how == "fused":
        out = pe.fused_attention(layer, q, k, v, ctx, allowed)
        if out is not None:
            return out, None
        how = "sdpa"
    if how == "own":
        out = pe.attention(layer, q, k, v, ctx, allowed)
        if out is not None:
            return out, None
        how = "sdpa"
    if how == "flash":  # flash-attn expresses no bias but ALiBi's (an encoding may return none)
        slopes = pe.flash_alibi_slopes()
        bias = None if slopes is not None else pe.bias(layer, q, k, ctx)
        if bias is None:
            return flash_attention(q, k, v, alibi_slopes=slopes, scale=scale), None
        log_once(f"attn_backend='flash' cannot express pe={pe.name!r}'s bias: using sdpa")
        how = "sdpa"
    if how == "flex":
        return flex_bias_attention(q, k, v, pe.score_mod(layer, ctx), scale=scale, state=ctx.state), None
    if how == "blocked":
        return blocked_bias_attention(q, k, v, pe.bias_blocks(layer, ctx), allowed=allowed, scale=scale), None
    bias = pe.bias(layer, q, k, ctx)
    if how == "eager":
        return eager_attention(q, k, v, bias=bias, allowed=allowed, scale=scale)
    return sdpa_attention(q, k, v, bias=bias, allowed=allowed, scale=scale), None
