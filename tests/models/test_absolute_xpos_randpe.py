"""learned / sinusoidal / xpos / randpe: formulas by hand, errors, randomized positions."""

import json
import math

import pytest
import torch
from conftest import cache_name, decode_logits, randomize_, tiny_model

from peeval.models.encodings import PEContext


def _ctx(pos, keys=None, past=0):
    pos = torch.tensor([pos]) if isinstance(pos[0], int) else torch.tensor(pos)
    keys = pos if keys is None else torch.tensor([keys])
    return PEContext(position_ids=pos, key_position_ids=keys, past_length=past)


# -- sinusoidal ---------------------------------------------------------------------------
DEFAULT = object()  # the option left out


@pytest.mark.parametrize(
    "base,scale", [(10000, DEFAULT), (100.0, DEFAULT), (10000, "init_std"), (10000, None), (10000, 1.0), (10000, 0.5)]
)
def test_sinusoidal_values_by_hand(base, scale):
    opts = {"base": base} if base != 10000 else {}
    if scale is not DEFAULT:
        opts["scale"] = scale
    m = tiny_model("sinusoidal", pe_options=opts)
    c = m.config.hidden_size
    if scale in (DEFAULT, "init_std"):
        s = math.sqrt(2) * m.config.initializer_range  # default: position RMS = token-embedding init std
    else:
        s = 1 / math.sqrt(c) if scale is None else scale  # null: the old 1/√C
    for p in (0, 7, 1000):  # 1000 >> max_position_embeddings=32: it extrapolates
        got = m.model.pe.embed(torch.zeros(1, 1, c), _ctx([p]))[0, 0]
        want = []
        for i in range(c // 2):
            w = 1.0 / base ** (2 * i / c)
            want += [s * math.sin(p * w), s * math.cos(p * w)]
        torch.testing.assert_close(got, torch.tensor(want), atol=1e-6, rtol=0)


def test_sinusoidal_position_rms_equals_token_embedding_rms_at_init():
    """The issue-29 scale: at initialisation the position signal is as loud as the tokens (ratio 1, not
    the old 1/√C's 3.1 at C=128, std 0.02). Both RMS by hand in float64, from the model's own tensors."""
    m = tiny_model("sinusoidal", hidden_size=128, vocab_size=512)
    c, n = m.config.hidden_size, 64
    added = m.model.pe.embed(torch.zeros(1, n, c), _ctx([list(range(n))]))[0].double()
    pos_rms = math.sqrt(sum(float(x) ** 2 for x in added.flatten()) / added.numel())
    # the same by hand: every row of the ±1 table has RMS 1/√2, times the scale √2·initializer_range
    table = [math.sin(p / 10000 ** (2 * i / c)) for p in range(n) for i in range(c // 2)]
    table += [math.cos(p / 10000 ** (2 * i / c)) for p in range(n) for i in range(c // 2)]
    assert math.sqrt(sum(x * x for x in table) / len(table)) == pytest.approx(2**-0.5, rel=1e-12)
    assert pos_rms == pytest.approx(m.config.initializer_range, rel=1e-6)
    tokens = m.model.embed_tokens.weight.detach().double()
    tok_rms = math.sqrt(float((tokens * tokens).sum()) / tokens.numel())
    assert tok_rms == pytest.approx(m.config.initializer_range, rel=0.03)  # 65536 normal draws
    assert pos_rms / tok_rms == pytest.approx(1.0, rel=0.05)


def test_sinusoidal_scale_must_be_positive():
    for bad in (0, -1.0, "1/sqrt(C)", True):
        with pytest.raises(ValueError, match=r"scale.*'init_std'.*number > 0.*null"):
            tiny_model("sinusoidal", pe_options={"scale": bad})


def test_sinusoidal_is_added_to_the_tokens():
    m = tiny_model("sinusoidal")
    h = torch.randn(2, 3, m.config.hidden_size)
    pos = [[5, 6, 7], [0, 1, 2]]
    out = m.model.pe.embed(h, _ctx(pos))
    zero = m.model.pe.embed(torch.zeros_like(h), _ctx(pos))
    torch.testing.assert_close(out, h + zero)
    s = math.sqrt(2) * m.config.initializer_range  # position 0: sin 0, cos 1 (times the default scale)
    assert zero[1, 0, 0::2].abs().max() == 0 and torch.allclose(zero[1, 0, 1::2], torch.tensor(s))


def test_sinusoidal_checkpoint_saved_with_the_old_default_keeps_it(tmp_path):
    """A config.json written before the default changed records scale: null and loads with 1/√C."""
    from transformers import AutoConfig

    m = tiny_model("sinusoidal")
    m.config.save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    saved = json.loads(path.read_text())
    assert saved["pe_options_effective"]["scale"] == "init_std"
    saved["pe_options_effective"]["scale"] = None  # what the old code wrote
    path.write_text(json.dumps(saved))
    cfg = AutoConfig.from_pretrained(tmp_path)
    assert cfg.pe_options == {"scale": None}
    m = tiny_model("sinusoidal", pe_options=cfg.pe_options)
    zero = m.model.pe.embed(torch.zeros(1, 1, m.config.hidden_size), _ctx([0]))
    assert torch.allclose(zero[0, 0, 1::2], torch.tensor(m.config.hidden_size**-0.5))


# -- learned ------------------------------------------------------------------------------
def test_learned_adds_its_table_row():
    m = tiny_model("learned")
    randomize_(m)
    h = torch.randn(1, 3, m.config.hidden_size)
    out = m.model.pe.embed(h, _ctx([4, 9, 31]))
    torch.testing.assert_close(out, h + m.model.pe.wpe.weight[[4, 9, 31]][None])


def test_learned_beyond_table_raises():
    m = tiny_model("learned")  # max_position_embeddings = 32
    with torch.no_grad():
        m(torch.randint(0, 61, (1, 32)))  # exactly the table: fine
        with pytest.raises(ValueError, match=r"max_position_embeddings=32.*33 positions"):
            m(torch.randint(0, 61, (1, 33)))


def test_learned_max_positions_table_past_the_training_length():
    """pe_options max_positions: 40 rows for a 32-token training length; rows 32..39 read as they are
    (initialised, never trained), row 40 raises naming the option."""
    m = tiny_model("learned", pe_options={"max_positions": 40})
    assert tuple(m.model.pe.wpe.weight.shape) == (40, m.config.hidden_size)
    assert m.config.max_position_embeddings == 32  # the training length is untouched
    randomize_(m)
    h = torch.randn(1, 2, m.config.hidden_size)
    torch.testing.assert_close(m.model.pe.embed(h, _ctx([33, 39])), h + m.model.pe.wpe.weight[[33, 39]][None])
    with torch.no_grad():
        m(torch.randint(0, 61, (1, 40)))
        with pytest.raises(ValueError, match=r"40 rows.*max_positions=40.*41 positions"):
            m(torch.randint(0, 61, (1, 41)))
    with pytest.raises(ValueError, match="max_positions"):
        tiny_model("learned", pe_options={"max_positions": 0})


def test_learned_generate_beyond_table_raises():
    m = tiny_model("learned")
    x = torch.randint(0, 61, (1, 30))
    with pytest.raises(ValueError, match=r"max_position_embeddings=32.*35 positions"):
        m.generate(x, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert m.generate(x, max_new_tokens=2, do_sample=False, pad_token_id=0).shape == (1, 32)


@pytest.mark.parametrize("pe", ["learned", "sinusoidal", "fire", "rope"])
def test_padded_batch_with_mask_equals_alone(pe):
    """An attention_mask without position_ids: pads are not positions (HF: cumsum(mask) − 1),
    so a left- or right-padded row equals the sequence alone (float64)."""
    m = tiny_model(pe)
    randomize_(m)
    m = m.double()
    a, b = torch.randint(1, 61, (1, 9)), torch.randint(1, 61, (1, 5))
    with torch.no_grad():
        alone = m(b).logits[0]
        # left padding
        batch = torch.cat([a, torch.cat([torch.zeros(1, 4, dtype=torch.long), b], 1)])
        mask = torch.tensor([[1] * 9, [0] * 4 + [1] * 5])
        out = m(batch, attention_mask=mask).logits
        torch.testing.assert_close(out[1, 4:], alone, rtol=0, atol=1e-12)
        torch.testing.assert_close(out[0], m(a).logits[0], rtol=0, atol=1e-12)
        # right padding
        batch = torch.cat([a, torch.cat([b, torch.zeros(1, 4, dtype=torch.long)], 1)])
        out = m(batch, attention_mask=mask.flip(-1)).logits
        torch.testing.assert_close(out[1, :5], alone, rtol=0, atol=1e-12)


def test_learned_left_padding_reads_rows_from_zero():
    """By hand: the learned table rows added for a left-padded row are 0, 1, 2, ... from its
    first real token (not the pad count)."""
    m = tiny_model("learned")
    randomize_(m)
    seen = []
    orig = m.model.pe.embed
    m.model.pe.embed = lambda h, ctx: (seen.append(ctx.position_ids.clone()), orig(h, ctx))[1]
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        m(torch.randint(1, 61, (2, 6)), attention_mask=mask)
    assert seen[0][0, 3:].tolist() == [0, 1, 2] and seen[0][1].tolist() == [0, 1, 2, 3, 4, 5]


# -- xpos ---------------------------------------------------------------------------------
def test_xpos_zeta_by_hand():
    from peeval.models.encodings.xpos import xpos_zeta

    # d = 8: ζ_c = (2c/8 + 0.4)/1.4, c = 0..3
    want = torch.tensor([0.4 / 1.4, 0.65 / 1.4, 0.9 / 1.4, 1.15 / 1.4])
    torch.testing.assert_close(xpos_zeta(8), want)


def _pairs_score(q, k, i, j, theta, d):
    """Σ_c rope(q at i)·rope(k at j) on pair (c, c+d/2), as a list per pair, by hand."""
    out = []
    for c in range(d // 2):
        th = theta ** (-2 * c / d)
        a, b = i * th, j * th
        q1 = (q[c] * math.cos(a) - q[c + d // 2] * math.sin(a), q[c] * math.sin(a) + q[c + d // 2] * math.cos(a))
        k1 = (k[c] * math.cos(b) - k[c + d // 2] * math.sin(b), k[c] * math.sin(b) + k[c + d // 2] * math.cos(b))
        out.append(q1[0] * k1[0] + q1[1] * k1[1])
    return out


@pytest.mark.parametrize("i,j", [(20, 3), (5, 5), (40, 0)])
def test_xpos_score_is_rope_times_decay(i, j):
    gamma = 8.0
    m = tiny_model("xpos", pe_options={"scale_base": gamma})
    pe, d = m.model.pe, m.config.head_dim  # d = 8
    q, k = torch.randn(1, 1, 1, d, dtype=torch.float64), torch.randn(1, 1, 1, d, dtype=torch.float64)
    qi, _ = pe.transform_qk(0, q, q, _ctx([i]))
    _, kj = pe.transform_qk(0, k, k, _ctx([j]))
    got = (qi * kj).sum().item()
    zeta = [(2 * c / d + 0.4) / 1.4 for c in range(d // 2)]
    per_pair = _pairs_score(q[0, 0, 0].tolist(), k[0, 0, 0].tolist(), i, j, 100.0, d)
    want = sum(s * z ** ((i - j) / gamma) for s, z in zip(per_pair, zeta))
    assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    rope = sum(per_pair)
    if i > j:
        assert abs(got) != pytest.approx(abs(rope), rel=1e-3)  # the decay is really there


def test_xpos_fixed_centre_scales():
    """q at position p: pair c scaled by ζ_c^((p − 16)/γ), centre o = max_position_embeddings//2."""
    gamma, p = 8.0, 30
    m = tiny_model("xpos", pe_options={"scale_base": gamma})
    d = m.config.head_dim
    q = torch.randn(1, 1, 1, d, dtype=torch.float64)
    qp, kp = m.model.pe.transform_qk(0, q, q, _ctx([p]))
    for c in range(d // 2):
        z = (2 * c / d + 0.4) / 1.4
        norm = q[..., [c, c + d // 2]].norm().item()
        assert qp[..., [c, c + d // 2]].norm().item() == pytest.approx(norm * z ** ((p - 16) / gamma), rel=1e-6)
        assert kp[..., [c, c + d // 2]].norm().item() == pytest.approx(norm * z ** (-(p - 16) / gamma), rel=1e-6)


def test_xpos_shift_invariant():
    m = tiny_model("xpos", pe_options={"scale_base": 64})
    randomize_(m)
    x = torch.randint(0, 61, (2, 12))
    pos = torch.arange(12)[None].expand(2, 12)
    with torch.no_grad():
        torch.testing.assert_close(m(x, position_ids=pos + 100).logits, m(x).logits, atol=1e-4, rtol=1e-4)


def test_xpos_half_precision_long_positions_finite():
    """At 8x the training length, bf16 scores stay finite (the centre keeps exponents moderate)."""
    m = tiny_model("xpos").to(torch.bfloat16)
    x = torch.randint(0, 61, (1, 256))
    with torch.no_grad():
        assert torch.isfinite(m(x).logits).all()


@pytest.mark.parametrize("i,j", [(511, 0), (511, 505), (0, 0), (300, 7), (256, 256)])
def test_xpos_float16_scores_finite_and_exact_across_the_max_length(i, j):
    """max_position_embeddings=512, γ=16: the q/k scales span ζ_0^(∓16) ≈ 5·10^8, beyond
    float16. float16 q/k still give the xpos score (float64 re-derivation from the same
    float16 inputs) for pairs anywhere in [0, 512)."""
    gamma = 16.0
    m = tiny_model("xpos", max_position_embeddings=512, pe_options={"scale_base": gamma})
    pe, d = m.model.pe, m.config.head_dim
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 1, 1, d, generator=g).mul(3).half() for _ in range(2))
    qi, _ = pe.transform_qk(0, q, q, _ctx([i]))
    _, kj = pe.transform_qk(0, k, k, _ctx([j]))
    assert torch.isfinite(qi).all() and torch.isfinite(kj).all()
    got = (qi.double() * kj.double()).sum().item()
    zeta = [(2 * c / d + 0.4) / 1.4 for c in range(d // 2)]
    per_pair = _pairs_score(q.double()[0, 0, 0].tolist(), k.double()[0, 0, 0].tolist(), i, j, 100.0, d)
    want = sum(s * z ** ((i - j) / gamma) for s, z in zip(per_pair, zeta))
    assert got == pytest.approx(want, rel=1e-4, abs=1e-6 * max(1.0, abs(per_pair[0])))


def test_xpos_float16_model_at_max_length_finite_and_close_to_float32():
    m = tiny_model("xpos", max_position_embeddings=512, pe_options={"scale_base": 16})
    randomize_(m, std=0.3)
    x = torch.randint(0, 61, (1, 512))
    with torch.no_grad():
        ref = m(x).logits
        out = m.half()(x).logits.float()
    assert torch.isfinite(out).all()
    assert (out - ref).abs().max() < 0.05 * ref.abs().max()  # float16 round-off of a 2-layer model
    # KV-cache decoding in float16 (float32 keys in the cache) equals the full forward
    h = m.half()
    with torch.no_grad():
        step = h(x[:, :500], use_cache=True)
        steps = [step.logits]
        for t in range(500, 512):
            step = h(x[:, t : t + 1], use_cache=True, **{cache_name(): getattr(step, cache_name())})
            steps.append(step.logits)
    torch.testing.assert_close(torch.cat(steps, 1).float(), out, atol=1e-2, rtol=1e-2)


# -- randpe -------------------------------------------------------------------------------
def _record_positions(m):
    """Wrap the base's transform_qk to record the (query, key) positions it is given."""
    seen = []
    base = m.model.pe.base
    orig = base.transform_qk

    def spy(layer, q, k, ctx):
        if layer == 0:
            seen.append((ctx.position_ids.clone(), ctx.key_position_ids.clone()))
        return orig(layer, q, k, ctx)

    base.transform_qk = spy
    return seen


def _check_subset(p, L):
    p = p.tolist()
    assert p == sorted(p) and len(set(p)) == len(p) and p[0] >= 0 and p[-1] < L


def _seeded_table(M, L, seed=0):
    """The documented evaluation table, re-derived: a sorted seeded M-subset of [0, L)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(L, generator=g).topk(M).indices.sort().values


def test_randpe_positions_sorted_distinct_in_range_and_deterministic_in_eval():
    m = tiny_model("randpe", pe_options={"max_positions": 200, "eval_length": 50})
    seen = _record_positions(m)
    x = torch.randint(0, 61, (2, 20))
    with torch.no_grad():
        a, b = m(x).logits, m(x).logits
    assert torch.equal(a, b)
    (p1, k1), (p2, _) = seen
    assert torch.equal(p1, p2) and torch.equal(p1, k1) and torch.equal(p1[0], p1[1])
    _check_subset(p1[0], 200)
    assert torch.equal(p1[0], _seeded_table(50, 200)[:20])  # the prefix of the fixed table
    assert not torch.equal(p1[0], torch.arange(20))  # really randomized
    # another model with the same seed draws the same; another seed does not
    m2 = tiny_model("randpe", pe_options={"max_positions": 200, "eval_length": 50})
    seen2 = _record_positions(m2)
    m3 = tiny_model("randpe", pe_options={"max_positions": 200, "eval_length": 50, "seed": 1})
    seen3 = _record_positions(m3)
    with torch.no_grad():
        m2(x), m3(x)
    assert torch.equal(seen2[0][0], p1) and not torch.equal(seen3[0][0], p1)


def test_randpe_default_eval_positions_are_the_full_range_in_order():
    """eval_length defaults to L: the L-subset of [0, L) is 0..L-1, the base's own positions."""
    m = tiny_model("randpe", pe_options={"max_positions": 64})
    seen = _record_positions(m)
    with torch.no_grad():
        m(torch.randint(0, 61, (1, 9)))
    assert seen[0][0][0].tolist() == list(range(9))


def test_randpe_fresh_draw_per_training_forward():
    m = tiny_model("randpe", pe_options={"max_positions": 1000}).train()
    seen = _record_positions(m)
    x = torch.randint(0, 61, (2, 16))
    a, b = m(x).logits, m(x).logits
    assert not torch.allclose(a, b)
    (p1, _), (p2, _) = seen
    assert not torch.equal(p1, p2)
    for p in (p1[0], p2[0]):
        _check_subset(p, 1000)


@pytest.mark.parametrize("base", ["rope", "xpos", "sinusoidal"])
def test_randpe_equals_base_at_the_drawn_positions(base):
    """randpe = the base encoding run with position_ids = the fixed evaluation positions."""
    m = tiny_model("randpe", pe_options={"base": base, "max_positions": 100, "eval_length": 30})
    randomize_(m)
    ref = tiny_model(base)
    ref.load_state_dict({k.replace("pe.base.", "pe."): v for k, v in m.state_dict().items()})
    x = torch.randint(0, 61, (2, 10))
    with torch.no_grad():
        out = m(x).logits
        pos = _seeded_table(30, 100)[:10]
        torch.testing.assert_close(out, ref(x, position_ids=pos[None].expand(2, 10)).logits)
        assert not torch.allclose(out, ref(x).logits, atol=1e-3)


@pytest.mark.parametrize("base", ["rope", "alibi"])
def test_randpe_eval_independent_of_batch_padding_and_later_tokens(base):
    """float64: a sequence scores the same alone, in a right- or left-padded batch with other
    partners, and its prefix scores the same as inside the longer input (causal)."""
    m = tiny_model("randpe", pe_options={"base": base, "max_positions": 100, "eval_length": 40})
    randomize_(m, std=0.5)
    m = m.double()
    a, b, c = (torch.randint(1, 61, (1, n)) for n in (7, 15, 11))
    z = lambda n: torch.zeros(1, n, dtype=torch.long)
    with torch.no_grad():
        alone = m(a).logits[0]
        # a prefix is not changed by what follows it
        torch.testing.assert_close(m(a[:, :4]).logits[0], alone[:4], rtol=0, atol=1e-12)
        # right padding, with and without a mask, two different partners
        for partner in (b, c):
            batch = torch.cat([torch.cat([a, z(partner.shape[1] - 7)], 1), partner])
            torch.testing.assert_close(m(batch).logits[0, :7], alone, rtol=0, atol=1e-12)
            mask = (torch.arange(batch.shape[1]) < torch.tensor([[7], [batch.shape[1]]])).long()
            torch.testing.assert_close(m(batch, attention_mask=mask).logits[0, :7], alone, rtol=0, atol=1e-12)
        # left padding with a mask (positions from the mask)
        batch = torch.cat([torch.cat([z(8), a], 1), b])
        mask = (batch != 0).long()  # tokens are drawn from 1..60: 0 only where padded
        torch.testing.assert_close(m(batch, attention_mask=mask).logits[0, 8:], alone, rtol=0, atol=1e-12)


def test_randpe_length_beyond_max_positions_raises():
    m = tiny_model("randpe", pe_options={"max_positions": 10})
    with torch.no_grad():
        m(torch.randint(0, 61, (1, 10)))  # L = N: every position, fine
        with pytest.raises(ValueError, match=r"max_positions=10.*12 positions"):
            m(torch.randint(0, 61, (1, 12)))
    with pytest.raises(ValueError, match=r"max_positions=10.*11 positions"):
        m.generate(torch.randint(0, 61, (1, 6)), max_new_tokens=5, do_sample=False, pad_token_id=0)
    m.train()
    with pytest.raises(ValueError, match="max_positions=10"):
        m(torch.randint(0, 61, (1, 12)))
    short = tiny_model("randpe", pe_options={"max_positions": 50, "eval_length": 8})
    with torch.no_grad(), pytest.raises(ValueError, match=r"eval_length=8.*9 positions"):
        short(torch.randint(0, 61, (1, 9)))
    with pytest.raises(ValueError, match=r"eval_length=60.*at most max_positions=50"):
        tiny_model("randpe", pe_options={"max_positions": 50, "eval_length": 60})


def test_randpe_decoding_equals_forward_without_generation_length():
    """Fixed evaluation positions: KV-cache decoding needs no set_generation_length."""
    m = tiny_model("randpe", pe_options={"max_positions": 500, "eval_length": 100})
    randomize_(m)
    seen = _record_positions(m)
    x = torch.randint(0, 61, (1, 12))
    with torch.no_grad():
        full = m(x).logits
    torch.testing.assert_close(decode_logits(m, x, 4), full, atol=1e-5, rtol=1e-5)
    table = _seeded_table(100, 500)
    assert torch.equal(seen[0][0][0], table[:12]) and torch.equal(seen[1][0][0], table[:4])
    for t, (q, kpos) in zip(range(4, 12), seen[2:]):
        assert q[0].tolist() == [table[t].item()] and torch.equal(kpos[0], table[: t + 1])


def test_randpe_cached_call_in_training_raises():
    m = tiny_model("randpe").train()
    x = torch.randint(0, 61, (1, 6))
    with torch.no_grad():
        out = m(x[:, :4], use_cache=True)
        with pytest.raises(ValueError, match="model.eval"):
            m(x[:, 4:5], use_cache=True, **{cache_name(): getattr(out, cache_name())})


def test_randpe_bad_base_option():
    from conftest import tiny_config

    with pytest.raises(ValueError, match="'base'"):
        tiny_config("randpe", pe_options={"base": "randpe"})


@pytest.mark.parametrize("base", ["learned", "alibi", "fire", "t5", "kerple", "pope", "tape"])
def test_randpe_other_bases_decode_equals_forward(base):
    """Every allowed base: KV-cache decoding == full forward, and the positions matter."""
    from peeval.models.encodings import get_encoding_class

    try:
        get_encoding_class(base)
    except (ImportError, AttributeError) as e:
        pytest.skip(f"{base}: {e}")
    m = tiny_model("randpe", pe_options={"base": base, "max_positions": 64, "eval_length": 20})
    randomize_(m)
    x = torch.randint(0, 61, (2, 9))
    m.model.pe.set_generation_length(9)
    with torch.no_grad():
        full = m(x).logits
    steps = decode_logits(m, x, 3)
    m.model.pe.set_generation_length(None)
    torch.testing.assert_close(steps, full, atol=1e-4, rtol=1e-4)
    ref = tiny_model(base, max_position_embeddings=64)
    ref.load_state_dict({k.replace("pe.base.", "pe."): v for k, v in m.state_dict().items()})
    with torch.no_grad():
        assert not torch.allclose(full, ref(x).logits, atol=1e-3)  # the base consumes the positions
