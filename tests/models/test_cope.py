"""CoPE (seeds/cope.txt §4): against the paper's Listing 1, gates/positions by hand, zero
init == nope, and the options."""

import math

import pytest
import torch
from conftest import decode_logits, randomize_, tiny_config, tiny_model
from torch import nn

from peeval.models import attention as attn
from peeval.models.encodings import PEContext, build_encoding


# -- Listing 1 of the paper (appendix B), as printed ---------------------------------
class ListingCoPE(nn.Module):
    def __init__(self, npos_max, head_dim):
        super().__init__()
        self.npos_max = npos_max
        self.pos_emb = nn.parameter.Parameter(torch.zeros(1, head_dim, npos_max))

    def forward(self, query, attn_logits):
        # compute positions
        gates = torch.sigmoid(attn_logits)
        pos = gates.flip(-1).cumsum(dim=-1).flip(-1)
        pos = pos.clamp(max=self.npos_max - 1)
        # interpolate from integer positions
        pos_ceil = pos.ceil().long()
        pos_floor = pos.floor().long()
        logits_int = torch.matmul(query, self.pos_emb)
        logits_ceil = logits_int.gather(-1, pos_ceil)
        logits_floor = logits_int.gather(-1, pos_floor)
        w = pos - pos_floor
        return logits_ceil * w + logits_floor * (1 - w)


class ListingSelfAttn(nn.Module):
    def __init__(self, npos_max, head_dim):
        super().__init__()
        self.cope = ListingCoPE(npos_max, head_dim)
        self.head_dim = head_dim

    def forward(self, query, key, val, mask):
        # q, k, v have dimensions batch x seq_len x head_dim
        attn_logits = torch.bmm(query, key.transpose(-1, -2))
        attn_logits = attn_logits / math.sqrt(self.head_dim)
        attn_logits += mask.log()
        attn_logits += self.cope(query, attn_logits)
        attn = torch.softmax(attn_logits, dim=-1)
        out = torch.bmm(attn, val)
        return out


# -- helpers ---------------------------------------------------------------------------
def _ctx(b, nq, nk):
    pos = torch.arange(nk - nq, nk)[None].expand(b, nq)
    return PEContext(position_ids=pos, key_position_ids=torch.arange(nk)[None].expand(b, nk), past_length=nk - nq)


def _encoding(npos_max=64, **opts):
    cfg = tiny_config("cope", num_attention_heads=4, num_key_value_heads=2, pe_options={"npos_max": npos_max, **opts})
    return build_encoding(cfg)


def _listing_out(q, k, v, e, npos_max):
    """Listing 1 per (batch, head): heads folded into the batch, GQA keys repeated."""
    b, h, n, d = q.shape
    rep = h // k.shape[1]
    k, v = attn.repeat_kv(k, rep), attn.repeat_kv(v, rep)
    ref = ListingSelfAttn(npos_max, d).double()
    with torch.no_grad():
        ref.cope.pos_emb.copy_(e[None])
    mask = torch.tril(torch.ones(n, n, dtype=torch.float64))[None]
    fold = lambda t: t.reshape(b * h, n, -1)
    return ref(fold(q), fold(k), fold(v), mask).reshape(b, h, n, d)


# -- (1) the paper's listing -------------------------------------------------------------
@pytest.mark.parametrize("npos_max", [64, 5])
def test_matches_paper_listing(npos_max):
    torch.manual_seed(0)
    pe = _encoding(npos_max)
    b, h, hk, n, d = 2, 4, 2, 11, pe.head_dim
    q, k, v = torch.randn(b, h, n, d) * 2, torch.randn(b, hk, n, d) * 2, torch.randn(b, hk, n, d)
    with torch.no_grad():
        pe.pos_emb.normal_()
    want = _listing_out(q.double(), k.double(), v.double(), pe.pos_emb[0].double(), npos_max).float()
    # full causal forward, through both back-ends
    bias = pe.reference_bias(0, q, k, _ctx(b, n, n))
    out, _ = attn.eager_attention(q, k, v, bias=bias, scale=pe.scale())
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    out = attn.sdpa_attention(q, k, v, bias=bias, scale=pe.scale())
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    # the last 3 queries against all 11 (cached) keys: the listing's last 3 rows
    nq = 3
    bias = pe.reference_bias(0, q[:, :, -nq:], k, _ctx(b, nq, n))
    allowed = attn.build_allowed(None, nq, n, q.device)
    out, _ = attn.eager_attention(q[:, :, -nq:], k, v, bias=bias, allowed=allowed, scale=pe.scale())
    torch.testing.assert_close(out, want[:, :, -nq:], atol=1e-5, rtol=1e-5)
    # the clamp is exercised with npos_max=5, and positions beyond 1 otherwise
    p = pe.positions(pe.gates(q, pe.gate_keys(0, k, None)))
    assert p.max() > (4 - 1e-6 if npos_max == 5 else 2)


