"""TAPE (SPEC 2.3): RoPE at initialisation, shift invariance (Prop. 4.2), parameter count,
ablations, gradients at init. Generic properties are in test_model_common.py."""

import pytest
import torch
from conftest import cache_name, decode_logits, randomize_, tiny_config, tiny_model

X = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(0))
ABLATIONS = [
    {"attn_update": False},
    {"mlp_update": False},
    {"L": 1, "R": 4},
    {"L": 4, "R": 1},
    {"attn_mix": "heads"},
    {"equivariant": False},
    {"position_size": 5},
]


def _rope_and_tape(kv_heads: int, **opts):
    rope = tiny_model("rope", num_key_value_heads=kv_heads)
    randomize_(rope)
    tape = tiny_model("tape", num_key_value_heads=kv_heads, pe_options=opts)
    res = tape.load_state_dict(rope.state_dict(), strict=False)
    assert not res.unexpected_keys and all(k.startswith("model.pe.") for k in res.missing_keys)
    return rope, tape


@pytest.mark.parametrize("kv_heads", [2, 4])  # GQA (4 query heads share 2 KV heads) and MHA
@pytest.mark.parametrize("backend", ["sdpa", "eager"])
def test_init_equals_rope(kv_heads, backend):
    rope, tape = _rope_and_tape(kv_heads)
    # w_a = W1 = 0 at init; every other TAPE weight may be anything
    with torch.no_grad():
        for name, p in tape.model.pe.named_parameters():
            if not name.endswith(("w_a", "w1")):
                p.normal_(0, 0.5)
    rope.config.attn_backend = tape.config.attn_backend = backend
    with torch.no_grad():
        a, b = rope(X).logits, tape(X).logits
    # the same numbers up to the rounding of softmax·[V | E] vs softmax·V
    torch.testing.assert_close(b, a, atol=2e-5, rtol=0)


def test_init_equals_rope_bitwise_without_streams():
    """q/k transform of the RoPE state is HF rotate_half RoPE bit for bit (GQA too)."""
    rope, tape = _rope_and_tape(2, attn_update=False, mlp_update=False)
    with torch.no_grad():
        assert torch.equal(rope(X).logits, tape(X).logits)


def test_init_differs_from_rope_once_trained():
    """Guard for the two tests above: a non-zero w_a does change the logits."""
    rope, tape = _rope_and_tape(2)
    with torch.no_grad():
        tape.model.pe.w_a[0].fill_(0.5)
        assert (rope(X).logits - tape(X).logits).abs().max() > 1e-3


def _shift_gap(opts, shift: int) -> float:
    m = tiny_model("tape", pe_options=opts)
    randomize_(m)
    pos = torch.arange(X.shape[1])[None].expand(X.shape[0], -1)
    with torch.no_grad():
        return (m(X, position_ids=pos).logits - m(X, position_ids=pos + shift).logits).abs().max().item()


@pytest.mark.parametrize("opts", [{}, {"attn_mix": "heads"}, {"L": 1, "R": 4}])
@pytest.mark.parametrize("shift", [1, 7, 100])
def test_shift_invariance(opts, shift):
    """Prop. 4.2: RoPE-initialised, O(R)-equivariant TAPE is invariant to shifting positions."""
    assert _shift_gap(opts, shift) < 1e-4


@pytest.mark.parametrize("opts", [{"equivariant": False}, {"L": 4, "R": 1}])
def test_shift_invariance_broken_by_ablations(opts):
    """W1, W2 mixing (H·R) jointly breaks O(R)-equivariance, and R=1 cannot be relative."""
    assert _shift_gap(opts, 7) > 1e-2


def test_non_equivariant_is_invariant_while_w1_is_zero():
    """The break comes from the MLP update alone: at W1 = 0 the ablation is still RoPE."""
    m = tiny_model("tape", pe_options={"equivariant": False})
    randomize_(m)
    pos = torch.arange(X.shape[1])[None].expand(X.shape[0], -1)
    with torch.no_grad():
        m.model.pe.w1.zero_()
        gap = (m(X, position_ids=pos).logits - m(X, position_ids=pos + 7).logits).abs().max()
    assert gap < 1e-4


@pytest.mark.parametrize(
    "opts,per_layer",
    [
        ({}, lambda c, h, i, r: c * i + 2 * h * i + h),
        ({"position_size": None}, lambda c, h, i, r: c * i + 2 * h * i + h),
        ({"position_size": 6}, lambda c, h, i, r: c * i + 2 * h * i + h),
        ({"attn_mix": "heads"}, lambda c, h, i, r: c * i + 2 * h * i + h * h),
        ({"equivariant": False}, lambda c, h, i, r: c * i + 2 * h * r * i + h),
        ({"attn_update": False}, lambda c, h, i, r: c * i + 2 * h * i),
        ({"mlp_update": False}, lambda c, h, i, r: h),
    ],
)
def test_parameter_count(opts, per_layer):
    cfg = tiny_config("tape", pe_options=opts)
    m = tiny_model("tape", pe_options=opts)
    c, h, n_layers = cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers
    i = opts.get("position_size") or 4 * h
    added = sum(p.numel() for p in m.model.pe.parameters())
    assert added == n_layers * per_layer(c, h, i, 2)
    rope = tiny_model("rope")
    assert sum(p.numel() for p in m.parameters()) - sum(p.numel() for p in rope.parameters()) == added


