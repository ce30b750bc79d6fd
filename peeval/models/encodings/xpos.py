"""xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer"): RoPE whose rotation pair
c is also scaled, q by ζ_c^((i−o)/γ) and k by ζ_c^(−(j−o)/γ), ζ_c = (2c/d + 0.4)/1.4,
γ = ``scale_base``, so that q·k decays as ζ_c^((i−j)/γ) with the distance.

Rotation pairs, frequencies and scalings are peeval's ``rope`` ones (HF ``rotate_half``:
pair c is channels (c, c + d/2)), so xpos at ζ = 1 is exactly ``pe="rope"``.

The centre o. torchscale centres at half the *current* sequence length, which keeps the
scales near 1 (ζ^(±N/2γ) instead of ζ^(N/γ)) but moves with the length: keys cached by an
earlier call would then carry another offset than the query, and KV-cache decoding would
differ from the full forward. Because q·k only sees ζ^((i−o)/γ)·ζ^(−(j−o)/γ) = ζ^((i−j)/γ),
any *fixed* o gives the same scores. We fix o = max_position_embeddings // 2: at the
training length this is torchscale's centre exactly, and it never depends on the call.

Half precision. Any split of ζ^((i−j)/γ) into a q factor and a k factor spans
ζ_0^(∓N/2γ) over N positions (ζ_0 = 0.4/1.4): 3.5^8 ≈ 2·10^4 at N = 8192, γ = 512, so in
float16 (max 65504) the scaled q of early and the k of late positions overflow to inf
(NaN attention), whatever the centre. So for float16 inputs the scaled q/k are returned
in float32 (the attention, and transformers' KV cache, then hold float32 for this
encoding); bfloat16 has float32's range and stays. Scales are computed in float32, or in
float64 for float64 inputs, so that exact checks see only the ratio's round-off. float32
itself holds the scales until |p − o| ≈ 70γ (ζ_0^(−70) ≈ 10^38).
"""

from __future__ import annotations

import torch

from .base import Option, PEContext, is_number
from .rope import RoPE, apply_rotary


def xpos_zeta(head_dim: int, device=None) -> torch.Tensor:
    """ζ_c = (2c/d + 0.4)/1.4 for c = 0..d/2−1, float32 (d/2,)."""
    c = torch.arange(0, head_dim // 2, device=device, dtype=torch.float32)
    return (2 * c / head_dim + 0.4) / 1.4


class XPos(RoPE):
    name = "xpos"
    options = {"scale_base": Option(512, check=is_number(0), help="a positive number (γ)")}

    def positional_state(self, layer, q, ctx):
        return None  # rotations with a decay: no TAPE-style state (the shift measurement reports attn_diff)

    def __init__(self, config) -> None:
        super().__init__(config)
        self.centre = config.max_position_embeddings // 2

    def decay(self, position_ids: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
        """(B, N) -> (B, N, d) ``dtype``: ζ_c^((p−o)/γ), duplicated over each rotation pair."""
        power = (position_ids - self.centre).to(dtype)[..., None] / float(self.opts["scale_base"])
        s = xpos_zeta(self.head_dim, position_ids.device).to(dtype) ** power
        return torch.cat((s, s), dim=-1)

    def transform_qk(self, layer, q, k, ctx: PEContext):
        out = torch.float32 if q.dtype == torch.float16 else q.dtype  # float16 cannot hold the scales
        key = ("xpos_cos_sin", id(self))
        if key not in ctx.state:  # shared by all layers of this forward
            cos, sin = self.rotary(q.new_empty(0, dtype=torch.float32), ctx.position_ids)  # float32
            s = self.decay(ctx.position_ids, torch.float64 if q.dtype == torch.float64 else torch.float32)
            ctx.state[key] = tuple(t.to(out) for t in (cos * s, sin * s, cos / s, sin / s))
        cq, sq, ck, sk = ctx.state[key]
        return apply_rotary(q.to(out), cq, sq), apply_rotary(k.to(out), ck, sk)