def test_whole_attention_layer_matches_listing():
    """PeevalAttention (identity q/k/v/o projections, one head) == the listing."""
    from peeval.models.modeling_peeval import PeevalAttention

    d = 8
    cfg = tiny_config(
        "cope", hidden_size=d, num_attention_heads=1, num_key_value_heads=1, head_dim=d, pe_options={"npos_max": 6}
    )
    pe = build_encoding(cfg)
    layer = PeevalAttention(cfg, 0)
    torch.manual_seed(3)
    with torch.no_grad():
        for lin in (layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj):
            lin.weight.copy_(torch.eye(d))
        pe.pos_emb.normal_()
    x = torch.randn(2, 10, d) * 2
    with torch.no_grad():
        want = _listing_out(*(x[:, None].double(),) * 3, pe.pos_emb[0].double(), 6)[:, 0].float()
        for backend in ("sdpa", "eager"):
            cfg.attn_backend = backend
            out, _ = layer(x, pe, _ctx(2, 10, 10), None, None)
            torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)


# -- (2) gates and positions by hand -------------------------------------------------------
def test_future_gates_zero_and_positions_clamped():
    pe = _encoding(npos_max=3)
    d = pe.head_dim
    n = 6
    # q = 0: every allowed gate is σ(0) = 1/2, so p_ij = (i - j + 1) / 2, clamped at 2
    q = torch.zeros(1, 4, n, d)
    k = torch.randn(1, 2, n, d)
    g = pe.gates(q, pe.gate_keys(0, k, None))
    i, j = torch.arange(n)[:, None], torch.arange(n)[None]
    want_g = torch.where(j <= i, 0.5, 0.0).expand(1, 4, n, n)
    assert torch.equal(g, want_g)
    want_p = torch.where(j <= i, ((i - j + 1) * 0.5).clamp(max=2.0), 0.0)
    assert torch.equal(pe.positions(g), want_p.expand(1, 4, n, n))
    # hand-picked gates: one query, keys with logits 0, +inf-ish, -inf-ish, 0 (last = itself)
    q = torch.zeros(1, 4, 1, d)
    q[..., 0] = 1.0
    k = torch.zeros(1, 2, 4, d)
    k[..., 0] = torch.tensor([0.0, 1e4, -1e4, 0.0]) * math.sqrt(d)
    g = pe.gates(q, pe.gate_keys(0, k, None))[0, 0, 0]
    assert torch.equal(g, torch.tensor([0.5, 1.0, 0.0, 0.5]))
    assert torch.equal(pe.positions(g), torch.tensor([2.0, 1.5, 0.5, 0.5]))  # 2.0 is the clamp
    # decoding: the last query of a 3-of-5 call sees all keys, the first one 3 of them
    g = pe.gates(torch.zeros(1, 4, 3, d), torch.randn(1, 2, 5, d))[0, 0]
    assert torch.equal(g[0], torch.tensor([0.5, 0.5, 0.5, 0.0, 0.0]))
    assert torch.equal(g[2], torch.full((5,), 0.5))


def test_interpolation_between_integer_positions():
    """z_i[p] = (p - ⌊p⌋) q·e[⌈p⌉] + (1 - p + ⌊p⌋) q·e[⌊p⌋] (Eq. 8), with q unscaled."""
    pe = _encoding(npos_max=4)
    d = pe.head_dim
    with torch.no_grad():
        pe.pos_emb.zero_()
        pe.pos_emb[0, 0] = torch.tensor([0.0, 10.0, 20.0, 30.0])  # q·e[p] = 10 p q_0
    q = torch.zeros(1, 4, 3, d)
    q[..., 0] = 3.0  # unscaled: a 1/√d factor would show
    k = torch.zeros(1, 2, 3, d)
    k[..., 1] = 1.0  # q·k = 0: gates 1/2, p = [1.5, 1, 0.5] on the last row
    b = pe.reference_bias(0, q, k, _ctx(1, 3, 3))
    torch.testing.assert_close(b[0, 0, 2], 30.0 * torch.tensor([1.5, 1.0, 0.5]))