def test_paper_parameter_count():
    """Table 7: C=768, H=12, I=48 → ψ alone 12·C·I ≈ 0.44M, with W1, W2, w_a ≈ 0.46M."""
    c, h, i = 768, 12, 48
    assert 12 * c * i == 442368
    assert 12 * (c * i + 2 * h * i + h) == 456336


@pytest.mark.parametrize("opts", ABLATIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_ablation_trains_and_decodes(opts):
    m = tiny_model("tape", pe_options=opts).train()
    out = m(X, labels=X)
    out.loss.backward()
    grads = [p.grad for p in m.model.pe.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    torch.optim.SGD(m.parameters(), lr=0.1).step()

    m.eval()
    randomize_(m)
    with torch.no_grad():
        full = m(X).logits
        torch.testing.assert_close(decode_logits(m, X, 5), full, atol=1e-4, rtol=1e-4)
        m.config.attn_backend = "eager"
        torch.testing.assert_close(m(X).logits, full, atol=1e-4, rtol=1e-4)


def test_gradient_reaches_w1_at_init():
    m = tiny_model("tape").train()
    pe = m.model.pe
    assert torch.count_nonzero(pe.w1) == 0 and torch.count_nonzero(pe.w_a) == 0
    m(X, labels=X).loss.backward()
    # every layer but the last, whose position updates cannot reach the output
    for layer in range(m.config.num_hidden_layers - 1):
        assert pe.w1.grad[layer].abs().min() > 0
        assert pe.w_a.grad[layer].abs().min() > 0
    assert torch.count_nonzero(pe.w1.grad[-1]) == 0


@pytest.mark.parametrize("zero_init", ["w1", "w2"])
def test_zero_init_chooses_the_zero_matrix_and_stays_rope(zero_init):
    """``zero_init``: w1 (the reference) or w2 (§3.3's PEFT, as LoRA's B); the other and ψ ~ N(0, 0.02);
    either way TAPE at init is RoPE, and the zero one is the only W with a gradient at step 0."""
    rope, tape = _rope_and_tape(2, zero_init=zero_init)
    pe = tape.model.pe
    zero, rand = (pe.w1, pe.w2) if zero_init == "w1" else (pe.w2, pe.w1)
    assert torch.count_nonzero(zero) == 0 and torch.count_nonzero(rand) == rand.numel()
    assert float(rand.detach().double().pow(2).mean().sqrt()) == pytest.approx(0.02, rel=0.3)  # 2 x 4 x 16 draws
    with torch.no_grad():
        torch.testing.assert_close(tape(X).logits, rope(X).logits, atol=2e-5, rtol=0)
    tape.train()
    tape(X, labels=X).loss.backward()
    assert zero.grad[0].abs().min() > 0 and torch.count_nonzero(rand.grad) == 0
    with pytest.raises(ValueError, match=r"pe_options\['zero_init'\]='psi'.*allowed one of 'w1', 'w2'"):
        tiny_model("tape", pe_options={"zero_init": "psi"})


def test_position_updates_change_later_layers():
    """With non-zero weights the state does move: TAPE differs from RoPE and every update matters."""
    m = tiny_model("tape")
    randomize_(m)
    with torch.no_grad():
        base = m(X).logits
        for name in ("w_a", "w1"):
            p = getattr(m.model.pe, name)
            saved = p.clone()
            p.zero_()
            assert (m(X).logits - base).abs().max() > 1e-3
            p.copy_(saved)


@pytest.mark.parametrize("bad", [{"L": 2, "R": 4}, {"L": 3}, {"position_size": 0}, {"attn_mix": "mlp"}])
def test_bad_options_fail(bad):
    with pytest.raises(ValueError, match="L|R|position_size|attn_mix"):
        tiny_model("tape", pe_options=bad)


def test_psi_attn_out_reads_the_attention_output():
    """psi_input='attn_out' (Eq. 8's x̃): ψ reads the attention output the decoder layer passes."""
    m = tiny_model("tape", pe_options={"psi_input": "attn_out"})
    ref = tiny_model("tape")
    ref.load_state_dict(m.state_dict())
    randomize_(m)
    ref.load_state_dict(m.state_dict())
    with torch.no_grad():
        full = m(X).logits
        assert (full - ref(X).logits).abs().max() > 1e-3  # ψ reads a different input
        out = m(X[:, :6], use_cache=True)
        step = m(X[:, 6:7], use_cache=True, **{cache_name(): getattr(out, cache_name())}).logits
    torch.testing.assert_close(step[:, 0], full[:, 6], atol=1e-4, rtol=1e-4)
