"""Fused PoPE attention: magnitudes and phases computed inside a causal flash kernel.

PoPE (SPEC 2.2, seeds/pope.txt §3): μ_q = softplus(q), μ_k = softplus(k) and

    a_ts = scale · Σ_{c=1..d} μ_qc μ_kc cos((s − t)·θ_c + δ_c)

with q at position t, k at position s, θ (d,) one frequency per element and δ (H, d) a
per-head phase on the key side (clamped to [−2π, 0] by the caller). Written in cartesian
form q̃ = μ_q·[cos tθ, sin tθ], k̃ = μ_k·[cos(sθ+δ), sin(sθ+δ)], a = scale·(q̃ · k̃) over
2d channels — the kernel builds q̃ and k̃ tile by tile in registers from the raw q/k, so no
2×-wide q/k ever reaches global memory. The backward returns dq, dk, dv and dδ (dδ summed
over batch and positions deterministically, per key block).

Layouts (last dim contiguous; other strides free):
    q      (B, H, N, d)  raw (before softplus), d in 32..128
    k, v   (B, Hk, N, d) / (B, Hk, N, dv), Hk divides H (GQA; δ stays per query head)
    q_pos, k_pos  (B, N) or (N,) position ids (any numeric dtype; used as fp32 · θ)
    theta  (d,) fp32 frequencies θ_c;  delta (H, d) or None (no phase shift)
    out    (B, H, N, dv) in v.dtype
Causal on the index (Nq == Nk). fp32 / fp16 / bf16; trig, softplus, softmax statistics
and accumulators in fp32; q̃/k̃ are rounded to the input dtype for the tensor-core dots
(as the sdpa reference does); fp32 inputs use IEEE fp32 dots.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._log import log_once
from . import _common as common
from ._common import LOG2E, dot_precision, fallback_reason, interpret, kernel_available, last_contig, np2, tl, triton

try:
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover
    libdevice = None

__all__ = ["pope_attention", "pope_attention_reference", "pope_attention_triton", "kernel_available", "CONFIG"]

#: Launch-config overrides (keys: fwd, bwd_kv, bwd_q), e.g. for block-size sweeps.
CONFIG: dict[str, dict] = {}


def _positions(pos: torch.Tensor, b: int, n: int, device) -> torch.Tensor:
    pos = torch.as_tensor(pos, device=device).to(torch.float32)
    if pos.dim() == 1:
        pos = pos[None]
    return pos.expand(b, n)


# ----------------------------------------------------------------------------------------
# reference (pure torch)
# ----------------------------------------------------------------------------------------
def pope_cartesian(q, k, q_pos, k_pos, theta, delta=None, softplus=True):
    """The 2d-wide cartesian q̃, k̃ (seeds/pope.txt Eq. 6-9), per query head, in q's dtype."""
    b, h, n, d = q.shape
    if k.shape[1] != h:
        k = k.repeat_interleave(h // k.shape[1], dim=1)
    qf, kf = q.float(), k.float()
    if q.dtype == torch.float64:
        qf, kf = q, k
    mq = F.softplus(qf) if softplus else qf
    mk = F.softplus(kf) if softplus else kf
    th = theta.to(qf.dtype)
    phi = _positions(q_pos, b, n, q.device).to(qf.dtype)[:, None, :, None] * th  # (B, 1, N, d)
    psi = _positions(k_pos, b, k.shape[2], q.device).to(qf.dtype)[:, None, :, None] * th
    if delta is not None:
        psi = psi + delta.to(qf.dtype)[None, :, None, :]
    qt = torch.cat([mq * torch.cos(phi), mq * torch.sin(phi)], dim=-1).to(q.dtype)
    kt = torch.cat([mk * torch.cos(psi), mk * torch.sin(psi)], dim=-1).to(q.dtype)
    return qt, kt


def pope_attention_reference(q, k, v, q_pos, k_pos, theta, delta=None, softplus=True, scale=None):
    """sdpa over the 2d-wide cartesian q̃/k̃ with scale 1/√d (what the sdpa back-end does).

    Differentiable by torch autograd (dq, dk, dv, dδ). Returns out (B, H, N, dv).
    """
    h = q.shape[1]
    qt, kt = pope_cartesian(q, k, q_pos, k_pos, theta, delta, softplus)
    if v.shape[1] != h:
        v = v.repeat_interleave(h // v.shape[1], dim=1)
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return F.scaled_dot_product_attention(qt, kt, v, is_causal=True, scale=scale)


# ----------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _magnitude(x, SOFTPLUS: tl.constexpr):
        if SOFTPLUS:  # stable softplus on the exp2/log2 units
            return tl.maximum(x, 0.0) + 0.6931471805599453 * tl.log2(1.0 + tl.exp2(-1.4426950408889634 * tl.abs(x)))
        else:
            return x

    @triton.jit
    def _cos_sin(x, FAST: tl.constexpr):
        """(cos x, sin x). FAST (compiled GPU code): reduce to [-pi, pi] with a two-part 2pi
        (exact for |x| < 2^16·2pi), then the hardware approximations (abs error < 1e-6)."""
        if FAST:
            n = tl.floor(x * 0.15915494309189535 + 0.5)
            r = x - n * 6.28125
            r = r - n * 0.0019353071795864769
            return libdevice.fast_cosf(r), libdevice.fast_sinf(r)
        else:
            return tl.cos(x), tl.sin(x)

    @triton.jit
    def _rotary_columns(TH, DL, h, D, BD: tl.constexpr, HAS_DELTA: tl.constexpr):
        """The d columns (offsets, mask, padded to BD) with their frequencies θ and head h's key-side
        phase δ (zeros without one): (od, md, th, dl)."""
        od, md = common.span(0, BD, D)
        th = tl.load(TH + od, mask=md, other=0.0)
        if HAS_DELTA:
            dl = tl.load(DL + h * D + od, mask=md, other=0.0)
        else:
            dl = tl.zeros([BD], tl.float32)
        return od, md, th, dl

    @triton.jit
    def _pope_tile(
        X, XP, rows, stride, rmask, od, md, th, dl,
        SHIFT: tl.constexpr, SOFTPLUS: tl.constexpr, FAST: tl.constexpr,
    ):  # fmt: skip
        """Raw q (or k) rows and their cartesian form at angle pos·θ (+ δ where SHIFT, the key side):
        (x, μ·cos in x's dtype, μ·sin in x's dtype, μ, cos, sin)."""
        x = common.load_tile(X, rows, stride, od, rmask, md)
        mu = tl.where(md[None, :], _magnitude(x.to(tl.float32), SOFTPLUS), 0.0)
        ang = tl.load(XP + rows, mask=rmask, other=0.0)[:, None] * th[None, :]
        if SHIFT:
            ang = ang + dl[None, :]
        c, s = _cos_sin(ang, FAST)
        return x, (mu * c).to(x.dtype), (mu * s).to(x.dtype), mu, c, s

    @triton.jit
    def _pope_fwd(
        Q, K, V, QP, KP, TH, DL, Out, LSE,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, sqpb, skpb,
        H, G, N, qk_scale,
        D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
        SOFTPLUS: tl.constexpr, HAS_DELTA: tl.constexpr, FAST: tl.constexpr,
    ):  # fmt: skip
        start_m, offs_m, mm, bh, b, h, hk = common.query_program(BM, H, G, N)
        od, md, th, dl = _rotary_columns(TH, DL, h, D, BD, HAS_DELTA)
        odv, mdv = common.span(0, BDV, DV)
        qp, qpp = Q + b * sqb + h * sqh, QP + b * sqpb
        q, qx, qy, a, cphi, sphi = _pope_tile(qp, qpp, offs_m, sqn, mm, od, md, th, dl, False, SOFTPLUS, FAST)
        kp = K + b * skb + hk * skh
        vp = V + b * svb + hk * svh
        kpp = KP + b * skpb
        m_i = tl.full([BM], float("-inf"), tl.float32)
        l_i = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, BDV], tl.float32)
        for phase in tl.static_range(2):
            lo, hi = common.key_blocks(phase, start_m, BM, N)
            for start_n in range(lo, hi, BN):
                on, mn = common.span(start_n, BN, N)
                k, kx, ky, bk, cpsi, spsi = _pope_tile(kp, kpp, on, skn, mn, od, md, th, dl, True, SOFTPLUS, FAST)
                v = common.load_tile(vp, on, svn, odv, mn, mdv)
                s = (common.dot(qx, tl.trans(kx), PREC) + common.dot(qy, tl.trans(ky), PREC)) * qk_scale
                if phase == 1:
                    s = tl.where((offs_m[:, None] >= on[None, :]) & mn[None, :], s, float("-inf"))
                p, alpha, m_i, l_i = common.online_softmax(s, m_i, l_i)
                acc = acc * alpha[:, None] + common.dot(p.to(v.dtype), v, PREC)
        tl.store(LSE + bh * N + offs_m, m_i + tl.log2(l_i), mask=mm)
        tl.store(
            Out + b * sob + h * soh + offs_m[:, None] * son + odv[None, :],
            (acc / l_i[:, None]).to(Out.dtype.element_ty),
            mask=mm[:, None] & mdv[None, :],
        )

    @triton.jit
    def _pope_bwd_pre(
        Out, DO, DELTA, sob, soh, son, sdob, sdoh, sdon, H, N, DV: tl.constexpr, BDV: tl.constexpr, BM: tl.constexpr
    ):
        bh, b, h, _ = common.program_heads(H, 1)
        offs_m, mm = common.span(tl.program_id(0) * BM, BM, N)
        odv, mdv = common.span(0, BDV, DV)
        o = common.load_tile(Out + b * sob + h * soh, offs_m, son, odv, mm, mdv)
        do = common.load_tile(DO + b * sdob + h * sdoh, offs_m, sdon, odv, mm, mdv)
        tl.store(DELTA + bh * N + offs_m, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=mm)

    @triton.jit
    def _pope_bwd_kv(
        Q, K, V, QP, KP, TH, DL, DO, LSE, DELTA, DK, DV_, DDL,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdob, sdoh, sdon, sqpb, skpb,
        H, G, N, qk_scale, sm_scale,
        D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
        SOFTPLUS: tl.constexpr, HAS_DELTA: tl.constexpr, FAST: tl.constexpr,
    ):  # fmt: skip
        """One key block per program: dk, dv (per query head) and this block's share of dδ."""
        start_n, offs_n, mn, bh, b, h, hk = common.key_program(BN, H, G, N)
        od, md, th, dl = _rotary_columns(TH, DL, h, D, BD, HAS_DELTA)
        odv, mdv = common.span(0, BDV, DV)
        kp, kpp = K + b * skb + hk * skh, KP + b * skpb
        k, kx, ky, bk, cp, sp = _pope_tile(kp, kpp, offs_n, skn, mn, od, md, th, dl, True, SOFTPLUS, FAST)
        v = common.load_tile(V + b * svb + hk * svh, offs_n, svn, odv, mn, mdv)
        dkx = tl.zeros([BN, BD], tl.float32)
        dky = tl.zeros([BN, BD], tl.float32)
        dv = tl.zeros([BN, BDV], tl.float32)
        qp = Q + b * sqb + h * sqh
        qpp = QP + b * sqpb
        dop = DO + b * sdob + h * sdoh
        for phase in tl.static_range(2):
            lo, hi = common.query_blocks(phase, start_n, BN, N)
            for start_m in range(lo, hi, BM):
                om, mm = common.span(start_m, BM, N)
                q, qx, qy, a, cphi, sphi = _pope_tile(qp, qpp, om, sqn, mm, od, md, th, dl, False, SOFTPLUS, FAST)
                do = common.load_tile(dop, om, sdon, odv, mm, mdv)
                lse = tl.load(LSE + bh * N + om, mask=mm, other=float("inf"))
                dlt = tl.load(DELTA + bh * N + om, mask=mm, other=0.0)
                s = (common.dot(qx, tl.trans(kx), PREC) + common.dot(qy, tl.trans(ky), PREC)) * qk_scale
                p = tl.exp2(s - lse[:, None])
                if phase == 0:
                    p = tl.where(om[:, None] >= offs_n[None, :], p, 0.0)
                dv += common.dot(tl.trans(p.to(do.dtype)), do, PREC)
                dp = common.dot(do, tl.trans(v), PREC)
                ds = (p * (dp - dlt[:, None])).to(q.dtype)
                dkx += common.dot(tl.trans(ds), qx, PREC)
                dky += common.dot(tl.trans(ds), qy, PREC)
        dkx = dkx * sm_scale
        dky = dky * sm_scale
        dmag = dkx * cp + dky * sp
        if SOFTPLUS:
            dmag = dmag * tl.sigmoid(k.to(tl.float32))
        common.store_rows(DK, bh * N, offs_n, D, od, mn, md, dmag)
        common.store_rows(DV_, bh * N, offs_n, DV, odv, mn, mdv, dv)
        if HAS_DELTA:
            # d a / d ψ: ∂(μ cos ψ)/∂ψ = −μ sin ψ, ∂(μ sin ψ)/∂ψ = μ cos ψ
            dpsi = bk * (dky * cp - dkx * sp)
            dpsi = tl.where(mn[:, None], dpsi, 0.0)
            tl.store(DDL + (bh * tl.num_programs(0) + tl.program_id(0)) * D + od, tl.sum(dpsi, 0), mask=md)

    @triton.jit
    def _pope_bwd_q(
        Q, K, V, QP, KP, TH, DL, DO, LSE, DELTA, DQ,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdob, sdoh, sdon, sqpb, skpb,
        H, G, N, qk_scale, sm_scale,
        D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr,
        SOFTPLUS: tl.constexpr, HAS_DELTA: tl.constexpr, FAST: tl.constexpr,
    ):  # fmt: skip
        start_m, offs_m, mm, bh, b, h, hk = common.query_program(BM, H, G, N)
        od, md, th, dl = _rotary_columns(TH, DL, h, D, BD, HAS_DELTA)
        odv, mdv = common.span(0, BDV, DV)
        qp, qpp = Q + b * sqb + h * sqh, QP + b * sqpb
        q, qx, qy, a, cphi, sphi = _pope_tile(qp, qpp, offs_m, sqn, mm, od, md, th, dl, False, SOFTPLUS, FAST)
        do = common.load_tile(DO + b * sdob + h * sdoh, offs_m, sdon, odv, mm, mdv)
        lse = tl.load(LSE + bh * N + offs_m, mask=mm, other=float("inf"))
        dlt = tl.load(DELTA + bh * N + offs_m, mask=mm, other=0.0)
        kp = K + b * skb + hk * skh
        vp = V + b * svb + hk * svh
        kpp = KP + b * skpb
        dqx = tl.zeros([BM, BD], tl.float32)
        dqy = tl.zeros([BM, BD], tl.float32)
        for phase in tl.static_range(2):
            lo, hi = common.key_blocks(phase, start_m, BM, N)
            for start_n in range(lo, hi, BN):
                on, mn = common.span(start_n, BN, N)
                k, kx, ky, bk, cpsi, spsi = _pope_tile(kp, kpp, on, skn, mn, od, md, th, dl, True, SOFTPLUS, FAST)
                v = common.load_tile(vp, on, svn, odv, mn, mdv)
                s = (common.dot(qx, tl.trans(kx), PREC) + common.dot(qy, tl.trans(ky), PREC)) * qk_scale
                p = tl.exp2(s - lse[:, None])
                if phase == 1:
                    p = tl.where((offs_m[:, None] >= on[None, :]) & mn[None, :], p, 0.0)
                dp = common.dot(do, tl.trans(v), PREC)
                ds = (p * (dp - dlt[:, None])).to(k.dtype)
                dqx += common.dot(ds, kx, PREC)
                dqy += common.dot(ds, ky, PREC)
        dmag = (dqx * cphi + dqy * sphi) * sm_scale
        if SOFTPLUS:
            dmag = dmag * tl.sigmoid(q.to(tl.float32))
        common.store_rows(DQ, bh * N, offs_m, D, od, mm, md, dmag)