# -- (3) zero init ------------------------------------------------------------------------
@pytest.mark.parametrize("opts", [{}, {"share_layers": False}, {"sep_keys": True}])
def test_zero_init_equals_nope(opts):
    m = tiny_model("cope", pe_options=opts)
    assert m.model.pe.pos_emb.abs().sum() == 0
    nope = tiny_model("nope")
    missing, unexpected = nope.load_state_dict(m.state_dict(), strict=False)
    assert not missing and all(k.startswith("model.pe.") for k in unexpected)
    x = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(m(x).logits, nope(x).logits, atol=1e-6, rtol=1e-6)
        m.model.pe.pos_emb.normal_()
        assert (m(x).logits - nope(x).logits).abs().max() > 1e-3


def test_with_rope_zero_init_equals_rope():
    m = tiny_model("cope", pe_options={"with_rope": True})
    rope = tiny_model("rope")
    rope.load_state_dict(m.state_dict(), strict=False)
    x = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(m(x).logits, rope(x).logits, atol=1e-6, rtol=1e-6)


# -- (4) options ---------------------------------------------------------------------------
OPTION_SETS = [
    {"sep_keys": True},
    {"val_gates": True},
    {"with_rope": True},
    {"share_layers": False},
    {"npos_max": 3, "with_rope": True, "share_layers": False},
]


def _needs_values(opts):
    if opts.get("val_gates") and "values" not in PEContext.__dataclass_fields__:
        pytest.skip("val_gates needs ctx.values from the attention (shared change pending)")


@pytest.mark.parametrize("opts", OPTION_SETS, ids=lambda o: ",".join(o))
def test_option_forward_backward_and_decoding(opts):
    _needs_values(opts)
    m = tiny_model("cope", pe_options=opts).train()
    randomize_(m)
    x = torch.randint(0, 61, (2, 12))
    out = m(x, labels=x)
    out.loss.backward()
    pe = m.model.pe
    assert torch.isfinite(out.loss) and pe.pos_emb.grad.abs().sum() > 0
    if opts.get("sep_keys"):
        assert all(lin.weight.grad.abs().sum() > 0 for lin in pe.gate_proj)
    m.eval()
    n = 11
    with torch.no_grad():
        full = m(x[:, :n]).logits
        torch.testing.assert_close(decode_logits(m, x, 4, n), full, atol=1e-4, rtol=1e-4)
        m.config.attn_backend = "eager"
        torch.testing.assert_close(m(x[:, :n]).logits, full, atol=1e-4, rtol=1e-4)


def test_option_shapes_and_effects():
    assert _encoding().pos_emb.shape == (1, 8, 64)
    per_layer = _encoding(16, share_layers=False)
    assert per_layer.pos_emb.shape == (2, 8, 16)
    sep = _encoding(sep_keys=True)
    assert len(sep.gate_proj) == 2 and sep.gate_proj[0].weight.shape == (2 * 8, 32)  # layers; Hk·d × C
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8)
    # per-layer e: layers give different biases
    with torch.no_grad():
        per_layer.pos_emb.normal_()
    ctx = _ctx(1, 5, 5)
    assert not torch.allclose(per_layer.reference_bias(0, q, k, ctx), per_layer.reference_bias(1, q, k, ctx))
    # with_rope rotates q/k, the plain encoding leaves them
    rot = _encoding(with_rope=True)
    q2, k2 = rot.transform_qk(0, q, k[:, :, :5], ctx)
    assert not torch.allclose(q2, q) and _encoding().transform_qk(0, q, k, ctx)[0] is q


