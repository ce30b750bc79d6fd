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
- ``sep_keys``: gate keys from their own projection of the attention input, k̃_j = W_g h_j
  (§4 "separate keys"; h = the normalised layer input that q/k/v are projected from, read
  from ``ctx.attn_input``), one W_g (C -> Hk·d, no bias, initialised like the other
  projections) per layer. The k̃ of the new tokens are appended to the values
  (``extra_values``), so the KV cache keeps them for decoding; the attended copies are unused.
- ``val_gates``: g_ij = σ(q_i·v_j/√d) with the same 1/√d as the key gates; it reads the
  values (cached + new) from ``ctx.values``, which the attention must provide.
- ``with_rope``: RoPE rotates q/k first (``CoPE + RoPE``). The plain gates reuse the
  attention's (rotated) q·k, which depends on i − j only; gates from W_g h or v, which are
  not rotated, take the un-rotated q; z_i = q_i·e uses the *un-rotated* q, since a rotated
  q_i would make q_i·e[p] depend on the absolute position i. So every term stays relative.
- GQA: keys (and values) are repeated to the query heads; every head counts on its own.
- Only causal masking enters the gates (the listing's mask): left padding is harmless,
  since p_ij sums gates of keys j..i only, all of them after the padding.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import initialization as init

from ..attention import causal_allowed, repeat_kv
from .base import BOOL, Encoding, Option, PEContext, is_int
from .rope import RoPE


def _acc(t: torch.Tensor) -> torch.Tensor:
    """Gates and positions in float32 at least (float64 stays, for exact checks)."""
    return t if t.dtype == torch.float64 else t.float()


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
        d, c = self.head_dim, config.hidden_size
        self.gate_proj = (
            nn.ModuleList(nn.Linear(c, self.num_kv_heads * d, bias=False) for _ in range(self.num_layers))
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
            for lin in self.gate_proj:
                init.normal_(lin.weight, mean=0.0, std=self.config.initializer_range)

    def transform_qk(self, layer, q, k, ctx):
        if self.rope is None:
            return q, k
        ctx.state[("cope_raw_q", id(self), layer)] = q  # z = q·e reads the un-rotated q
        return self.rope.transform_qk(layer, q, k, ctx)

    def extra_values(self, layer, ctx):
        """sep_keys: k̃ = W_g h of the new tokens (B, Hk, Nq, d), cached with the values."""
        if self.gate_proj is None:
            return None
        h = getattr(ctx, "attn_input", None)
        if h is None:
            raise NotImplementedError("pe_options['sep_keys'] needs the attention to set ctx.attn_input")
        b, n, _ = h.shape
        return self.gate_proj[layer](h).view(b, n, self.num_kv_heads, self.head_dim).transpose(1, 2)

    # -- CoPE itself ------------------------------------------------------------------
    def gate_keys(self, layer: int, k: torch.Tensor, ctx: PEContext | None) -> torch.Tensor:
        """(B, Hk, Nk, d) float32 (float64) vectors the gates compare q with: k, W_g h, or v
        (cached + new; W_g h rides in the value channels after the first d)."""
        if self.opts["val_gates"] or self.gate_proj is not None:
            v = getattr(ctx, "values", None)
            if v is None:
                opt = "val_gates" if self.opts["val_gates"] else "sep_keys"
                raise NotImplementedError(f"pe_options['{opt}'] needs the attention to set ctx.values")
            d = self.head_dim
            return _acc(v[..., :d] if self.opts["val_gates"] else v[..., d : 2 * d])
        return _acc(k)

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
        q = _acc(q)
        q_raw = ctx.state.pop(("cope_raw_q", id(self), layer), None) if self.rope is not None else None
        q_raw = q if q_raw is None else q_raw.to(q.dtype)  # == q without RoPE
        # rotated q against rotated k (the attention's own q·k), the raw q against W_g h or v
        q_gate = q if not (self.opts["val_gates"] or self.gate_proj is not None) else q_raw
        pos = self.positions(self.gates(q_gate, self.gate_keys(layer, k, ctx)))
        e = self.pos_emb[0 if self.opts["share_layers"] else layer].to(q.dtype)
        z = torch.matmul(q_raw, e)  # (B, H, Nq, npos_max): q·e[p] for every integer p
        lo = pos.floor()
        w = pos - lo
        z_lo = z.gather(-1, lo.long())
        z_hi = z.gather(-1, pos.ceil().long())
        return z_hi * w + z_lo * (1 - w)
