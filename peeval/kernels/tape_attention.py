"""Fused TAPE attention: token output and position streams in one causal flash pass.

TAPE (SPEC 2.3) attends its position state E with the *same* attention map as the token
values: ``out = softmax(QKᵀ·scale) V`` and ``e_out = softmax(QKᵀ·scale) E``. The kernel
computes both from one set of scores, one running max and one log-sum-exp, and its
backward returns **all** gradients: dq and dk include the terms that flow through the
position streams (dP = dO·Vᵀ + dE_out·Eᵀ, and D = rowsum(dO∘O) + rowsum(dE_out∘E_out)),
which the TAPE reference repository's kernel drops; plus dv and de.

Layouts (last dim contiguous; other strides free):
    q, k  (B, H, N, d)    already position-transformed by the encoding, d in 32..128
    v     (B, Hk, N, dv)  Hk divides H (GQA: query head h reads kv head h // (H/Hk))
    e     (B, H, N, X)    per query head, X any width (TAPE with L=R=2: 2d, the (cos, sin) pair)
    out   (B, H, N, dv) in v.dtype, e_out (B, H, N, X) in e.dtype
Causal, Nq == Nk (prefill / training; decoding steps use the sdpa path). fp32 / fp16 /
bf16; softmax statistics and accumulators are fp32; fp32 inputs use IEEE fp32 dots.

``tape_attention`` dispatches: the Triton kernel when triton is importable and the
tensors are on CUDA (or ``TRITON_INTERPRET=1``), else ``tape_attention_reference`` with
one log line.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._log import log_once
from . import _common as common
from ._common import LOG2E, dot_precision, fallback_reason, interpret, kernel_available, last_contig, np2, tl, triton

__all__ = ["tape_attention", "tape_attention_reference", "tape_attention_triton", "kernel_available", "CONFIG"]

#: Launch-config overrides, e.g. ``CONFIG["fwd"] = dict(BM=128, BN=64, num_warps=8, num_stages=3)``
#: (keys: fwd, bwd_kv, bwd_q). Used by benchmarks/gpu_attention.py to sweep block sizes.
CONFIG: dict[str, dict] = {}


# ----------------------------------------------------------------------------------------
# reference (pure torch)
# ----------------------------------------------------------------------------------------
def tape_attention_reference(q, k, v, e, scale=None):
    """Unfused reference: sdpa over the concatenated values [v | e] (what the sdpa back-end does).

    Differentiable by torch autograd. Shapes as in the module docstring; returns (out, e_out).
    """
    h, hk = q.shape[1], v.shape[1]
    if hk != h:
        v = v.repeat_interleave(h // hk, dim=1)
    if k.shape[1] != h:
        k = k.repeat_interleave(h // k.shape[1], dim=1)
    dv = v.shape[-1]
    ve = torch.cat([v, e.to(v.dtype)], dim=-1)
    o = F.scaled_dot_product_attention(q, k, ve, is_causal=True, scale=scale)
    return o[..., :dv], o[..., dv:].to(e.dtype)


# ----------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _tape_tiles(A, sa, B, sb, C, sc, rows, rmask, od, md, odv, mdv, ode, mde):
        """The three tiles TAPE reads at the same rows: d wide from A, dv wide from B, X wide from C,
        i.e. (k, v, e) of key rows or (q, dO, dE_out) of query rows."""
        a = common.load_tile(A, rows, sa, od, rmask, md)
        b = common.load_tile(B, rows, sb, odv, rmask, mdv)
        c = common.load_tile(C, rows, sc, ode, rmask, mde)
        return a, b, c

    @triton.jit
    def _tape_fwd(
        Q, K, V, E, Out, EO, LSE,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, seb, seh, sen,
        sob, soh, son, seob, seoh, seon,
        H, G, N, qk_scale,
        D: tl.constexpr, DV: tl.constexpr, DE: tl.constexpr,
        BD: tl.constexpr, BDV: tl.constexpr, BDE: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    ):  # fmt: skip
        start_m, offs_m, mm, bh, b, h, hk = common.query_program(BM, H, G, N)
        offs_n = tl.arange(0, BN)
        od, md = common.span(0, BD, D)
        odv, mdv = common.span(0, BDV, DV)
        ode, mde = common.span(0, BDE, DE)
        qp = Q + b * sqb + h * sqh
        kp = K + b * skb + hk * skh
        vp = V + b * svb + hk * svh
        ep = E + b * seb + h * seh
        q = common.load_tile(qp, offs_m, sqn, od, mm, md)
        m_i = tl.full([BM], float("-inf"), tl.float32)
        l_i = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, BDV], tl.float32)
        acc_e = tl.zeros([BM, BDE], tl.float32)
        # off-diagonal key blocks: fully visible, in range
        for start_n in range(0, start_m, BN):
            on = start_n + offs_n
            k = tl.load(kp + on[:, None] * skn + od[None, :], mask=md[None, :], other=0.0)
            v = tl.load(vp + on[:, None] * svn + odv[None, :], mask=mdv[None, :], other=0.0)
            ev = tl.load(ep + on[:, None] * sen + ode[None, :], mask=mde[None, :], other=0.0)
            s = common.dot(q, tl.trans(k), PREC) * qk_scale
            p, alpha, m_i, l_i = common.online_softmax(s, m_i, l_i)
            acc = acc * alpha[:, None] + common.dot(p.to(v.dtype), v, PREC)
            acc_e = acc_e * alpha[:, None] + common.dot(p.to(ev.dtype), ev, PREC)
        # diagonal key blocks: causal mask and the ragged tail
        hi = tl.minimum(start_m + BM, N)
        for start_n in range(start_m, hi, BN):
            on = start_n + offs_n
            mn = on < N
            k, v, ev = _tape_tiles(kp, skn, vp, svn, ep, sen, on, mn, od, md, odv, mdv, ode, mde)
            s = common.dot(q, tl.trans(k), PREC) * qk_scale
            s = tl.where((offs_m[:, None] >= on[None, :]) & mn[None, :], s, float("-inf"))
            p, alpha, m_i, l_i = common.online_softmax(s, m_i, l_i)
            acc = acc * alpha[:, None] + common.dot(p.to(v.dtype), v, PREC)
            acc_e = acc_e * alpha[:, None] + common.dot(p.to(ev.dtype), ev, PREC)
        inv = 1.0 / l_i
        tl.store(LSE + bh * N + offs_m, m_i + tl.log2(l_i), mask=mm)
        op = Out + b * sob + h * soh
        tl.store(
            op + offs_m[:, None] * son + odv[None, :],
            (acc * inv[:, None]).to(Out.dtype.element_ty),
            mask=mm[:, None] & mdv[None, :],
        )
        eop = EO + b * seob + h * seoh
        tl.store(
            eop + offs_m[:, None] * seon + ode[None, :],
            (acc_e * inv[:, None]).to(EO.dtype.element_ty),
            mask=mm[:, None] & mde[None, :],
        )

    @triton.jit
    def _tape_bwd_pre(
        Out, DO, EO, DEO, DELTA,
        sob, soh, son, sdob, sdoh, sdon, seob, seoh, seon, sdeb, sdeh, sden,
        H, N,
        DV: tl.constexpr, DE: tl.constexpr, BDV: tl.constexpr, BDE: tl.constexpr, BM: tl.constexpr,
    ):  # fmt: skip
        """DELTA = rowsum(dO∘O) + rowsum(dE_out∘E_out): the position streams' share included."""
        bh, b, h, _ = common.program_heads(H, 1)
        offs_m, mm = common.span(tl.program_id(0) * BM, BM, N)
        odv, mdv = common.span(0, BDV, DV)
        ode, mde = common.span(0, BDE, DE)
        o = common.load_tile(Out + b * sob + h * soh, offs_m, son, odv, mm, mdv)
        do = common.load_tile(DO + b * sdob + h * sdoh, offs_m, sdon, odv, mm, mdv)
        eo = common.load_tile(EO + b * seob + h * seoh, offs_m, seon, ode, mm, mde)
        deo = common.load_tile(DEO + b * sdeb + h * sdeh, offs_m, sden, ode, mm, mde)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1) + tl.sum(eo.to(tl.float32) * deo.to(tl.float32), 1)
        tl.store(DELTA + bh * N + offs_m, delta, mask=mm)

    @triton.jit
    def _tape_bwd_kv(
        Q, K, V, E, DO, DEO, LSE, DELTA, DK, DV_, DE_,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, seb, seh, sen,
        sdob, sdoh, sdon, sdeb, sdeh, sden,
        H, G, N, qk_scale, sm_scale,
        D: tl.constexpr, DV: tl.constexpr, DE: tl.constexpr,
        BD: tl.constexpr, BDV: tl.constexpr, BDE: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    ):  # fmt: skip
        """One key block per program: dk, dv, de (outputs per *query* head, (B, H, N, ·) contiguous)."""
        start_n, offs_n, mn, bh, b, h, hk = common.key_program(BN, H, G, N)
        od, md = common.span(0, BD, D)
        odv, mdv = common.span(0, BDV, DV)
        ode, mde = common.span(0, BDE, DE)
        kp, vp, ep = K + b * skb + hk * skh, V + b * svb + hk * svh, E + b * seb + h * seh
        k, v, ev = _tape_tiles(kp, skn, vp, svn, ep, sen, offs_n, mn, od, md, odv, mdv, ode, mde)
        dk = tl.zeros([BN, BD], tl.float32)
        dv = tl.zeros([BN, BDV], tl.float32)
        de = tl.zeros([BN, BDE], tl.float32)
        qp = Q + b * sqb + h * sqh
        dop = DO + b * sdob + h * sdoh
        dep = DEO + b * sdeb + h * sdeh
        lp = LSE + bh * N
        dlp = DELTA + bh * N
        for phase in tl.static_range(2):
            lo, hi = common.query_blocks(phase, start_n, BN, N)
            for start_m in range(lo, hi, BM):
                om, mm = common.span(start_m, BM, N)
                q, do, deo = _tape_tiles(qp, sqn, dop, sdon, dep, sden, om, mm, od, md, odv, mdv, ode, mde)
                lse = tl.load(lp + om, mask=mm, other=float("inf"))
                dl = tl.load(dlp + om, mask=mm, other=0.0)
                s = common.dot(q, tl.trans(k), PREC) * qk_scale
                p = tl.exp2(s - lse[:, None])
                if phase == 0:
                    p = tl.where(om[:, None] >= offs_n[None, :], p, 0.0)
                dv += common.dot(tl.trans(p.to(do.dtype)), do, PREC)
                de += common.dot(tl.trans(p.to(deo.dtype)), deo, PREC)
                dp = common.dot(do, tl.trans(v), PREC)
                dp += common.dot(deo, tl.trans(ev), PREC)  # the position streams' share of dP
                ds = p * (dp - dl[:, None])
                dk += common.dot(tl.trans(ds.to(q.dtype)), q, PREC)
        common.store_rows(DK, bh * N, offs_n, D, od, mn, md, dk * sm_scale)
        common.store_rows(DV_, bh * N, offs_n, DV, odv, mn, mdv, dv)
        common.store_rows(DE_, bh * N, offs_n, DE, ode, mn, mde, de)

    @triton.jit
    def _tape_bwd_q(
        Q, K, V, E, DO, DEO, LSE, DELTA, DQ,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, seb, seh, sen,
        sdob, sdoh, sdon, sdeb, sdeh, sden,
        H, G, N, qk_scale, sm_scale,
        D: tl.constexpr, DV: tl.constexpr, DE: tl.constexpr,
        BD: tl.constexpr, BDV: tl.constexpr, BDE: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
    ):  # fmt: skip
        """One query block per program: dq (including the position streams' share)."""
        start_m, offs_m, mm, bh, b, h, hk = common.query_program(BM, H, G, N)
        od, md = common.span(0, BD, D)
        odv, mdv = common.span(0, BDV, DV)
        ode, mde = common.span(0, BDE, DE)
        qp, dop, dep = Q + b * sqb + h * sqh, DO + b * sdob + h * sdoh, DEO + b * sdeb + h * sdeh
        q, do, deo = _tape_tiles(qp, sqn, dop, sdon, dep, sden, offs_m, mm, od, md, odv, mdv, ode, mde)
        lse = tl.load(LSE + bh * N + offs_m, mask=mm, other=float("inf"))
        dl = tl.load(DELTA + bh * N + offs_m, mask=mm, other=0.0)
        kp = K + b * skb + hk * skh
        vp = V + b * svb + hk * svh
        ep = E + b * seb + h * seh
        dq = tl.zeros([BM, BD], tl.float32)
        for phase in tl.static_range(2):
            lo, hi = common.key_blocks(phase, start_m, BM, N)
            for start_n in range(lo, hi, BN):
                on, mn = common.span(start_n, BN, N)
                k, v, ev = _tape_tiles(kp, skn, vp, svn, ep, sen, on, mn, od, md, odv, mdv, ode, mde)
                s = common.dot(q, tl.trans(k), PREC) * qk_scale
                p = tl.exp2(s - lse[:, None])
                if phase == 1:
                    p = tl.where((offs_m[:, None] >= on[None, :]) & mn[None, :], p, 0.0)
                dp = common.dot(do, tl.trans(v), PREC)
                dp += common.dot(deo, tl.trans(ev), PREC)
                ds = p * (dp - dl[:, None])
                dq += common.dot(ds.to(k.dtype), k, PREC)
        common.store_rows(DQ, bh * N, offs_m, D, od, mm, md, dq * sm_scale)


