"""pope: the sdpa cartesian trick equals the paper's score Σ μ_q μ_k cos((s−t)θ+δ)/√d
(checked with explicit loops), θ, the δ clamp, the 1/√d scale, relative-position
invariance, and that every option variant trains and decodes like a full forward."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import decode_logits, randomize_, tiny_config, tiny_model

from peeval.models.encodings.base import PEContext


def _pe(**opts):
    return tiny_model("pope", pe_options=opts).model.pe


def _ctx(pos):
    pos = torch.tensor([pos])
    return PEContext(position_ids=pos, key_position_ids=pos, past_length=0)


def _hand_score(q, k, tq, sk, theta, delta, d, softplus=True):
    """Σ_c μ_qc μ_kc cos((s−t)θ_c + δ_c) / √d, element by element."""
    mu = (lambda x: math.log1p(math.exp(x))) if softplus else (lambda x: x)
    total = 0.0
    for c in range(d):
        total += mu(q[c]) * mu(k[c]) * math.cos((sk - tq) * theta[c] + delta[c])
    return total / math.sqrt(d)


def test_theta_by_hand():
    pe = _pe()
    d = pe.head_dim  # 8, base = rope_theta = 100
    assert pe.theta().dtype == torch.float32
    for c in range(1, d + 1):
        assert pe.theta()[c - 1].item() == pytest.approx(100.0 ** (-(c - 1) / d), rel=1e-6)
    assert pe.theta()[0] == 1.0 and pe.theta()[-1] < pe.theta()[0]  # decreasing, not growing


@pytest.mark.parametrize("softplus", [True, False])
def test_sdpa_score_equals_formula_by_hand(softplus):
    pe = _pe(softplus=softplus)
    d, h, hk = pe.head_dim, pe.num_heads, pe.num_kv_heads
    with torch.no_grad():  # non-zero δ, one value per KV head and element, all within bounds
        pe.delta.copy_(-torch.rand(pe.delta.shape, generator=torch.Generator().manual_seed(3)) * 2 * math.pi)
    g = torch.Generator().manual_seed(0)
    pos = [0, 3, 10, 17]  # irregular positions: the score depends on s − t only through θ
    q = torch.randn(1, h, len(pos), d, generator=g)
    k = torch.randn(1, hk, len(pos), d, generator=g)
    layer = 1
    qt, kt = pe.transform_qk(layer, q, k, _ctx(pos))
    assert qt.shape[-1] == 2 * d and kt.shape[-1] == 2 * d
    scores = qt @ kt.repeat_interleave(h // hk, dim=1).transpose(-1, -2) * pe.scale()
    theta, delta = pe.theta().tolist(), pe.delta[layer].tolist()
    for head in range(h):
        kv = head // (h // hk)  # δ lives on the KV head serving this query head
        for i, t in enumerate(pos):
            for j, s in enumerate(pos):
                want = _hand_score(q[0, head, i].tolist(), k[0, kv, j].tolist(), t, s, theta, delta[kv], d, softplus)
                assert scores[0, head, i, j].item() == pytest.approx(want, abs=1e-5)


def test_scale_is_one_over_sqrt_d_in_attention():
    """The model's attention probabilities use 1/√d; sdpa's default 1/√(2d) would differ."""
    m = tiny_model("pope", pe_options={"delta_init": "uniform"})
    randomize_(m)
    pe, att = m.model.pe, m.model.layers[0].self_attn
    d, h, hk = pe.head_dim, pe.num_heads, pe.num_kv_heads
    assert pe.scale() == pytest.approx(1 / math.sqrt(d))
    seen = {}
    hooks = [
        getattr(att, n).register_forward_hook(lambda mod, i, o, n=n: seen.__setitem__(n, o))
        for n in ("q_proj", "k_proj")
    ]
    x = torch.randint(0, 61, (1, 6))
    with torch.no_grad():
        probs = m(x, output_attentions=True).attentions[0]
    for hk_ in hooks:
        hk_.remove()
    n = x.shape[1]
    q = seen["q_proj"].view(1, n, h, d).transpose(1, 2)
    k = seen["k_proj"].view(1, n, hk, d).transpose(1, 2).repeat_interleave(h // hk, dim=1)
    mu_q, mu_k = F.softplus(q).double(), F.softplus(k).double()
    theta = pe.theta().double()
    delta = pe.delta_for(0).double().repeat_interleave(h // hk, dim=0)  # (H, d)
    pos = torch.arange(n, dtype=torch.float64)
    ang = (pos[None, :, None] - pos[:, None, None]) * theta + delta[:, None, None, :]  # (H, t, s, d)
    raw = (mu_q[0, :, :, None, :] * mu_k[0, :, None, :, :] * torch.cos(ang)).sum(-1)
    causal = torch.ones(n, n, dtype=torch.bool).tril()

    def softmax(scale):
        return torch.softmax((raw * scale).masked_fill(~causal, float("-inf")), -1)

    torch.testing.assert_close(probs[0].double(), softmax(d**-0.5), atol=1e-5, rtol=1e-5)
    assert (probs[0].double() - softmax((2 * d) ** -0.5)).abs().max() > 1e-3


def test_delta_clamped_in_forward_not_in_parameter():
    pe = _pe()
    vals = torch.tensor([-10.0, -2 * math.pi, -1.0, 0.0, 0.5, 3.0, -7.0, -0.25])
    with torch.no_grad():
        pe.delta[0, 0] = vals
    got = pe.delta_for(0)[0]
    want = torch.tensor([-2 * math.pi, -2 * math.pi, -1.0, 0.0, 0.0, 0.0, -2 * math.pi, -0.25])
    torch.testing.assert_close(got, want)
    assert torch.equal(pe.delta[0, 0].detach(), vals)  # the parameter itself is untouched
    # and the clamped value is what the transform uses: δ=3 acts exactly like δ=0
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    _, k_a = pe.transform_qk(0, q, k, _ctx([0, 1, 2]))
    with torch.no_grad():
        pe.delta[0, 0] = want
    _, k_b = pe.transform_qk(0, q, k, _ctx([0, 1, 2]))
    torch.testing.assert_close(k_a, k_b)


def test_delta_init_and_ablation():
    assert torch.equal(_pe().delta, torch.zeros_like(_pe().delta))
    u = _pe(delta_init="uniform").delta
    assert u.min() >= -2 * math.pi and u.max() <= 0 and u.std() > 0.5
    assert u.shape == (2, 2, 8)  # (layers, KV heads, d): GQA -> δ per KV head
    off = _pe(delta=False)
    assert off.delta is None and off.delta_for(0) is None
    assert not any(True for _ in off.parameters())


def test_fused_leaves_qk_raw():
    pe = _pe()
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    ctx = _ctx([0, 1, 2])
    ctx.fused = True
    a, b = pe.transform_qk(0, q, k, ctx)
    assert a is q and b is k


def test_relative_position_invariance():
    m = tiny_model("pope", pe_options={"delta_init": "uniform"})
    randomize_(m)
    x = torch.randint(0, 61, (2, 10))
    pos = torch.arange(10)[None].expand(2, 10)
    with torch.no_grad():
        base = m(x, position_ids=pos).logits
        shifted = m(x, position_ids=pos + 37).logits
        spread = m(x, position_ids=pos * 2).logits  # different relative distances
    torch.testing.assert_close(shifted, base, atol=1e-4, rtol=1e-4)
    assert (spread - base).abs().max() > 1e-3  # positions do matter


VARIANTS = [
    {"delta_init": "zero"},
    {"delta_init": "uniform"},
    {"softplus": False},
    {"delta": False},
    {"softplus": False, "delta": False},
]


@pytest.mark.parametrize("opts", VARIANTS)
def test_variant_trains_and_decodes(opts):
    m = tiny_model("pope", pe_options=opts).train()
    x = torch.randint(0, 61, (2, 12))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss = m(x, labels=x).loss
    loss.backward()
    assert torch.isfinite(loss)
    if m.model.pe.delta is not None:
        assert m.model.pe.delta.grad is not None and m.model.pe.delta.grad.abs().sum() > 0
    opt.step()
    m.eval()
    randomize_(m)
    with torch.no_grad():
        full = m(x).logits
    torch.testing.assert_close(decode_logits(m, x, 4), full, atol=1e-4, rtol=1e-4)


def test_save_load_keeps_delta_and_recomputes_theta(tmp_ckpt):
    from transformers import AutoModelForCausalLM

    m = tiny_model("pope", pe_options={"delta_init": "uniform"})
    m.save_pretrained(tmp_ckpt)
    m2 = AutoModelForCausalLM.from_pretrained(tmp_ckpt)
    assert torch.equal(m2.model.pe.delta, m.model.pe.delta)
    torch.testing.assert_close(m2.model.pe.theta(), 100.0 ** (-torch.arange(8.0) / 8))


def test_bad_option_value():
    with pytest.raises(ValueError, match="delta_init"):
        tiny_config("pope", pe_options={"delta_init": "normal"})


def test_delta_clamp_passes_the_gradient_at_its_bounds_on_every_torch():
    """δ starts at the clamp's upper bound (init "zero"). torch 2.14 changed ``torch.clamp``'s gradient at a bound
    to 0, which would freeze δ there for good; inside [−2π, 0] (bounds included) the gradient is 1, beyond 0."""
    from peeval.models.encodings.pope import clamp_phase

    two_pi = 2 * math.pi
    d = torch.tensor([0.0, -two_pi, -1.0, 0.5, -7.0], dtype=torch.float64, requires_grad=True)
    out = clamp_phase(d)
    out.sum().backward()
    assert out.tolist() == [0.0, -two_pi, -1.0, 0.0, -two_pi]
    assert d.grad.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
