"""CoPE (Golovneva et al. 2024, seeds/cope.txt §4 and Listing 1): contextual positions.

Each query gates every earlier key, g_ij = σ(q_i·k_j/√d) (future gates 0), and counts
the gates between them, p_ij = Σ_{t=j..i} g_it, clamped to npos_max − 1. The logit gets
z_i[p_ij], the interpolation of q_i·e[⌊p⌋] and q_i·e[⌈p⌉] with the *unscaled* q, added
after the 1/√d scaling exactly as the listing does (``attn_logits += cope(q, attn_logits)``).
All of it is an additive bias computed from q and the cached keys, so decoding with a KV
cache needs nothing but the keys.

Choices where the paper is silent or the hooks constrain:
- e has the listing's shape (d, npos_max), zero-initialised, shared by the heads; one for
  all layers (``share_layers``, the Wikitext setting) or one per layer.
- ``sep_keys``: the hooks never see the hidden state, so gate keys are a learned map of
  the key, k̃_j = W_g k_j, per layer and KV head (d×d), identity-initialised so training
  starts from plain CoPE. (The paper's W_g h_j would need the attention input x, which
  no hook receives.)
- ``val_gates``: g_ij = σ(q_i·v_j/√d) with the same 1/√d as the key gates; it reads the
  values (cached + new) from ``ctx.values``, which the attention must provide.
- ``with_rope``: RoPE rotates q/k first (``CoPE + RoPE``); gates and q·e use rotated q/k.
- GQA: keys (and values) are repeated to the query heads; every head counts on its own.
- Only causal masking enters the gates (the listing's mask): left padding is harmless,
  since p_ij sums gates of keys j..i only, all of them after the padding.
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import initialization as init

from ..attention import causal_allowed, repeat_kv
from .base import BOOL, Encoding, Option, PEContext, is_int
from .rope import RoPE


class CoPE(Encoding):
    name = "cope"
    options = {
        "npos_max": Option(64, check=is_int(1), help="an int >= 1: number of integer positions (p <= npos_max-1)"),
        "sep_keys": Option(False, BOOL, help="gates from separate (learned d×d map of the) keys"),
        "val_gates": Option(False, BOOL, help="gates from the values: g_ij = σ(q_i·v_j/√d)"),
        "with_rope": Option(False, BOOL, help="also rotate q/k with RoPE"),
        "share_layers": Option(True, BOOL, help="one e for all layers (False: one per layer)"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        if self.opts["sep_keys"] and self.opts["val_gates"]:
            raise ValueError("pe_options: 'sep_keys' and 'val_gates' are exclusive for pe='cope'")
        self.npos_max = self.opts["npos_max"]
        self.num_kv_heads = config.num_key_value_heads or self.num_heads
        n_e = 1 if self.opts["share_layers"] else self.num_layers
        self.pos_emb = nn.Parameter(torch.zeros(n_e, self.head_dim, self.npos_max))
        d = self.head_dim
        self.gate_proj = (
            nn.Parameter(torch.eye(d).repeat(self.num_layers, self.num_kv_heads, 1, 1))
            if self.opts["sep_keys"]
            else None
        )
        self.rope = None
        if self.opts["with_rope"]:
            rope_config = copy.copy(config)
            rope_config.pe_options = {}
            self.rope = RoPE(rope_config)

    def init_weights(self) -> None:
        init.zeros_(self.pos_emb)
        if self.gate_proj is not None:
            eye = torch.eye(self.head_dim, device=self.gate_proj.device, dtype=self.gate_proj.dtype)
            init.copy_(self.gate_proj, eye.expand_as(self.gate_proj))

    def transform_qk(self, layer, q, k, ctx):
        return self.rope.transform_qk(layer, q, k, ctx) if self.rope is not None else (q, k)

    # -- CoPE itself ------------------------------------------------------------------
    def gate_keys(self, layer: int, k: torch.Tensor, ctx: PEContext | None) -> torch.Tensor:
        """(B, Hk, Nk, d) float32 vectors the gates compare q with: k, W_g k, or v."""
        if self.opts["val_gates"]:
            v = getattr(ctx, "values", None)
            if v is None:
                raise NotImplementedError("pe_options['val_gates'] needs the attention to set ctx.values")
            return v[..., : self.head_dim].float()
        if self.gate_proj is not None:
            return torch.einsum("bhnd,hde->bhne", k.float(), self.gate_proj[layer].float())
        return k.float()

    def gates(self, q: torch.Tensor, gk: torch.Tensor) -> torch.Tensor:
        """(B, H, Nq, Nk) σ(q·gk/√d), 0 on future keys (queries are the last Nq of Nk)."""
        gk = repeat_kv(gk, q.shape[1] // gk.shape[1])
        logits = torch.matmul(q, gk.transpose(-1, -2)) * self.scale()
        allowed = causal_allowed(q.shape[2], gk.shape[2], q.device)
        return torch.sigmoid(logits).masked_fill(~allowed, 0.0)

    def positions(self, gates: torch.Tensor) -> torch.Tensor:
        """p_ij = Σ_{t>=j} g_it (a reversed cumsum, as the listing), clamped to npos_max − 1."""
        return gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.npos_max - 1)

    def bias(self, layer, q, k, ctx):
        """The full (B, H, Nq, Nk) bias: the reference (eager back-end, attention maps)."""
        dt = torch.promote_types(q.dtype, torch.float32)
        q = q.to(dt)
        pos = self.positions(self.gates(q, self.gate_keys(layer, k, ctx).to(dt)))
        e = self.pos_emb[0 if self.opts["share_layers"] else layer].to(dt)
        z = torch.matmul(q, e)  # (B, H, Nq, npos_max): q·e[p] for every integer p
        lo = pos.floor()
        w = pos - lo
        z_lo = z.gather(-1, lo.long())
        z_hi = z.gather(-1, pos.ceil().long())
        return z_hi * w + z_lo * (1 - w)

    def attention(self, layer, q, k, v, ctx, allowed):
        """softmax(q·kᵀ/√d + CoPE bias)·v in query blocks: no N×N tensor per head (``cope_attention``)."""
        e = self.pos_emb[0 if self.opts["share_layers"] else layer]
        gk = self.gate_keys(layer, k, ctx)
        return cope_attention(q, k, v, gk, e, self.npos_max, self.scale(), allowed)


#: query rows per block hold at most this many (B·H·rows·keys) elements per temporary
BLOCK_ELEMENTS = 1 << 20
MIN_BLOCK_ROWS = 32


def cope_attention(q, k, v, gk, e, npos_max: int, scale: float, allowed=None, rows: int | None = None):
    """CoPE attention computed one query block at a time, equal to ``CoPE.bias`` + sdpa.

    q (B, H, Nq, d), k/v/gk (B, Hk, Nk, ·): the queries are the last Nq of Nk keys; ``allowed``
    (B, 1, Nq, Nk) masks the attention only (padding), as in the reference, never the gates.
    Keys are flipped once, so each block's reverse cumsum is a plain cumsum and its bias is
    built in flipped key order, which sdpa does not care about; a block sees only the keys
    up to its last query (half the work of the full matrix). Under autograd every block is
    checkpointed (recomputed in the backward), so training memory is linear in N too.
    """
    b, h, nq, _ = q.shape
    nk = k.shape[2]
    rep = h // k.shape[1]
    dt = torch.promote_types(q.dtype, torch.float32)
    kf, vf = repeat_kv(k, rep).flip(2), repeat_kv(v, rep).flip(2)
    gkf = repeat_kv(gk.to(dt), rep).flip(2)
    rows = rows or max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // max(1, b * h * nk))
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, gk, e))
    past = nk - nq
    outs = []
    for s in range(0, nq, rows):
        t = min(nq, s + rows)
        kv = past + t
        keep = None if allowed is None else allowed[:, :, s:t, :kv].flip(-1)
        args = (q[:, :, s:t], kf[:, :, nk - kv :], vf[:, :, nk - kv :], gkf[:, :, nk - kv :], e)
        fn = functools.partial(_cope_block, npos_max=npos_max, scale=scale, keep=keep)
        outs.append(checkpoint(fn, *args, use_reentrant=False) if grad else fn(*args))
    return torch.cat(outs, dim=2)


def _cope_block(q, kf, vf, gkf, e, *, npos_max, scale, keep):
    """One query block (the last rows of its flipped keys, see ``cope_attention``)."""
    r = q.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    qd = q.to(dt)
    # flipped key j' = kv-1-j is a future key of row i iff j' < r-1-i (only in the first r columns)
    future = torch.ones(r, r, dtype=torch.bool, device=q.device).triu(1).flip(-1)
    logits = torch.matmul(qd * scale, gkf.transpose(-1, -2))
    logits[..., :r].masked_fill_(future, float("-inf"))  # σ(−∞) = 0: the listing's masked gates
    pos = torch.sigmoid(logits).cumsum(-1).clamp(max=npos_max - 1)  # = the reversed cumsum, unflipped
    z = torch.matmul(qd, e.to(dt))
    lo = pos.floor()
    w = pos - lo
    z_lo = z.gather(-1, lo.long())
    z_hi = z.gather(-1, pos.ceil().long())
    bias = (z_lo + w * (z_hi - z_lo)).to(q.dtype)
    bias[..., :r].masked_fill_(future, float("-inf"))
    if keep is not None:
        bias = bias.masked_fill(~keep, float("-inf"))
    return F.scaled_dot_product_attention(q, kf, vf, attn_mask=bias, scale=scale)