def _cfg(kind: str, d: int, dv: int, de: int, dtype: torch.dtype) -> dict:
    if kind in CONFIG:
        return dict(CONFIG[kind])
    if interpret():
        return dict(BM=16, BN=16, num_warps=4, num_stages=1)
    wide = max(np2(d), np2(dv), np2(de)) > 128 or dtype == torch.float32
    if kind == "fwd":
        return dict(BM=64, BN=64, num_warps=4, num_stages=2 if wide else 3)
    if kind == "bwd_kv":  # d=64 choices from the H100 sweep (benchmarks/gpu_attention.py --sweep)
        return dict(BM=32, BN=64, num_warps=4, num_stages=2) if wide else dict(BM=64, BN=64, num_warps=4, num_stages=2)
    return dict(BM=64, BN=32, num_warps=4, num_stages=2) if wide else dict(BM=128, BN=32, num_warps=8, num_stages=2)


class _TapeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, e, scale):
        q, k, v, e = (last_contig(t) for t in (q, k, v, e))
        b, h, n, d = q.shape
        hk, dv, de = v.shape[1], v.shape[-1], e.shape[-1]
        assert k.shape == (b, hk, n, d) and v.shape[:3] == (b, hk, n) and e.shape[:3] == (b, h, n), (
            "tape_attention: q,k (B,H,N,d) / (B,Hk,N,d), v (B,Hk,N,dv), e (B,H,N,X), causal with Nq == Nk"
        )
        assert h % hk == 0
        sm_scale = scale if scale is not None else 1.0 / math.sqrt(d)
        out = torch.empty((b, h, n, dv), device=q.device, dtype=v.dtype)
        e_out = torch.empty((b, h, n, de), device=q.device, dtype=e.dtype)
        lse = torch.empty((b * h, n), device=q.device, dtype=torch.float32)
        c = _cfg("fwd", d, dv, de, q.dtype)
        grid = (triton.cdiv(n, c["BM"]), b * h)
        _tape_fwd[grid](
            q, k, v, e, out, e_out, lse,
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *e.stride()[:3],
            *out.stride()[:3], *e_out.stride()[:3],
            h, h // hk, n, sm_scale * LOG2E,
            D=d, DV=dv, DE=de, BD=np2(d), BDV=np2(dv), BDE=np2(de),
            BM=c["BM"], BN=c["BN"], PREC=dot_precision(q.dtype), num_warps=c["num_warps"], num_stages=c["num_stages"],
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, e, out, e_out, lse)
        ctx.sm_scale = sm_scale
        return out, e_out

    @staticmethod
    def backward(ctx, do, deo):
        q, k, v, e, out, e_out, lse = ctx.saved_tensors
        b, h, n, d = q.shape
        hk, dv, de = v.shape[1], v.shape[-1], e.shape[-1]
        do = torch.zeros_like(out) if do is None else last_contig(do)
        deo = torch.zeros_like(e_out) if deo is None else last_contig(deo)
        delta = torch.empty_like(lse)
        bdv, bde, bd = np2(dv), np2(de), np2(d)
        _tape_bwd_pre[(triton.cdiv(n, 64), b * h)](
            out, do, e_out, deo, delta,
            *out.stride()[:3], *do.stride()[:3], *e_out.stride()[:3], *deo.stride()[:3],
            h, n, DV=dv, DE=de, BDV=bdv, BDE=bde, BM=64,
        )  # fmt: skip
        dq = torch.empty((b, h, n, d), device=q.device, dtype=q.dtype)
        gdt = (lambda t: t.dtype) if hk == h else (lambda t: torch.float32)  # GQA: sum groups in fp32
        dk = torch.empty((b, h, n, d), device=q.device, dtype=gdt(k))
        dvv = torch.empty((b, h, n, dv), device=q.device, dtype=gdt(v))
        dee = torch.empty((b, h, n, de), device=q.device, dtype=e.dtype)
        common = (
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *e.stride()[:3],
            *do.stride()[:3], *deo.stride()[:3],
            h, h // hk, n, ctx.sm_scale * LOG2E, ctx.sm_scale,
        )  # fmt: skip
        meta = dict(D=d, DV=dv, DE=de, BD=bd, BDV=bdv, BDE=bde, PREC=dot_precision(q.dtype))
        c = _cfg("bwd_kv", d, dv, de, q.dtype)
        _tape_bwd_kv[(triton.cdiv(n, c["BN"]), b * h)](
            q, k, v, e, do, deo, lse, delta, dk, dvv, dee, *common,
            BM=c["BM"], BN=c["BN"], num_warps=c["num_warps"], num_stages=c["num_stages"], **meta,
        )  # fmt: skip
        c = _cfg("bwd_q", d, dv, de, q.dtype)
        _tape_bwd_q[(triton.cdiv(n, c["BM"]), b * h)](
            q, k, v, e, do, deo, lse, delta, dq, *common,
            BM=c["BM"], BN=c["BN"], num_warps=c["num_warps"], num_stages=c["num_stages"], **meta,
        )  # fmt: skip
        if hk != h:  # GQA: sum the per-query-head gradients of each kv head
            dk = dk.view(b, hk, h // hk, n, d).sum(2).to(k.dtype)
            dvv = dvv.view(b, hk, h // hk, n, dv).sum(2).to(v.dtype)
        return dq, dk, dvv, dee, None


def tape_attention_triton(q, k, v, e, scale=None):
    """The fused kernel (no fallback): returns (out, e_out)."""
    return _TapeAttention.apply(q, k, v, e, scale)


def tape_attention(q, k, v, e, scale=None):
    """Causal attention of v and the position streams e with shared scores.

    q, k (B, H, N, d) position-transformed; v (B, Hk, N, dv); e (B, H, N, X); Nq == Nk.
    Returns (out (B, H, N, dv), e_out (B, H, N, X)). Uses the Triton kernel when available
    (CUDA tensors, or TRITON_INTERPRET=1), else the sdpa reference with one log line.
    """
    if kernel_available(q):
        return tape_attention_triton(q, k, v, e, scale)
    why = fallback_reason(q)
    log_once(f"tape_attention: fused Triton kernel unavailable ({why}): using the sdpa reference")
    return tape_attention_reference(q, k, v, e, scale)
