"""rope: same logits as transformers' LlamaForCausalLM with the same weights; scalings match
transformers' own rope-init functions."""

import pytest
import torch
from conftest import randomize_, tiny_model
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS


def _llama_twin(m):
    fields = {k: v for k, v in m.config.to_dict().items() if k in LlamaConfig.__dataclass_fields__}
    fields.pop("model_type", None)
    llama = LlamaForCausalLM(LlamaConfig(**fields)).eval()
    missing, unexpected = llama.load_state_dict(m.state_dict(), strict=False)
    assert not missing and not unexpected
    return llama


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        {"rope_type": "linear", "factor": 2.0},
        {"rope_type": "dynamic", "factor": 2.0},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
    ],
)
def test_rope_equals_llama(scaling):
    kw = {"rope_scaling": scaling} if scaling else {}
    m = tiny_model("rope", **kw)
    randomize_(m)
    llama = _llama_twin(m)
    x = torch.randint(0, 61, (2, 48))  # beyond max_position_embeddings=32: dynamic rescales
    with torch.no_grad():
        torch.testing.assert_close(m(x).logits, llama(x).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rope_type,extra", [("linear", {}), ("yarn", {"original_max_position_embeddings": 32})])
def test_scaling_inv_freq_and_attention_factor(rope_type, extra):
    m = tiny_model("rope", rope_scaling={"rope_type": rope_type, "factor": 4.0, **extra})
    rot = m.model.pe.rotary
    inv, factor = ROPE_INIT_FUNCTIONS[rope_type](m.config)
    torch.testing.assert_close(rot.inv_freq, inv)
    assert rot.attention_scaling == pytest.approx(factor)
    d = m.config.head_dim
    plain = 1.0 / (100.0 ** (torch.arange(0, d, 2).float() / d))
    if rope_type == "linear":  # position interpolation: every frequency divided by the factor
        torch.testing.assert_close(rot.inv_freq, plain / 4.0)
    else:  # yarn: factor 0.1*ln(s)+1 on cos/sin; highest frequency kept, lowest interpolated
        assert factor == pytest.approx(0.1 * torch.log(torch.tensor(4.0)).item() + 1.0)
        assert rot.inv_freq[0] == pytest.approx(plain[0].item())
        assert rot.inv_freq[-1] == pytest.approx(plain[-1].item() / 4.0)


def test_rope_rotation_by_hand():
    """Position p rotates pair (x_m, x_{m+d/2}) by angle p*theta_m, theta_m = base^(-2m/d)."""
    from peeval.models.encodings.base import PEContext

    m = tiny_model("rope")
    pe = m.model.pe
    d = m.config.head_dim
    q = torch.randn(1, 1, 1, d)
    p = 5
    pos = torch.tensor([[p]])
    ctx = PEContext(position_ids=pos, key_position_ids=pos, past_length=0)
    qr, _ = pe.transform_qk(0, q, q, ctx)
    for j in range(d // 2):
        ang = p * 100.0 ** (-2 * j / d)
        x1, x2 = q[0, 0, 0, j], q[0, 0, 0, j + d // 2]
        c, s = torch.cos(torch.tensor(ang)), torch.sin(torch.tensor(ang))
        assert qr[0, 0, 0, j].item() == pytest.approx((x1 * c - x2 * s).item(), abs=1e-5)
        assert qr[0, 0, 0, j + d // 2].item() == pytest.approx((x2 * c + x1 * s).item(), abs=1e-5)
