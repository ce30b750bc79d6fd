"""transformers' attention names select peeval's back-ends, and lm-eval's model_args set
``attn_backend`` (issue 46): from_config / from_pretrained / ``--model_args``."""

import pytest
import torch
from conftest import tiny_config
from helpers.checkpoints import save_tiny_checkpoint

import peeval.models.attention as attn

#: transformers' name -> the peeval back-end it must select (written out here, not read from the code)
NAMES = {"sdpa": "sdpa", "eager": "eager", "flash_attention_2": "flash", "flex_attention": "flex"}


@pytest.mark.parametrize("name", NAMES)
def test_attn_implementation_names_select_backends(name):
    from peeval.models import PeevalForCausalLM

    m = PeevalForCausalLM(tiny_config("t5", attn_implementation=name))
    assert m.config.attn_backend == NAMES[name]
    assert m.model.config.attn_backend == NAMES[name]  # the inner model's check kept it


def test_attn_implementation_through_from_pretrained_is_used_and_not_saved(tmp_path):
    from transformers import AutoModelForCausalLM

    from peeval.models import PeevalForCausalLM

    PeevalForCausalLM(tiny_config("fire")).save_pretrained(tmp_path / "a")
    m = AutoModelForCausalLM.from_pretrained(tmp_path / "a", attn_implementation="eager")
    assert m.config.attn_backend == "eager"
    used = []
    attend = attn.attend
    try:
        attn.attend = lambda how, call: used.append(how) or attend(how, call)
        with torch.no_grad():
            m(torch.randint(0, 61, (1, 12)), use_cache=False)
    finally:
        attn.attend = attend
    assert used and set(used) == {"eager"}
    m = AutoModelForCausalLM.from_pretrained(tmp_path / "a", attn_implementation="flex_attention")
    assert m.config.attn_backend == "flex"
    m.save_pretrained(tmp_path / "b")
    saved = (tmp_path / "b" / "config.json").read_text()
    assert '"attn_backend": "flex"' in saved and "_peeval" not in saved
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "a").config.attn_backend == "sdpa"


def test_unknown_attn_implementation_names_the_allowed_ones():
    from peeval.models import PeevalForCausalLM

    with pytest.raises(ValueError, match=r"attn_implementation='flash_attention_3'.*flash_attention_2.*flex_attention"):
        PeevalForCausalLM(tiny_config("rope", attn_implementation="flash_attention_3"))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("attn") / "t5"
    return save_tiny_checkpoint(out, ["the cat sat on the mat 0123456789"], pe="t5", vocab_size=300, max_positions=64)


@pytest.mark.parametrize(
    "args,backend",
    [
        ("attn_backend=blocked", "blocked"),
        ("attn_backend=eager", "eager"),
        ("attn_implementation=flex_attention", "flex"),
        ("attn_implementation=eager,attn_backend=eager", "eager"),
        ("", "sdpa"),
    ],
)
def test_lm_eval_model_args_set_the_backend(ckpt, args, backend):
    from peeval.harness.plugin import PeevalLM

    arg_string = ",".join(a for a in (f"pretrained={ckpt}", args) if a)
    lm = PeevalLM.create_from_arg_string(arg_string, {"batch_size": 1, "device": "cpu"})
    assert lm.model.config.attn_backend == backend
    assert lm.model.model.layers[0].self_attn.config.attn_backend == backend


@pytest.mark.parametrize(
    "args,needle",
    [
        ("attn_backend=flash_attention_2", r"attn_backend='flash_attention_2': allowed sdpa, eager, flash"),
        ("attn_implementation=paged|eager", r"attn_implementation='paged\|eager'"),
        ("attn_backend=blocked,attn_implementation=eager", "attn_backend=.blocked. and .* disagree"),
    ],
)
def test_lm_eval_bad_attention_args_fail_before_loading(ckpt, args, needle, monkeypatch):
    from peeval.harness.plugin import PeevalLM

    monkeypatch.setattr("peeval.harness.plugin.PeevalHFLMBase.__init__", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(ValueError, match=r"--model peeval: " + needle):
        PeevalLM.create_from_arg_string(f"pretrained={ckpt},{args}", {"batch_size": 1, "device": "cpu"})


def test_peeval_llama_has_no_attn_backend(ckpt):
    from peeval.harness.plugin import PeevalLlamaLM

    with pytest.raises(ValueError, match="unknown model_args attn_backend"):
        PeevalLlamaLM.create_from_arg_string(f"pretrained={ckpt},attn_backend=eager", {"batch_size": 1})
