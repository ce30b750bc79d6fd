"""Cached generation follows the installed transformers' cache protocol (issue 25).

transformers 5.24 hands the KV cache to ``forward`` as ``cache=`` (``past_key_values`` before);
a model that took only the old name started every generation step from an empty cache, and
greedy answers longer than a few tokens came out wrong. Greedy ``generate`` must equal greedy
decoding by full forwards, for every encoding and for a plain Llama checkpoint through
``peeval-llama``, under whichever transformers is installed (``make test`` runs the lock's,
``make upgrade-check`` the newest); the cache passed explicitly under either name is tested on
every release.
"""

import pytest
import torch
from conftest import cache_name, randomize_, tiny_model
from helpers.checkpoints import save_tiny_checkpoint

from peeval.models.encodings import ENCODINGS

#: the field this transformers release names the cache by (read from transformers, not from peeval)
CACHE_KWARG = cache_name()

ALL = list(ENCODINGS)
NEW = 8  # new tokens: the 5.24 break showed after 3


def greedy_by_full_forwards(model, prompt: torch.Tensor, new: int) -> torch.Tensor:
    """Greedy decoding with no cache at all: one full forward of the whole sequence per new token."""
    x = prompt
    with torch.no_grad():
        for _ in range(new):
            logits = model(x, use_cache=False).logits
            x = torch.cat([x, logits[:, -1:].argmax(-1)], dim=1)
    return x


@pytest.mark.parametrize("pe", ALL)
def test_greedy_generate_equals_greedy_full_forwards(pe):
    m = tiny_model(pe)
    randomize_(m)  # spread logits: an empty cache changes the argmax within a few steps
    x = torch.randint(1, 61, (2, 7))  # no pad token (0): generate would mask it
    m.generation_config.eos_token_id = None  # no early stop: all NEW tokens are compared
    out = m.generate(x, max_new_tokens=NEW, do_sample=False, pad_token_id=0)
    m.model.pe.set_generation_length(x.shape[1] + NEW)  # what generate tells the encoding
    try:
        ref = greedy_by_full_forwards(m, x, NEW)
    finally:
        m.model.pe.set_generation_length(None)
    assert torch.equal(out, ref), f"{pe}: cached generate {out.tolist()} != full forwards {ref.tolist()}"


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
@pytest.mark.parametrize("pe", ["rope", "tape", "cope", "alibi"])
def test_cache_passed_under_either_name(pe, name):
    """Both names reach the layers on every transformers release (5.24's Llama accepts both too)."""
    m = tiny_model(pe)
    randomize_(m)
    x = torch.randint(1, 61, (1, 10))
    m.model.pe.set_generation_length(10)
    try:
        with torch.no_grad():
            full = m(x, use_cache=False).logits
            out = m(x[:, :6], use_cache=True)
            steps = [out.logits]
            for t in range(6, 10):
                out = m(x[:, t : t + 1], use_cache=True, **{name: getattr(out, CACHE_KWARG)})
                steps.append(out.logits)
    finally:
        m.model.pe.set_generation_length(None)
    assert getattr(out, CACHE_KWARG).get_seq_length() == 10
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=1e-4)


def test_cache_under_both_names_is_an_error():
    m = tiny_model("rope")
    x = torch.randint(1, 61, (1, 4))
    with torch.no_grad():
        c = getattr(m(x, use_cache=True), CACHE_KWARG)
        with pytest.raises(ValueError, match="not both"):
            m(x[:, :1], cache=c, past_key_values=c)


def test_output_names_the_cache_as_transformers_does():
    """Outputs carry the cache under this release's field name (what generate reads back)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    m = tiny_model("rope")
    out = m(torch.randint(1, 61, (1, 4)), use_cache=True)
    assert CACHE_KWARG in CausalLMOutputWithPast.__dataclass_fields__
    assert CACHE_KWARG in out and out[CACHE_KWARG].get_seq_length() == 4


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """A tiny genuine LlamaForCausalLM (random weights) with a tokenizer trained here."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok_dir = save_tiny_checkpoint(tmp_path_factory.mktemp("tok") / "t", ["the cat sat on the mat 0123456789"],
                                   pe="rope", vocab_size=300, max_positions=64)  # fmt: skip
    tok = AutoTokenizer.from_pretrained(tok_dir)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    model = LlamaForCausalLM(cfg)
    randomize_(model)
    out = tmp_path_factory.mktemp("llama") / "llama"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.parametrize("scaling", [{}, {"rope_scaling": "yarn", "factor": 2}])
def test_peeval_llama_generation_through_lm_eval_equals_full_forwards(llama_dir, scaling):
    """lm-eval's own generation call (HFLM._model_generate, what passkey and SCROLLS use)."""
    from peeval.harness.plugin import PeevalLlamaLM

    lm = PeevalLlamaLM(pretrained=str(llama_dir), device="cpu", batch_size=1, **scaling)
    eos = lm.tokenizer.eos_token_id
    x = torch.tensor([[t for t in range(5, 14) if t != eos]])
    out = lm._model_generate(x, max_length=x.shape[1] + NEW, stop=[], do_sample=False)
    ref = greedy_by_full_forwards(lm.model, x, NEW)
    assert torch.equal(out[:, : ref.shape[1]], ref[:, : out.shape[1]]) and out.shape[1] > x.shape[1] + 3


def test_peeval_model_generation_through_lm_eval_equals_full_forwards(tmp_path):
    from peeval.harness.plugin import PeevalLM

    ckpt = save_tiny_checkpoint(tmp_path / "tape", ["the cat sat on the mat 0123456789"], pe="tape",
                                vocab_size=300, max_positions=64)  # fmt: skip
    lm = PeevalLM(pretrained=str(ckpt), device="cpu", batch_size=1)
    randomize_(lm.model)
    eos = lm.tokenizer.eos_token_id
    x = torch.tensor([[t for t in range(5, 14) if t != eos]])
    out = lm._model_generate(x, max_length=x.shape[1] + NEW, stop=[], do_sample=False)
    lm.model.model.pe.set_generation_length(x.shape[1] + NEW)
    try:
        ref = greedy_by_full_forwards(lm.model, x, NEW)
    finally:
        lm.model.model.pe.set_generation_length(None)
    assert torch.equal(out[:, : ref.shape[1]], ref[:, : out.shape[1]]) and out.shape[1] > x.shape[1] + 3
