"""Issue 30: a model is evaluated only with all of its weights. A checkpoint that lacks a tensor the
config needs (a learned table, a layer), holds one of the wrong shape, or holds one the model does
not have is one line naming the tensor and the checkpoint, exit 2, nothing written: transformers
itself only logs a report and initialises the tensor at random."""

import shutil

import pytest
import torch
from helpers.checkpoints import save_tiny_checkpoint
from safetensors.torch import load_file, save_file

CORPUS = ["the cat sat on the mat 0123456789 and the dog ran"]


def eval_argv(ckpt, out) -> list[str]:
    return ["eval", "--model", "peeval", "--model_args", f"pretrained={ckpt}", "--tasks", "peeval_diag_addition_test",
            "--limit", "2", "--device", "cpu", "--output_path", str(out)]  # fmt: skip


def _edit(src, dst, change):
    shutil.copytree(src, dst)
    sd = load_file(str(dst / "model.safetensors"))
    change(sd)
    save_file(sd, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    good = save_tiny_checkpoint(root / "learned", CORPUS, pe="learned", vocab_size=300, max_positions=64)
    out = {"good": good}
    out["missing"] = _edit(good, root / "missing", lambda sd: sd.pop("model.pe.wpe.weight"))
    out["no_layer"] = _edit(good, root / "no_layer", lambda sd: sd.pop("model.layers.1.mlp.up_proj.weight"))
    out["shape"] = _edit(good, root / "shape", lambda sd: sd.update({"model.norm.weight": torch.ones(7)}))
    out["extra"] = _edit(good, root / "extra", lambda sd: sd.update({"model.extra.weight": torch.ones(3)}))
    return out


@pytest.mark.parametrize(
    ("name", "needles"),
    [("missing", ["missing model.pe.wpe.weight"]),
     ("no_layer", ["missing model.layers.1.mlp.up_proj.weight"]),
     ("shape", ["model.norm.weight has shape (7,), the model needs (32,)"]),
     ("extra", ["unexpected model.extra.weight"])],
)  # fmt: skip
def test_peeval_eval_refuses_an_incomplete_checkpoint(ckpts, tmp_path, capsys, name, needles):
    from peeval.cli import main

    rc = main(eval_argv(ckpts[name], tmp_path / "out"))
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.startswith("peeval eval: error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert str(ckpts[name]) in lines[0] and all(n in lines[0] for n in needles), lines[0]
    assert not (tmp_path / "out").exists()  # nothing written


def test_the_complete_checkpoint_still_evaluates(ckpts, tmp_path, capsys):
    from peeval.cli import main

    assert main(eval_argv(ckpts["good"], tmp_path / "out")) == 0, capsys.readouterr().err[-2000:]
    assert len(list((tmp_path / "out").glob("*/results.json"))) == 1


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("llama")
    tok = AutoTokenizer.from_pretrained(save_tiny_checkpoint(root / "tok", CORPUS, pe="rope", vocab_size=300,
                                                             max_positions=64))  # fmt: skip
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=False)  # fmt: skip
    good = root / "good"
    LlamaForCausalLM(cfg).save_pretrained(good)
    tok.save_pretrained(good)
    return {"good": good, "missing": _edit(good, root / "missing", lambda sd: sd.pop("lm_head.weight"))}


@pytest.mark.parametrize("scaling", [{}, {"rope_scaling": "yarn", "factor": 2}])
def test_peeval_llama_refuses_a_missing_tensor(llama, scaling):
    from peeval.harness.plugin import PeevalLlamaLM
    from peeval.models.loading import IncompleteCheckpointError

    PeevalLlamaLM(pretrained=str(llama["good"]), device="cpu", **scaling)  # loads
    with pytest.raises(IncompleteCheckpointError, match=r"missing lm_head\.weight"):
        PeevalLlamaLM(pretrained=str(llama["missing"]), device="cpu", **scaling)


def test_tape_adapter_without_its_tensors_is_refused(llama, tmp_path):
    """A TAPE adapter whose weights file lacks a trained tensor would run as the plain base model."""
    from peeval.models import llama_adapters as la
    from peeval.models.loading import IncompleteCheckpointError

    base = la.load_base(str(llama["good"]))
    model = la.llama_to_tape(base)
    trained = la.tape_trainable(model)
    meta = {"method": "tape", "rope_parameters": dict(base.config.rope_parameters), "trained_tensors": trained}
    la.save_adapter(model, tmp_path / "ad", meta)
    la.load_adapted(str(llama["good"]), tmp_path / "ad")  # complete: loads
    sd = load_file(str(tmp_path / "ad" / la.TAPE_WEIGHTS))
    sd.pop(trained[0])
    save_file(sd, str(tmp_path / "ad" / la.TAPE_WEIGHTS))
    with pytest.raises(IncompleteCheckpointError, match="missing " + trained[0].replace(".", r"\.")):
        la.load_adapted(str(llama["good"]), tmp_path / "ad")


def test_max_layers_cut_is_not_an_unexpected_tensor(llama):
    from peeval.models import llama_adapters as la

    m = la.load_base(str(llama["good"]), max_layers=1)
    assert m.config.num_hidden_layers == 1


def test_shift_stability_refuses_an_incomplete_checkpoint(ckpts, tmp_path, capsys):
    from peeval.evaluation.shift_stability import main

    assert main(["--checkpoint", str(ckpts["missing"]), "--out", str(tmp_path / "o")]) == 2
    err = [li for li in capsys.readouterr().err.splitlines() if li.strip() and "Loading weights" not in li]
    assert len(err) == 1 and err[0].startswith("shift stability: error: "), err  # transformers' report is not shown
    assert "model.pe.wpe.weight" in err[0] and not (tmp_path / "o").exists()


def test_checkpoint_without_tokenizer_files_is_one_line(ckpts, tmp_path, capsys):
    """transformers answered "install sentencepiece or tiktoken" with a traceback."""
    from peeval.cli import main

    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("config.json", "model.safetensors", "generation_config.json"):
        if (ckpts["good"] / f).exists():
            shutil.copy(ckpts["good"] / f, bare / f)
    rc = main(eval_argv(bare, tmp_path / "out"))
    err = capsys.readouterr().err
    lines = [li for li in err.splitlines() if li.startswith("peeval eval: error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert str(bare) in lines[0] and "holds no tokenizer" in lines[0] and "tokenizer=" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()
