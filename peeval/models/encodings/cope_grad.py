"""CoPE's attention with a hand-written backward (issue 65 item 2; ``attn_backend='recompute'``).

``cope_attention`` (the default) lets autograd record every query block, checkpointed at the
gpu profile's sizes: a step of 16 × 2,048 tokens spent 3.1 s (90× rope) recomputing the blocks and
running the backward of their gathers and casts. Here the forward keeps nothing but its inputs; the
backward recomputes each query block's gates, counts and probabilities once and applies the
paper's derivatives directly (seeds/cope.txt eqs. 3–9, the listing's clamp):

- a = s + b with s = q·kᵀ/√d, b_ij = z_i[⌊p⌋] + w (z_i[⌈p⌉] − z_i[⌊p⌋]), z_i = q_pos,i·e, w = p − ⌊p⌋;
- p_ij = min(c_ij, npos_max − 1), c_ij = Σ_{t=j..i} g_it, g_it = σ(q_gate,i·gk_t/√d) (t ≤ i, else 0);
- dA = P ⊙ (dP − Σ_j P dP), dP = dO·vᵀ; dz_i[⌊p⌋] += dA (1 − w), dz_i[⌈p⌉] += dA w (``_position_grad``);
- dc = dA (z_i[⌈p⌉] − z_i[⌊p⌋]) (0 where clamped: there ⌊p⌋ = ⌈p⌉); dg_it = Σ_{j≤t} dc_ij (a plain cumsum);
- ds_gate = dg · g (1 − g).

Every row is independent, so both passes run in query blocks of at most ``block_elements`` per
temporary (one block at 64 × 512 on CUDA, four at 16 × 2,048): memory stays linear in N, at
inference too. Arithmetic in float32 (float64 stays), results cast back to the inputs' dtypes.
Plain torch, so ``torch.compile`` traces it (an ``autograd.Function``) like the rest of the model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attention_ops import causal_allowed, repeat_kv

#: the fewest query rows of a block when a caller names no budget (``cope`` passes its own: ``cope.MIN_BLOCK_ROWS``,
#: ``cope.block_elements``; this module never imports cope)
DEFAULT_ROWS = 32


def _rows(q: torch.Tensor, nk: int, rows: int | None) -> int:
    return rows or DEFAULT_ROWS


def _block(q, q_gate, q_pos, k, gk, e, npos_max, scale, keep):
    """One query block against its keys 0..kv-1 (the queries are the last rows of them): the
    probabilities and what the backward needs, all (B, H, r, kv) but z (B, H, r, npos_max)."""
    r, kv = q.shape[2], k.shape[2]
    future = ~causal_allowed(r, kv, q.device)
    g = torch.sigmoid(torch.matmul(q_gate, gk.transpose(-1, -2)) * scale).masked_fill(future, 0.0)
    p = g.flip(-1).cumsum(-1).flip(-1).clamp(max=npos_max - 1)  # c_ij = Σ_{t=j..i} g_it, clamped
    z = torch.matmul(q_pos, e)
    lo = p.floor()
    z_lo, z_hi = z.gather(-1, lo.long()), z.gather(-1, p.ceil().long())
    a = torch.matmul(q, k.transpose(-1, -2)) * scale + z_lo + (p - lo) * (z_hi - z_lo)
    a = a.masked_fill(future if keep is None else ~keep, float("-inf"))
    return torch.softmax(a, dim=-1), g, p, z_hi - z_lo


def _position_grad(da: torch.Tensor, p: torch.Tensor, npos_max: int) -> torch.Tensor:
    """dz (B, H, r, npos_max): each dA_ij added into z_i at ⌊p_ij⌋ with weight 1 − w and at ⌈p_ij⌉ with w, without
    a scatter (whose atomics would pile onto the clamped count npos_max − 1). p_ij does not grow with j (a sum of
    gates from j to i; 0 past i), so in flipped key order each integer's keys are one run: per run m (m <= p < m + 1)
    S0 = Σ dA and S1 = Σ dA (p − m) from prefix sums (small counts first, so the runs near the diagonal are exact
    to rounding) at the run bounds ``searchsorted`` finds; dz[m] = S0[m] − S1[m] + S1[m − 1]. The weights are taken
    from m, not from ⌊p⌋, so a key that rounding put one run off moves its weight by that rounding only."""
    pf, daf = p.flip(-1).contiguous(), da.flip(-1)
    c0 = F.pad(daf.cumsum(-1), (1, 0))
    c1 = F.pad((daf * pf).cumsum(-1), (1, 0))
    m = torch.arange(npos_max + 1, dtype=p.dtype, device=p.device)
    bounds = torch.searchsorted(pf, m.expand(*p.shape[:-1], npos_max + 1).contiguous())  # #{j: p_ij < m}
    s0 = c0.gather(-1, bounds).diff(dim=-1)
    s1 = c1.gather(-1, bounds).diff(dim=-1) - m[:-1] * s0
    return s0 - s1 + F.pad(s1[..., :-1], (1, 0))


class _CoPEAttention(torch.autograd.Function):
    """``gk`` / ``q_gate`` / ``q_pos`` None: the same tensor as k / q / q_gate (torch.compile cannot trace one
    tensor passed twice); their gradients are added to that tensor's. The backward recomputes under the forward's
    autocast state (as ``torch.amp.custom_bwd``, for q's device type), so both passes see the same probabilities."""

    @staticmethod
    def forward(ctx, q, k, v, gk, e, q_gate, q_pos, allowed, npos_max, scale, rows):
        ctx.same = (gk is None, q_gate is None, q_pos is None)
        gk = k if gk is None else gk
        q_gate = q if q_gate is None else q_gate
        q_pos = q_gate if q_pos is None else q_pos
        dt = torch.promote_types(q.dtype, torch.float32)
        rep = q.shape[1] // k.shape[1]
        kf, vf, gkf = (repeat_kv(t.to(dt), rep) for t in (k, v, gk))
        nq, nk = q.shape[2], k.shape[2]
        past = nk - nq
        out = []
        for s in range(0, nq, rows):
            t = min(nq, s + rows)
            kv = past + t
            keep = None if allowed is None else allowed[:, :, s:t, :kv]
            blk = (x[:, :, s:t].to(dt) for x in (q, q_gate, q_pos))
            prob = _block(*blk, kf[:, :, :kv], gkf[:, :, :kv], e.to(dt), npos_max, scale, keep)[0]
            out.append(torch.matmul(prob, vf[:, :, :kv]))
        ctx.save_for_backward(q, k, v, e, allowed, *(None if x else y for x, y in zip(ctx.same, (gk, q_gate, q_pos))))
        ctx.consts = (npos_max, scale, rows)
        dev = q.device.type
        ctx.amp = (dev, torch.is_autocast_enabled(dev), torch.get_autocast_dtype(dev))
        return torch.cat(out, dim=2).to(q.dtype)

    @staticmethod
    def backward(ctx, d_out):
        dev, enabled, dtype = ctx.amp
        with torch.autocast(dev, dtype=dtype, enabled=enabled):
            return _CoPEAttention._backward(ctx, d_out)

    @staticmethod
    def _backward(ctx, d_out):
        q, k, v, e, allowed, gk, q_gate, q_pos = ctx.saved_tensors
        same_gk, same_qg, same_qp = ctx.same
        gk = k if same_gk else gk
        q_gate = q if same_qg else q_gate
        q_pos = q_gate if same_qp else q_pos
        npos_max, scale, rows = ctx.consts
        dt = torch.promote_types(q.dtype, torch.float32)
        rep = q.shape[1] // k.shape[1]
        kf, vf, gkf = (repeat_kv(t.to(dt), rep) for t in (k, v, gk))
        ef = e.to(dt)
        nq, nk = q.shape[2], k.shape[2]
        past = nk - nq
        dq, dqg, dqp = (torch.zeros(q.shape, dtype=dt, device=q.device) for _ in range(3))
        dk, dv, dgk = (torch.zeros(kf.shape[:3] + (x.shape[-1],), dtype=dt, device=q.device) for x in (kf, vf, gkf))
        de = torch.zeros(ef.shape, dtype=dt, device=q.device)
        for s in range(0, nq, rows):
            t = min(nq, s + rows)
            kv = past + t
            keep = None if allowed is None else allowed[:, :, s:t, :kv]
            qb, qgb, qpb = (x[:, :, s:t].to(dt) for x in (q, q_gate, q_pos))
            kb, vb, gkb = kf[:, :, :kv], vf[:, :, :kv], gkf[:, :, :kv]
            prob, g, p, dz_dp = _block(qb, qgb, qpb, kb, gkb, ef, npos_max, scale, keep)
            do = d_out[:, :, s:t].to(dt)
            dp = torch.matmul(do, vb.transpose(-1, -2))
            da = prob * (dp - (prob * dp).sum(-1, keepdim=True))
            dv[:, :, :kv] += torch.matmul(prob.transpose(-1, -2), do)
            dq[:, :, s:t] = torch.matmul(da, kb) * scale
            dk[:, :, :kv] += torch.matmul(da.transpose(-1, -2), qb) * scale
            dz = _position_grad(da, p, npos_max)
            dqp[:, :, s:t] = torch.matmul(dz, ef.T)
            de += torch.einsum("bhrd,bhrp->dp", qpb, dz)
            dc = da * dz_dp  # clamped counts (p = npos_max − 1, an integer: ⌊p⌋ = ⌈p⌉) have dz_dp = 0 already
            ds = dc.cumsum(-1) * g * (1 - g)  # dg_it = Σ_{j<=t} dc_ij; σ' = g (1 − g), 0 on future keys
            dqg[:, :, s:t] = torch.matmul(ds, gkb) * scale
            dgk[:, :, :kv] += torch.matmul(ds.transpose(-1, -2), qgb) * scale

        def heads(x, like):  # GQA: the query heads' sums back onto their key head
            b, h, n, d = x.shape
            return x.view(b, h // rep, rep, n, d).sum(2).to(like.dtype)

        dqg = (dqg + dqp) if same_qp else dqg
        dq = (dq + dqg) if same_qg else dq
        dk = (dk + dgk) if same_gk else dk
        none = (None,) * 4
        return (dq.to(q.dtype), heads(dk, k), heads(dv, v), None if same_gk else heads(dgk, gk), de.to(e.dtype),
                None if same_qg else dqg.to(q_gate.dtype), None if same_qp else dqp.to(q_pos.dtype), *none)  # fmt: skip


def cope_attention_recompute(
    q, k, v, gk, e, npos_max: int, scale: float, allowed=None, rows: int | None = None, *, q_gate=None, q_pos=None
):
    """Equal to ``cope.cope_attention`` (same arguments), with the hand-written backward above."""
    q_gate = q if q_gate is None else q_gate
    q_pos = q if q_pos is None else q_pos
    rows = _rows(q, k.shape[2], rows)
    # one tensor in two roles goes in once (``_CoPEAttention``); q_pos is q alone: a copy (no caller does that)
    q_pos = None if q_pos is q_gate else (q_pos.clone() if q_pos is q else q_pos)
    q_gate = None if q_gate is q else q_gate
    gk = None if gk is k else gk
    return _CoPEAttention.apply(q, k, v, gk, e, q_gate, q_pos, allowed, npos_max, scale, rows)
