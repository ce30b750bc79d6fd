"""Formula checks by hand for the additive-bias encodings: alibi, t5, kerple, fire."""

import math

import pytest
import torch
from conftest import tiny_model

from peeval.models.encodings.base import PEContext


def ctx_for(n: int, start: int = 0) -> PEContext:
    pos = torch.arange(start, start + n)[None]
    return PEContext(position_ids=pos, key_position_ids=pos, past_length=0)


def test_alibi_slopes_8_and_12_heads():
    from peeval.models.encodings.alibi import alibi_slopes

    assert alibi_slopes(8).tolist() == [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    expected12 = [2.0**-h for h in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected12))


def test_alibi_bias_is_minus_slope_times_distance():
    m = tiny_model("alibi")  # 4 heads: slopes 2^-2, 2^-4, 2^-6, 2^-8
    b = m.model.pe.reference_bias(0, ctx_for(6))
    assert b.shape == (1, 4, 6, 6)
    assert b[0, 0, 5, 2].item() == pytest.approx(-3 * 0.25)
    assert b[0, 3, 4, 0].item() == pytest.approx(-4 * 2**-8)
    assert b[0, 1, 3, 3].item() == 0.0
    assert m.model.pe.alibi_slopes.tolist() == [0.25, 0.0625, 2**-6, 2**-8]


@pytest.mark.parametrize(
    "n,bucket",  # num_buckets=32, max_distance=128: exact below 16, then 16 + ⌊ln(n/16)/ln 8 · 16⌋
    [(0, 0), (5, 5), (15, 15), (16, 16), (20, 17), (32, 21), (64, 26), (100, 30), (127, 31), (128, 31), (5000, 31)],
)
def test_t5_causal_buckets_by_hand(n, bucket):
    from peeval.models.encodings.t5 import causal_buckets

    assert causal_buckets(torch.tensor([n]), 32, 128).item() == bucket


def test_t5_bias_reads_the_shared_table():
    m = tiny_model("t5", pe_options={"num_buckets": 8, "max_distance": 16})
    pe = m.model.pe
    with torch.no_grad():
        pe.relative_attention_bias.weight.copy_(torch.arange(32.0).view(8, 4))
    ctx = ctx_for(20)
    b = pe.reference_bias(0, ctx)
    # distance 2 -> bucket 2 (exact below 4); distance 12 -> 4 + ⌊ln 3 / ln 4 · 4⌋ = 7
    assert b[0, 1, 9, 7].item() == 2 * 4 + 1
    assert b[0, 3, 15, 3].item() == 7 * 4 + 3
    assert pe.reference_bias(1, ctx) is b  # one bias for the whole model


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("variant", ["log", "power"])
def test_kerple_by_hand(variant, share):
    m = tiny_model("kerple", pe_options={"variant": variant, "share_layers": share})
    pe = m.model.pe
    row = 0 if share else 1
    with torch.no_grad():
        pe.r1[row] = torch.tensor([0.5, 1.5, -3.0, 2.0])
        pe.r2[row] = torch.tensor([0.3, 0.9, 0.5, 3.0])
    b = pe.reference_bias(1, ctx_for(8))
    r1 = [0.5, 1.5, 0.01, 2.0]  # used clamped to >= 0.01
    r2 = [0.3, 0.9, 0.5, 3.0 if variant == "log" else 2.0]  # power exponent <= 2
    for h in range(4):
        for i, j in [(7, 0), (5, 4), (3, 3)]:
            d = i - j
            want = -r1[h] * (math.log(1 + r2[h] * d) if variant == "log" else d ** r2[h])
            assert b[0, h, i, j].item() == pytest.approx(want, rel=1e-5, abs=1e-7)
    # shared: layer 0 reads the same kernel; per layer: layer 0 keeps its own
    assert torch.equal(pe.reference_bias(0, ctx_for(8)), b) == share


@pytest.mark.parametrize("variant", ["log", "power"])
def test_kerple_init_matches_authors_ranges(variant):
    """chijames/KERPLE: p ~ 2·U(0,1), a ~ U(0,1); log: -p·log(1 + a·d), power: -a·d^p.

    64 heads: the chance that all of U(0, 2) stays below 1 is 2^-64."""
    pe = tiny_model("kerple", pe_options={"variant": variant}, num_attention_heads=64, hidden_size=64).model.pe
    assert pe.r1.shape == pe.r2.shape == (1, 64)  # one kernel shared by the layers, as the reference
    p, a = (pe.r1, pe.r2) if variant == "log" else (pe.r2, pe.r1)  # p: multiplier (log) / exponent (power)
    assert p.min() >= 0 and p.max() <= 2 and p.max() > 1
    assert a.min() >= 0 and a.max() <= 1


def test_kerple_per_layer_option():
    pe = tiny_model("kerple", pe_options={"share_layers": False}, num_hidden_layers=3).model.pe
    assert pe.r1.shape == pe.r2.shape == (3, 4)
    assert not torch.equal(pe.r1[0], pe.r1[1])


def test_kerple_bad_variant_names_it():
    with pytest.raises(ValueError, match="variant"):
        tiny_model("kerple", pe_options={"variant": "bogus"})


def test_fire_bias_by_hand():
    m = tiny_model("fire", pe_options={"hidden": 2, "init_L": 4})
    pe = m.model.pe
    with torch.no_grad():
        pe.c[0], pe.L_mult[0] = 0.5, -1.0  # L = |−1·4| = 4
        pe.w1[0] = torch.tensor([1.0, -2.0])
        pe.b1[0] = torch.tensor([0.1, 0.3])
        pe.w2[0] = torch.tensor([[1.0, 2.0, 0.0, -1.0], [0.5, 0.0, 1.0, 1.0]])
        pe.b2[0] = torch.tensor([0.0, 0.1, 0.2, 0.3])

    def psi(x):
        return math.log(abs(0.5 * x) + 1)

    def f(x, h):
        hid = [max(0.0, x * 1.0 + 0.1), max(0.0, x * -2.0 + 0.3)]
        w2 = [[1.0, 2.0, 0.0, -1.0], [0.5, 0.0, 1.0, 1.0]]
        return hid[0] * w2[0][h] + hid[1] * w2[1][h] + [0.0, 0.1, 0.2, 0.3][h]

    b = pe.reference_bias(0, ctx_for(12))
    for i, j in [(2, 0), (10, 3), (11, 11), (3, 1)]:
        x = psi(i - j) / (psi(max(i, 4)) + 1e-6)  # below L the normaliser is ψ(L)
        for h in range(4):
            assert b[0, h, i, j].item() == pytest.approx(f(x, h), rel=1e-5, abs=1e-6)


def test_fire_chunked_eval_equals_direct(monkeypatch):
    from peeval.models.encodings import fire

    m = tiny_model("fire")
    ctx = ctx_for(40, start=500)
    with torch.no_grad():
        direct = m.model.pe.reference_bias(1, ctx)
        monkeypatch.setattr(fire, "CHUNK", 40 * 32 * 3)  # 3 rows a chunk
        chunked = m.model.pe.reference_bias(1, ctx)
    torch.testing.assert_close(chunked, direct)


@pytest.mark.parametrize("pe", ["alibi", "t5", "kerple", "fire"])
def test_bias_encodings_are_relative(pe):
    """Shifting every position leaves logits unchanged (FIRE: only while i stays below L)."""
    m = tiny_model(pe)
    x = torch.randint(0, 61, (1, 10))
    with torch.no_grad():
        a = m(x).logits
        b = m(x, position_ids=torch.arange(7, 17)[None]).logits
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
