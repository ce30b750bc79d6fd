"""TAPE (Zhu et al. 2025, seeds/tape.txt §3, appendix C; SPEC 2.3): contextualised,
equivariant positional encoding.

Every query head carries a positional state e_i ∈ R^{M×L×R} per token (d = M·L). Layer
0 initialises it from RoPE; each layer then

1. transforms q and k per block by their own position's state (Eq. 6, ϕ = identity):
   q'_{m,r} = Σ_l e_{m,l,r} q_{m,l}, so α_ij = Σ_m q_mᵀ e_i e_jᵀ k_m, scaled by 1/√d;
2. attends the states with the *same* softmax as the tokens (Eq. 7): Ẽ = A·E. The states
   are plain extra value channels (``extra_values``), appended to v before the cache update,
   so decoding reads the cached E_j of every past token at this layer and every back-end
   (sdpa, eager, a fused "softmax(QKᵀ)·[V | E]" kernel) computes them unchanged;
   then E ← E + diag(w_a)·Ẽ (w_a ∈ R^H; option ``attn_mix="heads"``: a full H×H map);
3. after the token MLP (Eq. 8, appendix C's parameter-light form): Ê = W2·diag(ψ(x))·W1ᵀ·E,
   W1, W2 ∈ R^{H×I} mixing the head axis only, ψ(x) = act(Linear_{C→I}(x)), x = the
   block's MLP output (the reference's order; ``psi_input="attn_out"`` = Eq. 8's x̃),
   and E ← E + Ê.

Nothing mixes the R axis, so a right rotation e ↦ e·O (which is what shifting every
position does to a RoPE-initialised state) commutes with all updates and cancels in
e_i e_jᵀ: outputs are shift invariant for any weights (Prop. 4.2). ``equivariant=False``
(table 6 ablation) lets W1, W2 act on (H·R) jointly and loses this.

Layout and conventions:
- E is kept as (B, H, N, L, R, M) — per query head, M last so that q.view(B, H, N, L, M)
  lines up: block m = dims (m, m + M, ..., m + (L-1)·M), HF ``rotate_half`` pairing for L=2.
  For L=R=2 the four entries of block m are the RoPE pair of its two dims:
  e = [[cos_a, sin_b], [−sin_a, cos_b]] (rows l, columns r), i.e. the reference's
  (cos, sin) tensors up to order and sign, so the RoPE state reproduces
  ``q·cos + rotate_half(q)·sin`` bit for bit (scaling via transformers' rope-init functions).
- Other shapes (table 6), initialised from RoPE frequencies on ``rope_theta`` (rope_scaling
  is not applied to them): L=1, R=4 (M=d) gives dim m two rotation planes,
  e_m = (cos θ_{2m} i, sin θ_{2m} i, cos θ_{2m+1} i, sin θ_{2m+1} i)/√2 with θ_k = θ^(−k/2d)
  — still relative (e_i·e_j depends on i−j) but no longer RoPE; L=4, R=1 (M=d/4)
  gives block m the first RoPE row of two planes, (cos θ_m i, −sin θ_m i, cos θ_{m+M} i,
  −sin θ_{m+M} i) with θ_k = θ^(−2k/d): R=1 cannot encode relative positions, which is
  the point of that ablation. q'/k' have M·R channels (2d wide / d/4 wide); the softmax
  scale stays 1/√d.
- GQA: E is per query head, so k is transformed after ``repeat_kv``
  (``kv_per_query_head``) and the cache holds the *transformed* keys per query head plus
  [v | E] per query head.
- Initialisation: W1 = 0 and w_a = 0 (as the reference), so TAPE at init is RoPE exactly;
  W2 and ψ ~ N(0, initializer_range), so W1 still receives gradients. ``zero_init="w2"``
  is §3.3's PEFT initialisation (W2 = 0, "following Hu et al.", as LoRA's B; W1 random),
  which ``peeval adapt`` uses; either way E's updates are exactly 0 at init.
- Parameters are stacked over layers on the encoding itself (w_a, psi, w1, w2 with a
  leading layer axis): transformers' init of custom-code models skips modules without
  parameters of their own, so ``init_weights`` would never run for a ModuleList-only encoding.
- The last layer's position updates cannot reach the output (nothing reads E after it),
  so its streams and updates are skipped; its parameters exist (per-layer parameter count
  C·I + 2·H·I + H as in the paper and the reference) but get no gradient.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from ..attention_ops import sdpa_attention
from .base import BOOL, Encoding, Option, PEContext

STATE = "tape_E"


def _position_size(v) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)


class TAPE(Encoding):
    name = "tape"
    kv_per_query_head = True
    options = {
        "attn_update": Option(True, BOOL, help="Eq. 7 update E += diag(w_a)·A·E"),
        "mlp_update": Option(True, BOOL, help="Eq. 8 update E += W2·diag(ψ(x))·W1ᵀ·E"),
        "equivariant": Option(True, BOOL, help="False: W1, W2 act on (H·R) jointly (breaks O(R))"),
        "position_size": Option(None, check=_position_size, help="I: a positive int, or None for 4·H"),
        "L": Option(2, (1, 2, 4), help="rows of each block's state; L·R must be 4"),
        "R": Option(2, (1, 2, 4), help="columns (the O(R) axis); L·R must be 4"),
        "attn_mix": Option("scale", ("scale", "heads"), help="per-head scale (reference) or full H×H"),
        "psi_input": Option("mlp_out", ("mlp_out", "attn_out"), help="x in ψ(x): MLP output or attention output"),
        "zero_init": Option("w1", ("w1", "w2"), help="which of W1, W2 starts at zero (reference: w1; §3.3 PEFT: w2)"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        o = self.opts
        self.L, self.R = o["L"], o["R"]
        if self.L * self.R != 4 or self.head_dim % self.L:
            raise ValueError(
                f"pe_options L={self.L}, R={self.R} are not valid for pe='tape' with head_dim={self.head_dim}: "
                "allowed (L, R) in (2, 2), (1, 4), (4, 1) with L dividing head_dim"
            )
        self.M = self.head_dim // self.L
        self.position_size = o["position_size"] or 4 * self.num_heads
        self.act = ACT2FN[config.hidden_act]
        rp = getattr(config, "rope_parameters", None) or {}
        self.base = float(rp.get("rope_theta", getattr(config, "rope_theta", None) or 10000.0))
        self.rotary = LlamaRotaryEmbedding(config)
        # per-layer parameters stacked on a leading layer axis (absent when an update is off)
        nl, c, h, i = self.num_layers, config.hidden_size, self.num_heads, self.position_size
        self.w_a = self.w1 = self.w2 = self.psi = None
        if o["attn_update"]:
            self.w_a = nn.Parameter(torch.zeros((nl, h, h) if o["attn_mix"] == "heads" else (nl, h)))
        if o["mlp_update"]:
            hr = h if o["equivariant"] else h * self.R
            self.psi = nn.Parameter(torch.zeros(nl, i, c))  # ψ's Linear(C→I, no bias) weight
            self.w1 = nn.Parameter(torch.zeros(nl, hr, i))
            self.w2 = nn.Parameter(torch.zeros(nl, hr, i))

    def init_weights(self) -> None:
        std = self.config.initializer_range
        if self.w_a is not None:
            init.zeros_(self.w_a)
        if self.psi is not None:
            init.normal_(self.psi, mean=0.0, std=std)
            zero, rand = (self.w1, self.w2) if self.opts["zero_init"] == "w1" else (self.w2, self.w1)
            init.zeros_(zero)
            init.normal_(rand, mean=0.0, std=std)

    # -- the state --------------------------------------------------------------------
    def initial_state(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """E at layer 0 from RoPE: (B, H, N, L, R, M) in x's dtype."""
        b, n = position_ids.shape
        L, R, M = self.L, self.R, self.M
        if (L, R) == (2, 2):  # transformers' own RoPE (incl. rope_scaling): exactly HF RoPE
            cos, sin = self.rotary(x, position_ids)
            ca, cb, sa, sb = cos[..., :M], cos[..., M:], sin[..., :M], sin[..., M:]
            e = torch.stack([torch.stack([ca, sb], -2), torch.stack([-sa, cb], -2)], -3)  # (B, N, 2, 2, M)
        else:
            pos = position_ids.float()[..., None]  # (B, N, 1)
            if (L, R) == (1, 4):
                k = torch.arange(2 * M, device=x.device, dtype=torch.float32)
                ang = (pos * self.base ** (-k / (2 * M))).view(b, n, M, 2)  # planes (2m, 2m+1)
                a0, a1 = ang[..., 0], ang[..., 1]
                e = torch.stack([a0.cos(), a0.sin(), a1.cos(), a1.sin()], -2) / math.sqrt(2.0)
                e = e[:, :, None]  # (B, N, 1, 4, M)
            else:  # (4, 1)
                k = torch.arange(2 * M, device=x.device, dtype=torch.float32)
                ang = pos * self.base ** (-2.0 * k / self.head_dim)
                a0, a1 = ang[..., :M], ang[..., M:]
                e = torch.stack([a0.cos(), -a0.sin(), a1.cos(), -a1.sin()], -2)[:, :, :, None]  # (B, N, 4, 1, M)
        return e[:, None].expand(b, self.num_heads, n, L, R, M).to(x.dtype)

    def _state(self, ctx: PEContext) -> torch.Tensor:
        return ctx.state[STATE]

    def positional_state(self, layer, q, ctx):
        return ctx.state[STATE]

    def _streams(self, layer: int) -> bool:
        """Whether this layer's updates can reach the output (not the last layer)."""
        return layer < self.num_layers - 1

    # -- hooks --------------------------------------------------------------------------
    def transform_qk(self, layer, q, k, ctx):
        if layer == 0 or STATE not in ctx.state:
            ctx.state[STATE] = self.initial_state(q, ctx.position_ids)
        e = self._state(ctx)
        return self.apply_state(q, e), self.apply_state(k, e)

    def apply_state(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """x (B, H, N, d) → (B, H, N, R·M): x'_{r,m} = Σ_l e_{l,r,m} x_{l,m} (Eq. 6)."""
        b, h, n, _ = x.shape
        xs = x.view(b, h, n, self.L, 1, self.M)
        return (xs * e).sum(3).reshape(b, h, n, self.R * self.M)

    def extra_values(self, layer, ctx):
        if not (self.opts["attn_update"] and self._streams(layer)):
            return None
        return self._state(ctx).flatten(3)

    # -- the ``triton`` back-end: softmax(QKᵀ/√d)·[V | E] in one fused pass ---------------
    def fused_kernel(self, q):
        return self.fused_attention if (self.L, self.R) == (2, 2) and 32 <= self.head_dim <= 128 else None

    def fused_attention(self, layer, q, k, v, ctx):
        from ...kernels.tape_attention import tape_attention

        d = self.head_dim
        if v.shape[-1] == d:  # no streams in this layer: a plain causal attention
            return sdpa_attention(q, k, v, scale=self.scale())
        out, e_out = tape_attention(q, k, v[..., :d], v[..., d:], scale=self.scale())
        return torch.cat([out, e_out], dim=-1)

    def after_attention(self, layer, extra_out, ctx):
        e = self._state(ctx)
        e_att = extra_out.to(e.dtype).reshape(e.shape)
        w = self.w_a[layer].to(e.dtype)
        if w.dim() == 1:
            upd = w[None, :, None, None, None, None] * e_att
        else:
            upd = torch.einsum("hg,bgnlrm->bhnlrm", w, e_att)
        ctx.state[STATE] = e + upd

    def after_mlp(self, layer, mlp_out, ctx, attn_out=None):
        if not (self.opts["mlp_update"] and self._streams(layer)):
            return
        if self.opts["psi_input"] == "attn_out":
            if attn_out is None:
                raise NotImplementedError(
                    "pe_options psi_input='attn_out' needs the decoder layer to pass the attention "
                    "output to Encoding.after_mlp(..., attn_out=...)"
                )
            x = attn_out
        else:
            x = mlp_out
        e = self._state(ctx)
        psi = self.act(F.linear(x, self.psi[layer].to(x.dtype))).to(e.dtype)  # (B, N, I)
        w1, w2 = self.w1[layer].to(e.dtype), self.w2[layer].to(e.dtype)
        # W2·diag(ψ)·W1ᵀ as one small per-token matrix over heads (or heads×R) instead of an I-wide E
        kmat = torch.einsum("hi,bni,gi->bnhg", w2, psi, w1)
        if self.opts["equivariant"]:
            upd = torch.einsum("bnhg,bgnlrm->bhnlrm", kmat, e)
        else:
            b, n = psi.shape[:2]
            h, r = self.num_heads, self.R
            kmat = kmat.view(b, n, h, r, h, r)
            upd = torch.einsum("bnhrgs,bgnlsm->bhnlrm", kmat, e)
        ctx.state[STATE] = e + upd
