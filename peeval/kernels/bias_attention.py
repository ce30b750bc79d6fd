"""Fused causal attention with a per-head distance bias w[h, i − j] built inside the kernel.

For the biases that are a few parameters per head, read at the distance i − j (t5: the bucket
embedding gathered to a per-distance vector by torch; kerple: its formula on the N distances;
alibi: −slope·d). The caller hands the kernel that (H, Dw) vector ``w`` (Dw ≥ N); torch
autograd carries dw back to the parameters (the bucket embedding, kerple's r1/r2, …). No N×N
bias exists in the forward or the backward (issue 65 item 1, seeds/tape.txt §5.4).

The backward reduces each (BM, BN) tile of dS along its diagonals (the BM + BN − 1 distances
the tile holds) inside the kernel: the tile is written skewed into a per-program scratch
(row r = i − j + BN − 1) and summed along each row, no atomics; torch adds the tiles' diagonal
sums into dw (O(N²/BN) numbers).

Layouts (last dim contiguous):
    q (B, H, N, d), k (B, Hk, N, d), v (B, Hk, N, dv), Hk divides H (GQA)
    w (H, Dw) float32 (any float dtype accepted; computed in fp32)
    key_valid (B, N) bool or None: padded keys are masked, every token always sees itself
        (as ``attention_ops.build_allowed``)
Distances are the indices i − j: exact for whole sequences and for padding with contiguous
position ids of the real tokens (left or right padding), not for remapped positions.
"""

from __future__ import annotations

import math

import torch

from . import _common as common
from ._common import LOG2E, dot_precision, interpret, last_contig, np2, tl, triton

__all__ = ["bias_attention", "bias_attention_reference", "fire_attention", "fire_dense_bias", "CONFIG"]

#: Launch-config overrides (keys: fwd, bwd_kv, bwd_q; BM == BN required for bwd_q's tiles).
CONFIG: dict[str, dict] = {}


def fire_dense_bias(psi, norm, t, slopes, icpt):
    """(B, H, N, N) FIRE bias A[s, h]·x + C[s, h], x = ψ[i − j] / norm[b, i], s = #{t_k < x} (the reference)."""
    n = norm.shape[1]
    i = torch.arange(n, device=norm.device)
    x = psi[(i[:, None] - i[None, :]).clamp(min=0)][None] / norm[:, :, None]  # (B, N, N)
    seg = torch.bucketize(x.detach(), t.to(x.dtype))
    return (slopes[seg] * x[..., None] + icpt[seg]).permute(0, 3, 1, 2)


