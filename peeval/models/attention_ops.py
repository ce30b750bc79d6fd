"""The attention computations the back-ends run: sdpa (default), eager (explicit softmax: the reference),
flash (flash-attn 2), and for a bias that depends on positions only (a ``PositionBias``) blocked (sdpa over query
blocks, the bias rebuilt per block, so memory stays linear in N in training too) and flex (FlexAttention, a
compiled ``score_mod``). Apart from the planner (:mod:`peeval.models.attention`), which changes when the choice
of back-end does, while these change when a kernel does; the CPU kernels' needs (equal q/k/v widths) are met here.

All take q (B, H, Nq, d'), k (B, Hk, Nk, d'), v (B, Hk, Nk, dv) — dv may exceed d' when
an encoding appends extra value channels — an optional additive ``bias`` (B|1, H, Nq, Nk)
and a boolean ``allowed`` mask (B, 1, Nq, Nk) or None when plain causal masking suffices.
"""

from __future__ import annotations

import importlib.util
import math

import torch
import torch.nn.functional as F


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
    # compiled: built without reading the mask (no host sync); for a mask of ones it is the causal mask
    if attention_mask is not None and (torch.compiler.is_compiling() or bool((attention_mask == 0).any())):
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
    run = flex_attention if torch.compiler.is_compiling() else _compiled_flex  # inside a compiled model: traced
    nq, nk = q.shape[2], k.shape[2]
    key = ("flex_block_mask", nq, nk, q.device)
    mask = state.get(key) if state is not None else None
    if mask is None:
        mask = create_block_mask(causal_mod, None, None, nq, nk, device=q.device)
        if state is not None:
            state[key] = mask
    return run(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def causal_mod(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx
