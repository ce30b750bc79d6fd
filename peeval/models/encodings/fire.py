"""FIRE (Li et al. 2023): a learned function of the progressively normalised distance.

b(i, j) = f_θ(ψ(i − j) / (ψ(max(i, L)) + 1e−6)),  ψ(x) = log(|c·x| + 1),
c learnable (init 0.1), L = |L_mult·init_L| with L_mult learnable (init 1), f a ReLU MLP
1 → hidden → H; one of each per layer. i is the query *position*, so extrapolation and
KV-cache decoding see the same normaliser. ``reference_bias`` runs f on every pair;
rows are processed in chunks when no gradient is needed, so evaluation at long lengths
holds at most ~``CHUNK`` elements of f's hidden layer.

The fast forms use that f, a ReLU MLP of one scalar, is exactly piecewise linear: with
breakpoints t_k = −b1_k/w1_k sorted, f(x) = A_s·x + C_s on segment s. Each pair costs a
binary search over ``hidden`` breakpoints and one multiply-add per head instead of a
``hidden``-wide layer; values agree with the MLP to round-off, and so do all gradients
(A, C are differentiable sums of w1·w2, b1·w2, b2 over each segment's active units).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

from .base import Encoding, Option, PositionBias, is_int, is_number
from .distance import block_distances, distance_count

CHUNK = 1 << 24


class FIRE(Encoding):
    name = "fire"
    options = {
        "hidden": Option(32, check=is_int(1), help="an int >= 1: width of f's hidden layer"),
        "init_L": Option(512, check=is_number(0), help="a number > 0: initial threshold L"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        n, h = self.num_layers, self.opts["hidden"]
        self.c = nn.Parameter(torch.empty(n))
        self.L_mult = nn.Parameter(torch.empty(n))
        self.w1 = nn.Parameter(torch.empty(n, h))
        self.b1 = nn.Parameter(torch.empty(n, h))
        self.w2 = nn.Parameter(torch.empty(n, h, self.num_heads))
        self.b2 = nn.Parameter(torch.empty(n, self.num_heads))

    def init_weights(self) -> None:
        init.constant_(self.c, 0.1)
        init.constant_(self.L_mult, 1.0)
        h = self.opts["hidden"]  # nn.Linear's default: U(±1/√fan_in)
        init.uniform_(self.w1, -1.0, 1.0)
        init.uniform_(self.b1, -1.0, 1.0)
        init.uniform_(self.w2, -(h**-0.5), h**-0.5)
        init.uniform_(self.b2, -(h**-0.5), h**-0.5)

    def normalised_distance(self, layer: int, pos_q: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        """ψ(i − j) / (ψ(max(i, L)) + 1e−6) for rel (B, Nq, Nk) and query positions (B, Nq)."""
        c = _f32(self.c[layer])
        threshold = (_f32(self.L_mult[layer]) * self.opts["init_L"]).abs()

        def psi(x):
            return torch.log(torch.abs(c * x) + 1)

        norm = psi(torch.maximum(pos_q.to(c.dtype), threshold)) + 1e-6
        return psi(rel.clamp(min=0).to(c.dtype)) / norm[:, :, None]

    def mlp(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """f_θ on a (...,) tensor of scalars -> (..., H), computed in float32 (float64 models: float64)."""
        hid = torch.relu(x[..., None] * _f32(self.w1[layer]) + _f32(self.b1[layer]))
        return hid @ _f32(self.w2[layer]) + _f32(self.b2[layer])

    def pieces(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """f_θ as a piecewise-linear function: breakpoints t (K,), slopes A and intercepts C (K+1, H).

        Segment s holds t[s−1] < x <= t[s] (``torch.bucketize``); which units are active on it
        is read at a point inside it, so A, C are exact (units with w1 = 0 are constant).
        """
        w1, b1, w2, b2 = (_f32(p[layer]) for p in (self.w1, self.b1, self.w2, self.b2))
        with torch.no_grad():
            t = torch.where(w1 != 0, -b1 / w1, torch.full_like(w1, float("inf"))).sort().values
            edge = t.clamp(-1e30, 1e30)
            lo, hi = torch.cat([edge[:1] - 1, edge]), torch.cat([edge, edge[-1:] + 1])
            active = ((lo + hi)[:, None] / 2 * w1 + b1 > 0).to(w1.dtype)  # (K+1, K)
        return t, active @ (w1[:, None] * w2), active @ (b1[:, None] * w2) + b2

    def bias(self, layer, ctx):
        c = _f32(self.c[layer])
        threshold = (_f32(self.L_mult[layer]) * self.opts["init_L"]).abs()
        psi_table = torch.log(torch.abs(c * torch.arange(distance_count(ctx), device=c.device, dtype=c.dtype)) + 1)
        norm = torch.log(torch.abs(c * torch.maximum(ctx.position_ids.to(c.dtype), threshold)) + 1) + 1e-6
        tensors = (psi_table, norm, *self.pieces(layer), ctx.position_ids, ctx.key_position_ids)
        return PositionBias(
            _fire_block, tensors, element_fn=_fire_entry, dense_fn=lambda: self.reference_bias(layer, ctx)
        )

    # -- the ``triton`` back-end: f's pieces inside peeval.kernels.bias_attention ----------------
    #: the kernel reads distances from the indices (never for remapped positions) and takes padded keys
    index_distances = True
    fused_padding = True

    def fused_kernel(self, q):
        return self.fused_attention if q.dtype in (torch.float32, torch.float16, torch.bfloat16) else None

    def fused_attention(self, layer, q, k, v, ctx, key_valid=None):
        """ψ over the distances, the rows' normaliser and f's pieces; their gradients reach c, L_mult and
        the MLP through torch (``bias`` builds the same tensors for the other back-ends)."""
        from ...kernels.bias_attention import fire_attention

        psi, norm, t, slopes, icpt, _qpos, _kpos = self.bias(layer, ctx).tensors
        b, _h, n, _d = q.shape
        if psi.shape[0] < n:  # distances past the data's largest never occur
            psi = torch.nn.functional.pad(psi, (0, n - psi.shape[0]))
        norm = norm.expand(b, n)
        return fire_attention(q, k, v, psi, norm, t, slopes, icpt, key_valid, self.scale())

    def reference_bias(self, layer: int, ctx) -> torch.Tensor:
        """(B, H, Nq, Nk): the MLP on every pair (the paper's formula; the eager reference)."""
        rel = ctx.relative_positions()
        b, nq, nk = rel.shape
        rows = nq if torch.is_grad_enabled() else max(1, CHUNK // (b * nk * self.opts["hidden"]))
        out = []
        for s in range(0, nq, rows):
            x = self.normalised_distance(layer, ctx.position_ids[:, s : s + rows], rel[:, s : s + rows])
            out.append(self.mlp(layer, x))
        return torch.cat(out, 1).permute(0, 3, 1, 2)  # (B, H, Nq, Nk)


def _f32(t: torch.Tensor) -> torch.Tensor:
    """At least float32 (a float64 model stays float64, for exact checks)."""
    return t if t.dtype == torch.float64 else t.float()


def _fire_entry(b, h, q_idx, kv_idx, psi_table, norm, t, slopes, icpt, qpos, kpos):
    """One entry (FlexAttention's indices); the segment is counted, not bucketized, for the compiler."""
    x = psi_table[(qpos[b, q_idx] - kpos[b, kv_idx]).clamp(min=0)] / norm[b, q_idx]
    seg = (x > t[0]).to(torch.int64)
    for i in range(1, t.shape[0]):
        seg = seg + (x > t[i]).to(torch.int64)
    return slopes[seg, h] * x + icpt[seg, h]


def _fire_block(rows, keys, psi_table, norm, t, slopes, icpt, qpos, kpos):
    """Block (B, H, r, k) of f(ψ(i − j)/norm_i) from the piecewise-linear form of f."""
    x = psi_table[block_distances(rows, keys, qpos, kpos)] / norm[:, rows, None]  # (B, r, k)
    seg = torch.bucketize(x, t)
    b, r, k = x.shape
    flat = seg.reshape(-1)
    a = slopes.t().index_select(1, flat).view(-1, b, r, k)
    c = icpt.t().index_select(1, flat).view(-1, b, r, k)
    return (a * x + c).transpose(0, 1)
