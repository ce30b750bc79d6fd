"""FIRE (Li et al. 2023): a learned function of the progressively normalised distance.

b(i, j) = f_θ(ψ(i − j) / (ψ(max(i, L)) + 1e−6)),  ψ(x) = log(|c·x| + 1),
c learnable (init 0.1), L = |L_mult·init_L| with L_mult learnable (init 1), f a ReLU MLP
1 → hidden → H; one of each per layer. i is the query *position*, so extrapolation and
KV-cache decoding see the same normaliser. Rows are processed in chunks when no gradient
is needed, so evaluation at long lengths holds at most ~``CHUNK`` elements of f's hidden layer.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

from .base import Encoding, Option, is_int, is_number

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
        c = self.c[layer].float()
        threshold = (self.L_mult[layer].float() * self.opts["init_L"]).abs()

        def psi(x):
            return torch.log(torch.abs(c * x) + 1)

        norm = psi(torch.maximum(pos_q.float(), threshold)) + 1e-6
        return psi(rel.clamp(min=0).float()) / norm[:, :, None]

    def mlp(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """f_θ on a (...,) float32 tensor of scalars -> (..., H), computed in float32."""
        hid = torch.relu(x[..., None] * self.w1[layer].float() + self.b1[layer].float())
        return hid @ self.w2[layer].float() + self.b2[layer].float()

    def bias(self, layer, q, k, ctx):
        rel = ctx.relative_positions()
        b, nq, nk = rel.shape
        rows = nq if torch.is_grad_enabled() else max(1, CHUNK // (b * nk * self.opts["hidden"]))
        out = []
        for s in range(0, nq, rows):
            x = self.normalised_distance(layer, ctx.position_ids[:, s : s + rows], rel[:, s : s + rows])
            out.append(self.mlp(layer, x))
        return torch.cat(out, 1).permute(0, 3, 1, 2)  # (B, H, Nq, Nk)
