"""Properties every encoding must have (SPEC 2.1): train step, save/load, KV-cache decoding,
option validation (cached generate: test_generation_cache.py). Formula checks live in one test
file per encoding family."""

import pytest
import torch
from conftest import decode_logits, randomize_, tiny_config, tiny_model

from peeval.models.encodings import ENCODINGS

ALL = list(ENCODINGS)


@pytest.mark.parametrize("pe", ALL)
def test_forward_backward(pe):
    m = tiny_model(pe).train()
    x = torch.randint(0, 61, (2, 12))
    out = m(x, labels=x)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    grads = [p.grad for p in m.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads if g is not None)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("pe", ALL)
def test_save_load_roundtrip(pe, tmp_ckpt):
    from transformers import AutoModelForCausalLM

    m = tiny_model(pe)
    randomize_(m)
    m.save_pretrained(tmp_ckpt)
    assert (tmp_ckpt / "model.safetensors").exists()
    m2 = AutoModelForCausalLM.from_pretrained(tmp_ckpt).eval()
    assert type(m2) is type(m) and m2.config.pe == pe
    x = torch.randint(0, 61, (2, 10))
    with torch.no_grad():
        assert torch.equal(m(x).logits, m2(x).logits)


@pytest.mark.parametrize("pe", ALL)
def test_kv_cache_decoding_equals_full_forward(pe):
    m = tiny_model(pe)
    randomize_(m)
    n = 14
    x = torch.randint(0, 61, (2, n))
    m.model.pe.set_generation_length(n)
    try:
        with torch.no_grad():
            full = m(x).logits
            steps = decode_logits(m, x, 5)
    finally:
        m.model.pe.set_generation_length(None)
    torch.testing.assert_close(steps, full, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("pe", ALL)
def test_eager_matches_sdpa(pe):
    m = tiny_model(pe)
    randomize_(m)
    x = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        a = m(x).logits
        m.config.attn_backend = "eager"
        b = m(x).logits
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("pe", ALL)
def test_bfloat16_train_step(pe):
    """Half precision end to end (what GPU training and evaluation use)."""
    m = tiny_model(pe).to(torch.bfloat16).train()
    x = torch.randint(0, 61, (2, 12))
    out = m(x, labels=x)
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.loss)
    out.loss.backward()


@pytest.mark.parametrize("pe", ALL)
def test_unknown_option_fails_naming_it(pe):
    with pytest.raises(ValueError, match="no_such_option"):
        tiny_config(pe, pe_options={"no_such_option": 1})


def test_unknown_pe_and_backend_fail():
    with pytest.raises(ValueError, match="unknown pe 'bogus'"):
        tiny_config("bogus")
    with pytest.raises(ValueError, match="attn_backend"):
        tiny_config("rope", attn_backend="magic")


def test_unknown_option_fails_at_load(tmp_ckpt):
    import json

    from transformers import AutoConfig

    tiny_config("rope").save_pretrained(tmp_ckpt)
    cfg = json.loads((tmp_ckpt / "config.json").read_text())
    cfg["pe_options"] = {"warp_factor": 9}
    (tmp_ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="warp_factor"):
        AutoConfig.from_pretrained(tmp_ckpt)


@pytest.mark.parametrize("pe, opts", [("rope", {}), ("cope", {"npos_max": 4})], ids=["rope", "cope"])
def test_left_padded_batch_matches_unpadded(pe, opts):
    """A left-padded row with its mask and positions gives the sequence's own logits (float32 round-off)."""
    m = tiny_model(pe, pe_options=opts)
    randomize_(m)
    a = torch.randint(1, 61, (1, 7))
    b = torch.randint(1, 61, (1, 4))
    batch = torch.cat([a, torch.cat([torch.zeros(1, 3, dtype=torch.long), b], 1)])
    mask = torch.tensor([[1] * 7, [0, 0, 0, 1, 1, 1, 1]])
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = m(batch, attention_mask=mask, position_ids=pos).logits
        torch.testing.assert_close(out[1, 3:], m(b).logits[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out[0], m(a).logits[0], atol=1e-5, rtol=1e-5)