def _rope64(monkeypatch):
    """RoPE angles in float64 (transformers computes them in float32, whose round-off alone
    moves logits ~1e-7 under a shift), so that a float64 model is relative to ~1e-15."""
    from peeval.models.encodings import rope

    def cos_sin(self, x, position_ids, ctx=None):
        ang = position_ids.double()[..., None] * self.rotary.inv_freq.double()
        emb = torch.cat((ang, ang), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    monkeypatch.setattr(rope.RoPE, "cos_sin", cos_sin)


@pytest.mark.parametrize("opts", [{}, {"sep_keys": True}, {"val_gates": True}, {"npos_max": 3}])
def test_with_rope_is_relative_float64(monkeypatch, opts):
    """CoPE + RoPE: shifting every position by 5 leaves the logits (float64) unchanged: the
    gates see rotated q·k (relative), z = q·e the un-rotated q."""
    _rope64(monkeypatch)
    m = tiny_model("cope", pe_options={"with_rope": True, **opts})
    randomize_(m, std=0.5)
    m = m.double()
    x = torch.randint(0, 61, (2, 12))
    pos = torch.arange(12)[None].expand(2, 12)
    with torch.no_grad():
        a, b = m(x, position_ids=pos).logits, m(x, position_ids=pos + 5).logits
        assert (a - b).abs().max() < 1e-10
        # and the positions really enter (z is not zero): e = 0 gives other logits
        m.model.pe.pos_emb.zero_()
        assert (m(x).logits - a).abs().max() > 1e-3


def test_sep_keys_gates_by_hand_from_the_layer_input():
    """sep_keys: g_ij = σ(q_i·(W_g h_j)/√d), h = the attention input (seeds/cope.txt §4),
    re-derived in float64 from the layer's own input and weights."""
    m = tiny_model("cope", pe_options={"sep_keys": True, "npos_max": 5}, num_hidden_layers=1)
    randomize_(m, std=0.5)
    m = m.double()
    m.config.attn_backend = "eager"  # the reference path builds the full bias (blocked == eager: test_cope_blocked)
    pe, att = m.model.pe, m.model.layers[0].self_attn
    seen = {}
    att.register_forward_pre_hook(lambda mod, args: seen.update(h=args[0]))
    orig = pe.reference_bias
    pe.reference_bias = lambda layer, q, k, ctx: seen.setdefault("bias", orig(layer, q, k, ctx))
    x = torch.randint(0, 61, (1, 9))
    with torch.no_grad():
        m(x)
    h = seen["h"][0]  # (N, C)
    n, d, hq, hk = h.shape[0], 8, 4, 2
    q = (h @ att.q_proj.weight.T).view(n, hq, d)
    gk = (h @ pe.gate_proj[0].weight.T).view(n, hk, d)
    e = pe.pos_emb[0]  # (d, npos_max)
    for head in range(hq):
        for i in range(n):
            g = [1 / (1 + math.exp(-(q[i, head] @ gk[j, head // 2]).item() / math.sqrt(d))) for j in range(i + 1)]
            for j in range(i + 1):
                p = min(sum(g[j:]), 4.0)
                lo, w = math.floor(p), p - math.floor(p)
                z = (q[i, head] @ e).tolist()
                want = z[min(lo + 1, 4)] * w + z[lo] * (1 - w)
                assert seen["bias"][0, head, i, j].item() == pytest.approx(want, rel=1e-9, abs=1e-12)
    # the attention keys k_j = W_k h_j do not feed the gates: scaling W_k leaves the bias
    before = seen["bias"]
    with torch.no_grad():
        att.k_proj.weight.mul_(3)
        seen.clear()
        m(x)
    torch.testing.assert_close(seen["bias"], before, rtol=0, atol=1e-12)


def test_val_gates_use_values():
    pe = _encoding(val_gates=True)
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    ctx = _ctx(1, 5, 5)
    if "values" not in PEContext.__dataclass_fields__:
        with pytest.raises(NotImplementedError, match="val_gates"):
            pe.reference_bias(0, q, k, ctx)
        pytest.skip("val_gates needs ctx.values from the attention (shared change pending)")
    ctx.values = v
    torch.testing.assert_close(pe.gates(q, pe.gate_keys(0, k, ctx)), pe.gates(q, v))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64", None])
def test_bad_npos_max_fails_naming_it(bad):
    with pytest.raises(ValueError, match="npos_max"):
        tiny_config("cope", pe_options={"npos_max": bad})


def test_sep_keys_and_val_gates_exclusive():
    with pytest.raises(ValueError, match="sep_keys"):
        _encoding(sep_keys=True, val_gates=True)
