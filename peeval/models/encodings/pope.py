"""PoPE (Gopalakrishnan et al. 2025, seeds/pope.txt §3): polar-coordinate positions.

Each of the d elements of q and k becomes a complex number whose magnitude is
``softplus(x)`` (the *what*) and whose phase is ``position * θ_c`` (the *where*), so

    a_ts = Σ_{c=1..d} μ_qc μ_kc cos((s − t) θ_c + δ_c),   θ_c = base^(−(c−1)/d)

with d frequencies (one per element; the seed's θ^((c−1)/d) drops the minus sign) and a
learnable key-side phase δ clamped to [−2π, 0]. Through sdpa this is the 2d-wide
cartesian trick of Eq. 6–9: q̃ = [μ_q cos tθ, μ_q sin tθ], k̃ = [μ_k cos(sθ+δ), μ_k sin(sθ+δ)],
whose dot product is the score above; keys are transformed at their own position, so
the KV cache holds k̃ and decoding needs no re-rotation.

Choices where the paper is silent:
- GQA: δ is per *KV* head (Hk, d) and per layer, since it lives on the key side and the
  cache holds transformed keys; without GQA (the paper's setting) that is per head.
- ``softplus=False`` is the Table 8 ablation "PoPE without σ()": μ = q, k themselves
  (signed amplitudes; a negative one acts as a phase of π).
- δ is clamped in the forward (the parameter is left as is); beyond the bounds its
  gradient is zero, as with ``torch.clamp`` in the reference-style implementations.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .base import BOOL, Encoding, Option, PEContext

TWO_PI = 2.0 * math.pi


def clamp_phase(delta: torch.Tensor) -> torch.Tensor:
    """δ clamped to [−2π, 0] with gradient 1 inside the closed interval and 0 beyond it. Spelled out because
    ``torch.clamp``'s gradient at a bound changed in torch 2.14 (0 there, 1 before): δ starts at the bound
    (init "zero"), so with a plain clamp it would never move and PoPE would silently train without δ."""
    inside = (delta >= -TWO_PI) & (delta <= 0.0)
    return torch.where(inside, delta, delta.detach().clamp(-TWO_PI, 0.0))


class PoPE(Encoding):
    name = "pope"
    options = {
        "delta_init": Option("zero", ("zero", "uniform"), help="δ init: 0, or Uniform(−2π, 0)"),
        "softplus": Option(True, BOOL, help="μ = softplus(x); False = the 'without σ()' ablation (μ = x)"),
        "delta": Option(True, BOOL, help="learnable key-side phase δ (False = the 'without δ' ablation)"),
    }

    def __init__(self, config) -> None:
        super().__init__(config)
        rp = getattr(config, "rope_parameters", None) or {}
        self.base = float(rp.get("rope_theta", getattr(config, "rope_theta", None) or 10000.0))
        self.num_kv_heads = config.num_key_value_heads or self.num_heads
        self.use_softplus = bool(self.opts["softplus"])
        self.register_buffer("inv_freq", self._theta(), persistent=False)
        if self.opts["delta"]:
            self.delta = nn.Parameter(torch.zeros(self.num_layers, self.num_kv_heads, self.head_dim))
        else:
            self.delta = None

    def _theta(self, device=None) -> torch.Tensor:
        c = torch.arange(self.head_dim, dtype=torch.float32, device=device)
        return self.base ** (-c / self.head_dim)

    def init_weights(self) -> None:
        init.copy_(self.inv_freq, self._theta(self.inv_freq.device))
        if self.delta is not None:
            if self.opts["delta_init"] == "uniform":
                init.uniform_(self.delta, -TWO_PI, 0.0)
            else:
                init.zeros_(self.delta)

    # -- helpers (also for a fused kernel that takes raw q/k) --------------------------
    def theta(self) -> torch.Tensor:
        """(d,) float32 frequencies θ_c = base^(−(c−1)/d)."""
        return self.inv_freq.float()

    def delta_for(self, layer: int) -> torch.Tensor | None:
        """(Hk, d) clamped key-side phase of ``layer``, or None without δ."""
        if self.delta is None:
            return None
        return clamp_phase(self.delta[layer])

    def magnitude(self, x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """μ = softplus(x) (float32, or ``dtype``), or x itself in the no-softplus ablation."""
        return F.softplus(x.to(dtype)) if self.use_softplus else x.to(dtype)

    def _phase(self, ctx: PEContext, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(B, 1, N, d) angles position·θ of the new tokens, shared by all layers."""
        key = ("pope_phase", id(self), dtype)
        if key not in ctx.state:
            ctx.state[key] = ctx.position_ids.to(dtype)[:, None, :, None] * self.inv_freq.to(dtype)
        return ctx.state[key]

    def _cos_sin(self, ctx: PEContext, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of ``_phase``, computed once per forward rather than once per layer."""
        key = ("pope_cos_sin", id(self), dtype)
        if key not in ctx.state:
            phase = self._phase(ctx, dtype)
            ctx.state[key] = (phase.cos(), phase.sin())
        return ctx.state[key]

    # -- hooks ------------------------------------------------------------------------
    def transform_qk(self, layer, q, k, ctx):
        """q (B,H,N,d), k (B,Hk,N,d) -> q̃ (B,H,N,2d), k̃ (B,Hk,N,2d); raw when fused.

        The key phase sθ+δ is rotated from the shared cos/sin by δ's (Hk, d) table
        (angle addition), so no layer evaluates trig on (N, d) itself."""
        if ctx.fused:
            return q, k
        dt = torch.promote_types(q.dtype, torch.float32)  # float32 at least; float64 models in float64
        cos, sin = self._cos_sin(ctx, dt)
        mq, mk = self.magnitude(q, dt), self.magnitude(k, dt)
        q2 = torch.cat([mq * cos, mq * sin], dim=-1)
        delta = self.delta_for(layer)
        if delta is None:
            kcos, ksin = cos, sin
        else:
            cd, sd = delta.to(dt).cos()[None, :, None, :], delta.to(dt).sin()[None, :, None, :]
            kcos, ksin = cos * cd - sin * sd, sin * cd + cos * sd
        k2 = torch.cat([mk * kcos, mk * ksin], dim=-1)
        return q2.to(q.dtype), k2.to(k.dtype)

    # -- the ``triton`` back-end: raw q/k, magnitudes and phases inside the kernel ------
    def fused_kernel(self, q):
        return self.fused_attention if 32 <= self.head_dim <= 128 else None

    def fused_attention(self, layer, q, k, v, ctx):
        from ...kernels.pope_attention import pope_attention

        delta = self.delta_for(layer)
        if delta is not None:  # δ lives per KV head; the kernel takes it per query head
            delta = delta.repeat_interleave(q.shape[1] // delta.shape[0], dim=0)
        pos_q, pos_k = ctx.position_ids, ctx.key_position_ids
        return pope_attention(q, k, v, pos_q, pos_k, self.theta(), delta, self.use_softplus, self.scale())

    def scale(self) -> float:
        """1/√d with d = head_dim: the paper's softmax temperature (sdpa would use 1/√(2d))."""
        return self.head_dim**-0.5