def _cfg(kind: str, d: int, dv: int, dtype: torch.dtype) -> dict:
    if kind in CONFIG:
        return dict(CONFIG[kind])
    if interpret():
        return dict(BM=16, BN=16, num_warps=4, num_stages=1)
    wide = max(np2(d), np2(dv)) > 64 or dtype == torch.float32
    if kind == "fwd":
        return dict(BM=64, BN=64, num_warps=4, num_stages=2) if wide else dict(BM=128, BN=64, num_warps=8, num_stages=3)
    if kind == "bwd_kv":  # d=64 choices from the H100 sweep (benchmarks/gpu_attention.py --sweep)
        return dict(BM=32, BN=64, num_warps=4, num_stages=2) if wide else dict(BM=32, BN=128, num_warps=8, num_stages=2)
    return dict(BM=64, BN=32, num_warps=4, num_stages=2) if wide else dict(BM=128, BN=32, num_warps=8, num_stages=2)


class _PopeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, q_pos, k_pos, theta, delta, softplus, scale):
        q, k, v = (last_contig(t) for t in (q, k, v))
        b, h, n, d = q.shape
        hk, dv = v.shape[1], v.shape[-1]
        assert k.shape == (b, hk, n, d) and v.shape[:3] == (b, hk, n) and h % hk == 0 and q.dtype == k.dtype, (
            "pope_attention: q (B,H,N,d), k (B,Hk,N,d), v (B,Hk,N,dv), causal with Nq == Nk"
        )
        qp = last_contig(_positions(q_pos, b, n, q.device))
        kp = last_contig(_positions(k_pos, b, n, q.device))
        th = theta.to(device=q.device, dtype=torch.float32).contiguous()
        assert th.shape == (d,)
        has_delta = delta is not None
        dl = delta.to(torch.float32).contiguous() if has_delta else th  # dummy pointer when absent
        assert not has_delta or dl.shape == (h, d)
        sm_scale = scale if scale is not None else 1.0 / math.sqrt(d)
        out = torch.empty((b, h, n, dv), device=q.device, dtype=v.dtype)
        lse = torch.empty((b * h, n), device=q.device, dtype=torch.float32)
        c = _cfg("fwd", d, dv, q.dtype)
        _pope_fwd[(triton.cdiv(n, c["BM"]), b * h)](
            q, k, v, qp, kp, th, dl, out, lse,
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3], qp.stride(0), kp.stride(0),
            h, h // hk, n, sm_scale * LOG2E,
            D=d, DV=dv, BD=np2(d), BDV=np2(dv), BM=c["BM"], BN=c["BN"], PREC=dot_precision(q.dtype),
            SOFTPLUS=bool(softplus), HAS_DELTA=has_delta, FAST=not interpret(),
            num_warps=c["num_warps"], num_stages=c["num_stages"],
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, qp, kp, th, dl, out, lse)
        ctx.cfg = (sm_scale, bool(softplus), has_delta, delta.dtype if has_delta else None)
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, qp, kp, th, dl, out, lse = ctx.saved_tensors
        sm_scale, softplus, has_delta, delta_dtype = ctx.cfg
        b, h, n, d = q.shape
        hk, dv = v.shape[1], v.shape[-1]
        do = last_contig(do)
        bd, bdv = np2(d), np2(dv)
        delta = torch.empty_like(lse)
        _pope_bwd_pre[(triton.cdiv(n, 64), b * h)](
            out, do, delta, *out.stride()[:3], *do.stride()[:3], h, n, DV=dv, BDV=bdv, BM=64
        )
        gdt = (lambda t: t.dtype) if hk == h else (lambda t: torch.float32)
        dq = torch.empty((b, h, n, d), device=q.device, dtype=q.dtype)
        dk = torch.empty((b, h, n, d), device=q.device, dtype=gdt(k))
        dvv = torch.empty((b, h, n, dv), device=q.device, dtype=gdt(v))
        common = (
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], qp.stride(0), kp.stride(0),
            h, h // hk, n, sm_scale * LOG2E, sm_scale,
        )  # fmt: skip
        meta = dict(
            D=d,
            DV=dv,
            BD=bd,
            BDV=bdv,
            PREC=dot_precision(q.dtype),
            SOFTPLUS=softplus,
            HAS_DELTA=has_delta,
            FAST=not interpret(),
        )
        c = _cfg("bwd_kv", d, dv, q.dtype)
        nb = triton.cdiv(n, c["BN"])
        ddl = torch.empty((b, h, nb, d), device=q.device, dtype=torch.float32) if has_delta else th
        _pope_bwd_kv[(nb, b * h)](
            q, k, v, qp, kp, th, dl, do, lse, delta, dk, dvv, ddl, *common,
            BM=c["BM"], BN=c["BN"], num_warps=c["num_warps"], num_stages=c["num_stages"], **meta,
        )  # fmt: skip
        c = _cfg("bwd_q", d, dv, q.dtype)
        _pope_bwd_q[(triton.cdiv(n, c["BM"]), b * h)](
            q, k, v, qp, kp, th, dl, do, lse, delta, dq, *common,
            BM=c["BM"], BN=c["BN"], num_warps=c["num_warps"], num_stages=c["num_stages"], **meta,
        )  # fmt: skip
        if hk != h:
            dk = dk.view(b, hk, h // hk, n, d).sum(2).to(k.dtype)
            dvv = dvv.view(b, hk, h // hk, n, dv).sum(2).to(v.dtype)
        ddelta = ddl.sum((0, 2)).to(delta_dtype) if has_delta and ctx.needs_input_grad[6] else None
        return dq, dk, dvv, None, None, None, ddelta, None, None


def pope_attention_triton(q, k, v, q_pos, k_pos, theta, delta=None, softplus=True, scale=None):
    """The fused kernel (no fallback): returns out (B, H, N, dv)."""
    return _PopeAttention.apply(q, k, v, q_pos, k_pos, theta, delta, softplus, scale)


def pope_attention(q, k, v, q_pos, k_pos, theta, delta=None, softplus=True, scale=None):
    """Causal PoPE attention from raw q/k.

    q (B, H, N, d), k (B, Hk, N, d), v (B, Hk, N, dv); q_pos, k_pos (B, N) or (N,);
    theta (d,); delta (H, d) already clamped, or None; scale defaults to 1/√d.
    Uses the Triton kernel when available (CUDA tensors, or TRITON_INTERPRET=1), else the
    sdpa reference (2d-wide cartesian q̃/k̃) with one log line.
    """
    if kernel_available(q):
        return pope_attention_triton(q, k, v, q_pos, k_pos, theta, delta, softplus, scale)
    why = fallback_reason(q)
    log_once(f"pope_attention: fused Triton kernel unavailable ({why}): using the sdpa reference")
    return pope_attention_reference(q, k, v, q_pos, k_pos, theta, delta, softplus, scale)
