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
- Speed: ``reference_bias`` builds the full (B, H, Nq, Nk) bias (the reference, for the eager
  back-end and attention maps); the default path (the ``ContentBias``'s ``attend_fn``) computes
  the same attention in query blocks (``cope_attention``), so no N×N tensor per head is ever held
  (under autograd: once the bias would exceed ``CHECKPOINT_ELEMENTS``). ``attn_backend='recompute'``
  runs the same blocks with a hand-written backward instead (``cope_grad``, issue 65).
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import initialization as init

from ..attention_ops import causal_allowed, repeat_kv
from .base import BOOL, ContentBias, Encoding, Option, PEContext, is_int
from .cope_grad import cope_attention_recompute
from .rope import RoPE


def _acc(t: torch.Tensor) -> torch.Tensor:
    """Gates and positions in float32 at least (float64 stays, for exact checks)."""
    return t if t.dtype == torch.float64 else t.float()


class CoPE(Encoding):
    name = "cope"
    reads_positions = False  # contextual counts (``with_rope`` aside): nothing for randpe to remap
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

    def _inputs(self, layer, q, k, ctx):
        """(q for the gates, gate keys, q for z = q·e, e): see ``with_rope`` in the module docstring."""
        q = _acc(q)
        q_raw = ctx.state.pop(("cope_raw_q", id(self), layer), None) if self.rope is not None else None
        q_raw = q if q_raw is None else q_raw.to(q.dtype)  # == q without RoPE
        # rotated q against rotated k (the attention's own q·k), the raw q against W_g h or v
        q_gate = q if not (self.opts["val_gates"] or self.gate_proj is not None) else q_raw
        e = self.pos_emb[0 if self.opts["share_layers"] else layer].to(q.dtype)
        return q_gate, self.gate_keys(layer, k, ctx), q_raw, e

    def bias(self, layer, ctx):
        """q·e at the gated counts: the dense reference, and attention in query blocks."""
        return ContentBias(
            dense_fn=lambda q, k: self.reference_bias(layer, q, k, ctx),
            attend_fn=lambda q, k, v, allowed, scale: self.blocked_attention(layer, q, k, v, ctx, allowed, scale),
            recompute_fn=lambda q, k, v, allowed, scale: self.blocked_attention(
                layer, q, k, v, ctx, allowed, scale, recompute=True
            ),
        )

    def reference_bias(self, layer, q, k, ctx):
        """The full (B, H, Nq, Nk) bias: the reference (eager back-end, attention maps)."""
        q_gate, gk, q_raw, e = self._inputs(layer, q, k, ctx)
        pos = self.positions(self.gates(q_gate, gk))
        z = torch.matmul(q_raw, e)  # (B, H, Nq, npos_max): q·e[p] for every integer p
        lo = pos.floor()
        w = pos - lo
        z_lo = z.gather(-1, lo.long())
        z_hi = z.gather(-1, pos.ceil().long())
        return z_hi * w + z_lo * (1 - w)

    def blocked_attention(self, layer, q, k, v, ctx, allowed, scale, recompute=False):
        """softmax(q·kᵀ/√d + CoPE bias)·v in query blocks: no N×N tensor per head (``cope_attention``;
        ``recompute``: its hand-written backward, ``cope_grad``)."""
        q_gate, gk, q_raw, e = self._inputs(layer, q, k, ctx)
        if recompute:  # cope_grad takes the block budget from here (it never imports cope: no import cycle)
            b, h, nk = q.shape[0], q.shape[1], k.shape[2]
            rows = max(MIN_BLOCK_ROWS, block_elements(q) // max(1, b * h * nk))
            return cope_attention_recompute(q, k, v, gk, e, self.npos_max, scale, allowed, rows, q_gate=q_gate,
                                            q_pos=q_raw)  # fmt: skip
        return cope_attention(q, k, v, gk, e, self.npos_max, scale, allowed, q_gate=q_gate, q_pos=q_raw)


#: query rows per block hold at most this many (B·H·rows·keys) elements per temporary (CPU: cache-sized)
BLOCK_ELEMENTS = 1 << 20
#: on CUDA (issue 57): 32-row blocks meant 64 launches of small kernels per layer at 16 x 2,048 (33.9x rope on an
#: H200); 2^27 elements (512 MiB per float32 temporary) hold the gpu profile's 64 x 512 in one block, 16 x 2,048
#: in four, and still bound memory at any length
BLOCK_ELEMENTS_CUDA = 1 << 27


def block_elements(t: torch.Tensor) -> int:
    """The per-temporary budget of a query block on ``t``'s device."""
    return BLOCK_ELEMENTS_CUDA if t.is_cuda else BLOCK_ELEMENTS


MIN_BLOCK_ROWS = 32
#: under autograd, blocks are checkpointed (recomputed in the backward) only when the whole bias would exceed this
#: many (B·H·Nq·Nk) elements: below it the blocks' temporaries (a few x 64 MB at most) are kept, which trains the
#: CPU profiles 1.15-1.35x faster with bitwise the same loss and gradients (benchmarks/cope_checkpoint.py)
CHECKPOINT_ELEMENTS = 1 << 24


def cope_attention(
    q, k, v, gk, e, npos_max: int, scale: float, allowed=None, rows: int | None = None, *, q_gate=None, q_pos=None
):
    """CoPE attention computed one query block at a time, equal to ``CoPE.bias`` + sdpa.

    q (B, H, Nq, d), k/v/gk (B, Hk, Nk, ·): the queries are the last Nq of Nk keys; ``allowed``
    (B, 1, Nq, Nk) masks the attention only (padding), as in the reference, never the gates.
    Keys are flipped once, so each block's reverse cumsum is a plain cumsum and its bias is
    built in flipped key order, which sdpa does not care about; a block sees only the keys
    up to its last query (half the work of the full matrix). Under autograd, once the full bias would
    exceed ``CHECKPOINT_ELEMENTS``, every block is checkpointed (recomputed in the backward), so training
    memory is linear in N too; below it the blocks' temporaries are kept (no recompute).
    """
    q_gate = q if q_gate is None else q_gate
    q_pos = q if q_pos is None else q_pos
    b, h, nq, _ = q.shape
    nk = k.shape[2]
    rep = h // k.shape[1]
    dt = torch.promote_types(q.dtype, torch.float32)
    kf, vf = repeat_kv(k, rep).flip(2), repeat_kv(v, rep).flip(2)
    gkf = repeat_kv(gk.to(dt), rep).flip(2)
    rows = rows or max(MIN_BLOCK_ROWS, block_elements(q) // max(1, b * h * nk))
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, q_gate, q_pos, k, v, gk, e))
    recompute = grad and b * h * nq * nk > CHECKPOINT_ELEMENTS
    past = nk - nq
    outs = []
    for s in range(0, nq, rows):
        t = min(nq, s + rows)
        kv = past + t
        keep = None if allowed is None else allowed[:, :, s:t, :kv].flip(-1)
        args = (
            q[:, :, s:t],
            q_gate[:, :, s:t],
            q_pos[:, :, s:t],
            kf[:, :, nk - kv :],
            vf[:, :, nk - kv :],
            gkf[:, :, nk - kv :],
            e,
        )
        fn = functools.partial(_cope_block, npos_max=npos_max, scale=scale, keep=keep)
        outs.append(checkpoint(fn, *args, use_reentrant=False) if recompute else fn(*args))
    return torch.cat(outs, dim=2)


def _cope_block(q, q_gate, q_pos, kf, vf, gkf, e, *, npos_max, scale, keep):
    """One query block (the last rows of its flipped keys, see ``cope_attention``)."""
    r = q.shape[2]
    dt = torch.promote_types(q.dtype, torch.float32)
    # flipped key j' = kv-1-j is a future key of row i iff j' < r-1-i (only in the first r columns)
    future = torch.ones(r, r, dtype=torch.bool, device=q.device).triu(1).flip(-1)
    logits = torch.matmul(q_gate.to(dt) * scale, gkf.transpose(-1, -2))
    logits[..., :r].masked_fill_(future, float("-inf"))  # σ(−∞) = 0: the listing's masked gates
    pos = torch.sigmoid(logits).cumsum(-1).clamp(max=npos_max - 1)  # = the reversed cumsum, unflipped
    z = torch.matmul(q_pos.to(dt), e.to(dt))
    lo = pos.floor()
    w = pos - lo
    z_lo = z.gather(-1, lo.long())
    z_hi = z.gather(-1, pos.ceil().long())
    bias = (z_lo + w * (z_hi - z_lo)).to(q.dtype)
    bias[..., :r].masked_fill_(future, float("-inf"))
    if keep is not None:
        bias = bias.masked_fill(~keep, float("-inf"))
    return F.scaled_dot_product_attention(q, kf, vf, attn_mask=bias, scale=scale)
