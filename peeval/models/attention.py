"""Attention back-ends: sdpa (default), eager (explicit softmax), flash, triton.

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
    """Masked pre-softmax scores in float32, (B, H, Nq, Nk)."""
    k = repeat_kv(k, q.shape[1] // k.shape[1])
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias.float()
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