def bias_attention_reference(q, k, v, w, key_valid=None, scale=None):
    """Dense causal attention with bias w[h, i − j] (w (H, N)) or a dense w (B|1, H, N, N) (torch
    autograd: dq, dk, dv, dw); in q's dtype (float64 inputs give the float64 reference)."""
    b, h, n, d = q.shape
    if k.shape[1] != h:
        k = k.repeat_interleave(h // k.shape[1], dim=1)
        v = v.repeat_interleave(h // v.shape[1], dim=1)
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    i = torch.arange(n, device=q.device)
    dist = (i[:, None] - i[None, :]).clamp(min=0)
    bias = w.to(q.dtype) if w.dim() == 4 else w.to(q.dtype)[:, dist][None]  # (B|1, H, N, N)
    allowed = (i[None, :] <= i[:, None])[None, None]
    if key_valid is not None:
        allowed = allowed & (key_valid[:, None, None, :].bool() | torch.eye(n, dtype=torch.bool, device=q.device))
    s = torch.einsum("bhid,bhjd->bhij", q, k) * scale + bias
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.einsum("bhij,bhjd->bhid", p, v)


if triton is not None:

    @triton.jit
    def _allowed(offs_m, on, mn, KV, b, N, DIAG: tl.constexpr, HAS_PAD: tl.constexpr):
        """(BM, BN) bool: visible keys of the tile (DIAG: the diagonal block, causal and ragged tail)."""
        ok = mn[None, :] & (offs_m[:, None] >= 0)
        if DIAG:
            ok = ok & (offs_m[:, None] >= on[None, :])
        if HAS_PAD:
            kv = tl.load(KV + b * N + on, mask=mn, other=0) != 0
            ok = ok & (kv[None, :] | (offs_m[:, None] == on[None, :]))
        return ok

    @triton.jit
    def _bias_tile(W, NORM, TB, SA, SC, b, h, sw, offs_m, on, N, H, NT, FIRE: tl.constexpr):
        """The tile's bias and, for FIRE, (x, slope, segment): w[h, i − j]; FIRE: x = ψ[i − j] / norm_i
        (W holds ψ), its segment s = #{t_k < x}, bias = A[s, h]·x + C[s, h]."""
        dist = tl.maximum(offs_m[:, None] - on[None, :], 0)
        inb = dist < N
        if FIRE:
            norm = tl.load(NORM + b * N + offs_m, mask=offs_m < N, other=1.0)
            x = tl.load(W + dist, mask=inb, other=0.0) / norm[:, None]
            seg = tl.zeros(x.shape, tl.int32)
            for kk in range(NT):
                seg += (x > tl.load(TB + kk)).to(tl.int32)
            slope = tl.load(SA + seg * H + h)
            return slope * x + tl.load(SC + seg * H + h), x, slope, seg, norm
        else:
            bias = tl.load(W + h * sw + dist, mask=inb, other=0.0)
            return bias, bias, bias, dist, offs_m

    @triton.jit
    def _scores(
        q, k, W, NORM, TB, SA, SC, b, h, sw, offs_m, on, qk_scale, N, H, NT, FIRE: tl.constexpr, PREC: tl.constexpr
    ):
        """Scores in base 2: (q·k)·scale·log2 e + bias·log2 e."""
        bias, _x, _a, _s, _n = _bias_tile(W, NORM, TB, SA, SC, b, h, sw, offs_m, on, N, H, NT, FIRE)
        return common.dot(q, tl.trans(k), PREC) * qk_scale + bias * 1.4426950408889634

    @triton.jit
    def _bias_fwd(
        Q, K, V, W, NORM, TB, SA, SC, KV, Out, LSE,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, sw,
        H, G, N, NT, qk_scale,
        D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr, HAS_PAD: tl.constexpr, FIRE: tl.constexpr,
    ):  # fmt: skip
        start_m, offs_m, mm, bh, b, h, hk = common.query_program(BM, H, G, N)
        od, md = common.span(0, BD, D)
        odv, mdv = common.span(0, BDV, DV)
        q = common.load_tile(Q + b * sqb + h * sqh, offs_m, sqn, od, mm, md)
        kp, vp = K + b * skb + hk * skh, V + b * svb + hk * svh
        m_i = tl.full([BM], float("-inf"), tl.float32)
        l_i = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, BDV], tl.float32)
        for phase in tl.static_range(2):
            lo, hi = common.key_blocks(phase, start_m, BM, N)
            for start_n in range(lo, hi, BN):
                on, mn = common.span(start_n, BN, N)
                k = common.load_tile(kp, on, skn, od, mn, md)
                v = common.load_tile(vp, on, svn, odv, mn, mdv)
                s = _scores(q, k, W, NORM, TB, SA, SC, b, h, sw, offs_m, on, qk_scale, N, H, NT, FIRE, PREC)
                s = tl.where(_allowed(offs_m, on, mn, KV, b, N, phase == 1, HAS_PAD), s, float("-inf"))
                p, alpha, m_i, l_i = common.online_softmax(s, m_i, l_i)
                acc = acc * alpha[:, None] + common.dot(p.to(v.dtype), v, PREC)
        tl.store(LSE + bh * N + offs_m, m_i + tl.log2(l_i), mask=mm)
        tl.store(
            Out + b * sob + h * soh + offs_m[:, None] * son + odv[None, :],
            (acc / l_i[:, None]).to(Out.dtype.element_ty),
            mask=mm[:, None] & mdv[None, :],
        )

    @triton.jit
    def _bias_bwd_pre(
        Out, DO, DELTA, sob, soh, son, sdob, sdoh, sdon, H, N, DV: tl.constexpr, BDV: tl.constexpr, BM: tl.constexpr
    ):
        bh, b, h, _ = common.program_heads(H, 1)
        offs_m, mm = common.span(tl.program_id(0) * BM, BM, N)
        odv, mdv = common.span(0, BDV, DV)
        o = common.load_tile(Out + b * sob + h * soh, offs_m, son, odv, mm, mdv)
        do = common.load_tile(DO + b * sdob + h * sdoh, offs_m, sdon, odv, mm, mdv)
        tl.store(DELTA + bh * N + offs_m, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=mm)

    @triton.jit
    def _bias_bwd_kv(
        Q, K, V, W, NORM, TB, SA, SC, KV, DO, LSE, DELTA, DK, DV_,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdob, sdoh, sdon, sw,
        H, G, N, NT, qk_scale, sm_scale,
        D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr, HAS_PAD: tl.constexpr, FIRE: tl.constexpr,
    ):  # fmt: skip
        """One key block per program: dk, dv per query head."""
        start_n, offs_n, mn, bh, b, h, hk = common.key_program(BN, H, G, N)
        od, md = common.span(0, BD, D)
        odv, mdv = common.span(0, BDV, DV)
        k = common.load_tile(K + b * skb + hk * skh, offs_n, skn, od, mn, md)
        v = common.load_tile(V + b * svb + hk * svh, offs_n, svn, odv, mn, mdv)
        dk = tl.zeros([BN, BD], tl.float32)
        dv = tl.zeros([BN, BDV], tl.float32)
        qp, dop = Q + b * sqb + h * sqh, DO + b * sdob + h * sdoh
        for phase in tl.static_range(2):
            lo, hi = common.query_blocks(phase, start_n, BN, N)
            for start_m in range(lo, hi, BM):
                om, mm = common.span(start_m, BM, N)
                q = common.load_tile(qp, om, sqn, od, mm, md)
                do = common.load_tile(dop, om, sdon, odv, mm, mdv)
                lse = tl.load(LSE + bh * N + om, mask=mm, other=float("inf"))
                dlt = tl.load(DELTA + bh * N + om, mask=mm, other=0.0)
                s = _scores(q, k, W, NORM, TB, SA, SC, b, h, sw, om, offs_n, qk_scale, N, H, NT, FIRE, PREC)
                ok = _allowed(om, offs_n, mn, KV, b, N, phase == 0, HAS_PAD) & mm[:, None]
                p = tl.where(ok, tl.exp2(s - lse[:, None]), 0.0)
                dv += common.dot(tl.trans(p.to(do.dtype)), do, PREC)
                dp = common.dot(do, tl.trans(v), PREC)
                ds = (p * (dp - dlt[:, None])).to(q.dtype)
                dk += common.dot(tl.trans(ds), q, PREC)
        common.store_rows(DK, bh * N, offs_n, D, od, mn, md, dk * sm_scale)
        common.store_rows(DV_, bh * N, offs_n, DV, odv, mn, mdv, dv)

    @triton.jit
    def _diagonal_sums(ds, SCR, PART, BM: tl.constexpr, BN: tl.constexpr, BR: tl.constexpr):
        """The tile's sums along its BM + BN − 1 diagonals (r = i − j + BN − 1) into PART[0:BR]:
        ds written skewed into this program's zeroed scratch (BR, BM), then each row summed."""
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        r = rm[:, None] - rn[None, :] + (BN - 1)
        tl.debug_barrier()  # the previous tile's reads are done before this tile overwrites
        tl.store(SCR + r * BM + rm[:, None], ds)
        tl.debug_barrier()
        rows = tl.arange(0, BR)
        tile = tl.load(SCR + rows[:, None] * BM + rm[None, :])
        tl.store(PART + rows, tl.sum(tile, 1))

    @triton.jit
    def _bias_bwd_q(
        Q, K, V, W, NORM, TB, SA, SC, KV, DO, LSE, DELTA, DQ, SCR, PART, DN, SEGP,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdob, sdoh, sdon, sw,
        H, G, N, NT, qk_scale, sm_scale,
        D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr, HAS_PAD: tl.constexpr, FIRE: tl.constexpr,
        BR: tl.constexpr, KP: tl.constexpr,
    ):  # fmt: skip
        """One query block per program: dq, and each tile's diagonal sums of dS (the bias's gradient)."""
        start_m, offs_m, mm, bh, b, h, hk = common.query_program(BM, H, G, N)
        od, md = common.span(0, BD, D)
        odv, mdv = common.span(0, BDV, DV)
        q = common.load_tile(Q + b * sqb + h * sqh, offs_m, sqn, od, mm, md)
        do = common.load_tile(DO + b * sdob + h * sdoh, offs_m, sdon, odv, mm, mdv)
        lse = tl.load(LSE + bh * N + offs_m, mask=mm, other=float("inf"))
        dlt = tl.load(DELTA + bh * N + offs_m, mask=mm, other=0.0)
        kp, vp = K + b * skb + hk * skh, V + b * svb + hk * svh
        nbm = tl.num_programs(0)
        blk_m = start_m // BM
        scr = SCR + (bh * nbm + blk_m) * BR * BM
        part = PART + (bh * nbm + blk_m) * nbm * BR
        dq = tl.zeros([BM, BD], tl.float32)
        dn = tl.zeros([BM], tl.float32)
        ks = tl.arange(0, KP)
        acc_a = tl.zeros([KP], tl.float32)
        acc_c = tl.zeros([KP], tl.float32)
        for phase in tl.static_range(2):
            lo, hi = common.key_blocks(phase, start_m, BM, N)
            for start_n in range(lo, hi, BN):
                on, mn = common.span(start_n, BN, N)
                k = common.load_tile(kp, on, skn, od, mn, md)
                v = common.load_tile(vp, on, svn, odv, mn, mdv)
                s = _scores(q, k, W, NORM, TB, SA, SC, b, h, sw, offs_m, on, qk_scale, N, H, NT, FIRE, PREC)
                ok = _allowed(offs_m, on, mn, KV, b, N, phase == 1, HAS_PAD) & mm[:, None]
                p = tl.where(ok, tl.exp2(s - lse[:, None]), 0.0)
                dp = common.dot(do, tl.trans(v), PREC)
                ds = p * (dp - dlt[:, None])
                dq += common.dot(ds.to(k.dtype), k, PREC)
                if FIRE:  # dψ along the diagonals, dnorm per row, dA / dC per segment
                    _b, x, slope, seg, norm = _bias_tile(W, NORM, TB, SA, SC, b, h, sw, offs_m, on, N, H, NT, FIRE)
                    gx = ds * slope
                    dn -= tl.sum(gx * x, 1) / norm
                    _diagonal_sums(gx / norm[:, None], scr, part + (start_n // BN) * BR, BM, BN, BR)
                    dsx = ds * x
                    for sg in range(NT + 1):
                        sel = seg == sg
                        acc_a = tl.where(ks == sg, acc_a + tl.sum(tl.sum(tl.where(sel, dsx, 0.0), 1), 0), acc_a)
                        acc_c = tl.where(ks == sg, acc_c + tl.sum(tl.sum(tl.where(sel, ds, 0.0), 1), 0), acc_c)
                else:
                    _diagonal_sums(ds, scr, part + (start_n // BN) * BR, BM, BN, BR)
        common.store_rows(DQ, bh * N, offs_m, D, od, mm, md, dq * sm_scale)
        if FIRE:
            tl.store(DN + bh * N + offs_m, dn, mask=mm)
            tl.store(SEGP + ((bh * nbm + blk_m) * 2) * KP + ks, acc_a)
            tl.store(SEGP + ((bh * nbm + blk_m) * 2 + 1) * KP + ks, acc_c)


def _cfg(kind: str, d: int, dv: int, dtype: torch.dtype) -> dict:
    if kind in CONFIG:
        return dict(CONFIG[kind])
    if interpret():
        return dict(BM=16, BN=16, num_warps=4, num_stages=1)
    wide = max(np2(d), np2(dv)) > 64 or dtype == torch.float32
    if kind == "bwd_q":  # equal blocks: the tiles' diagonals line up with the distance vector
        return dict(BM=64, BN=64, num_warps=4, num_stages=2) if wide else dict(BM=64, BN=64, num_warps=8, num_stages=2)
    if kind == "fwd":
        return dict(BM=64, BN=64, num_warps=4, num_stages=2) if wide else dict(BM=128, BN=64, num_warps=8, num_stages=3)
    return dict(BM=32, BN=64, num_warps=4, num_stages=2) if wide else dict(BM=32, BN=128, num_warps=8, num_stages=2)


def _diagonal_index(n: int, bm: int, bn: int, br: int, device) -> torch.Tensor:
    """(nbm, nbm, BR) distance of each tile's diagonal r: (m·BM − n·BN) + r − (BN − 1)."""
    nb = triton.cdiv(n, bm)
    blk = torch.arange(nb, device=device)
    return (blk[:, None, None] * bm - blk[None, :, None] * bn) + torch.arange(br, device=device) - (bn - 1)


class _BiasAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, w, key_valid, scale, norm, t, slopes, icpt):
        q, k, v = (last_contig(t_) for t_ in (q, k, v))
        b, h, n, d = q.shape
        hk, dv = v.shape[1], v.shape[-1]
        assert k.shape == (b, hk, n, d) and v.shape[:3] == (b, hk, n) and h % hk == 0 and q.dtype == k.dtype, (
            "bias_attention: q (B,H,N,d), k (B,Hk,N,d), v (B,Hk,N,dv), causal with Nq == Nk"
        )
        fire = norm is not None
        f32 = {"device": q.device, "dtype": torch.float32}
        wf = w.to(**f32).contiguous()
        if fire:
            assert wf.shape == (wf.shape[0],) and wf.shape[0] >= n and norm.shape == (b, n), (
                "fire: psi (>=N,), norm (B,N)"
            )
            fp = [norm.to(**f32).contiguous(), t.to(**f32).contiguous()] + [
                x.to(**f32).contiguous() for x in (slopes, icpt)
            ]
            assert fp[2].shape == fp[3].shape == (t.shape[0] + 1, h), "fire: slopes, icpt (K+1, H)"
        else:
            assert w.dim() == 2 and w.shape[0] == h and w.shape[1] >= n, "bias_attention: w (H, Dw >= N)"
            fp = [wf] * 4  # dummy pointers
        nt = t.shape[0] if fire else 0
        has_pad = key_valid is not None
        kv = key_valid.to(device=q.device, dtype=torch.int8).contiguous() if has_pad else wf
        assert not has_pad or kv.shape == (b, n), "bias_attention: key_valid (B, N)"
        sm_scale = scale if scale is not None else 1.0 / math.sqrt(d)
        out = torch.empty((b, h, n, dv), device=q.device, dtype=v.dtype)
        lse = torch.empty((b * h, n), device=q.device, dtype=torch.float32)
        c = _cfg("fwd", d, dv, q.dtype)
        _bias_fwd[(triton.cdiv(n, c["BM"]), b * h)](
            q, k, v, wf, *fp, kv, out, lse,
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3], wf.stride(0),
            h, h // hk, n, nt, sm_scale * LOG2E,
            D=d, DV=dv, BD=np2(d), BDV=np2(dv), BM=c["BM"], BN=c["BN"], PREC=dot_precision(q.dtype),
            HAS_PAD=has_pad, FIRE=fire, num_warps=c["num_warps"], num_stages=c["num_stages"],
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, wf, kv, out, lse, *fp)
        ctx.cfg = (sm_scale, has_pad, fire, nt, w.dtype, w.shape)
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, wf, kv, out, lse, *fp = ctx.saved_tensors
        sm_scale, has_pad, fire, nt, w_dtype, w_shape = ctx.cfg
        b, h, n, d = q.shape
        hk, dv = v.shape[1], v.shape[-1]
        do = last_contig(do)
        delta = torch.empty_like(lse)
        _bias_bwd_pre[(triton.cdiv(n, 64), b * h)](
            out, do, delta, *out.stride()[:3], *do.stride()[:3], h, n, DV=dv, BDV=np2(dv), BM=64
        )
        gdt = (lambda t: t.dtype) if hk == h else (lambda t: torch.float32)
        dq = torch.empty((b, h, n, d), device=q.device, dtype=q.dtype)
        dk = torch.empty((b, h, n, d), device=q.device, dtype=gdt(k))
        dvv = torch.empty((b, h, n, dv), device=q.device, dtype=gdt(v))
        args = (
            *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], wf.stride(0),
            h, h // hk, n, nt, sm_scale * LOG2E, sm_scale,
        )  # fmt: skip
        meta = dict(D=d, DV=dv, BD=np2(d), BDV=np2(dv), PREC=dot_precision(q.dtype), HAS_PAD=has_pad, FIRE=fire)
        c = _cfg("bwd_kv", d, dv, q.dtype)
        _bias_bwd_kv[(triton.cdiv(n, c["BN"]), b * h)](
            q, k, v, wf, *fp, kv, do, lse, delta, dk, dvv, *args,
            BM=c["BM"], BN=c["BN"], num_warps=c["num_warps"], num_stages=c["num_stages"], **meta,
        )  # fmt: skip
        c = _cfg("bwd_q", d, dv, q.dtype)
        bm, bn = c["BM"], c["BN"]
        assert bm == bn, "bias_attention: bwd_q needs BM == BN"
        br = triton.next_power_of_2(bm + bn - 1)
        kp = triton.next_power_of_2(nt + 1)
        nb = triton.cdiv(n, bm)
        scr = torch.zeros((b * h * nb, br, bm), device=q.device, dtype=torch.float32)
        part = torch.zeros((b, h, nb, nb, br), device=q.device, dtype=torch.float32)
        dn = torch.zeros((b, h, n), device=q.device, dtype=torch.float32) if fire else scr
        segp = torch.zeros((b, h, nb, 2, kp), device=q.device, dtype=torch.float32) if fire else scr
        _bias_bwd_q[(nb, b * h)](
            q, k, v, wf, *fp, kv, do, lse, delta, dq, scr, part, dn, segp, *args,
            BM=bm, BN=bn, BR=br, KP=kp, num_warps=c["num_warps"], num_stages=c["num_stages"], **meta,
        )  # fmt: skip
        idx = _diagonal_index(n, bm, bn, br, q.device)
        keep = (idx >= 0) & (idx < n)  # r past BM + BN − 2 and distances < 0 hold zeros
        sums = part.sum(0)[:, keep]  # (H, kept)
        dw = torch.zeros((h, w_shape[-1]), device=q.device, dtype=torch.float32)
        dw.index_add_(1, idx[keep], sums)
        if hk != h:
            dk = dk.view(b, hk, h // hk, n, d).sum(2).to(k.dtype)
            dvv = dvv.view(b, hk, h // hk, n, dv).sum(2).to(v.dtype)
        if not fire:
            return dq, dk, dvv, dw.to(w_dtype), None, None, None, None, None, None
        seg = segp.sum((0, 2))[..., : nt + 1]  # (H, 2, K+1)
        dslopes, dicpt = seg[:, 0].t(), seg[:, 1].t()
        return dq, dk, dvv, dw.sum(0).to(w_dtype), None, None, dn.sum(1), None, dslopes, dicpt


def bias_attention(q, k, v, w, key_valid=None, scale=None):
    """Causal attention with bias w[h, i − j], fused (Triton: CUDA tensors, or TRITON_INTERPRET=1).

    q (B, H, N, d), k/v (B, Hk, N, ·), w (H, Dw ≥ N), key_valid (B, N) bool or None, scale 1/√d
    by default. Returns out (B, H, N, dv); differentiable in q, k, v and w.
    """
    return _BiasAttention.apply(q, k, v, w, key_valid, scale, None, None, None, None)


def fire_attention(q, k, v, psi, norm, t, slopes, icpt, key_valid=None, scale=None):
    """Causal attention with FIRE's bias A[s, h]·x + C[s, h], x = ψ[i − j] / norm[b, i], s = #{t_k < x}
    (f's piecewise-linear form, ``FIRE.pieces``): psi (≥ N,), norm (B, N), t (K,), slopes / icpt (K+1, H).
    Differentiable in q, k, v, psi, norm, slopes, icpt (t: no gradient, as in ``FIRE.pieces``)."""
    return _BiasAttention.apply(q, k, v, psi, key_valid, scale, norm, t, slopes, icpt)
