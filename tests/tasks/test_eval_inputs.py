"""Issue 16 (3, 4, 5, eval half of 8): ``peeval eval`` inputs. A reused output folder never mixes
two runs, default run names do not collide, task metadata / ``--limit`` / ``--metadata`` /
peeval-llama's ``factor`` / unknown model_args / a truncated ``model.safetensors`` each end in
one line naming the input (exit 2, nothing written), and no perplexity row is NaN."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.data_mirror import needs_mirror

import peeval

PEEVAL_ROOT = Path(peeval.__file__).parent.parent  # the tree under test (PYTHONPATH), not necessarily this checkout
PEEVAL_TASKS = PEEVAL_ROOT / "peeval" / "tasks"


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """Tiny checkpoints sharing one byte-level BPE trained here: a peeval rope model in
    ``a/tape`` and ``b/tape`` (same last folder name), a HF Llama, and a copy of ``a/tape``
    whose ``model.safetensors`` is cut in half."""
    import shutil

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from peeval.models import PeevalConfig, PeevalForCausalLM
    from peeval.tasks.passkey.passkey import FILLER, INTRO, NEEDLE, QUESTION

    root = tmp_path_factory.mktemp("ckpts")
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [INTRO, FILLER, NEEDLE.format(key=12345), QUESTION, "0123456789 the of and a to in is"]
    tok.train_from_iterator(corpus * 20, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")
    small = dict(vocab_size=len(hf_tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=2, max_position_embeddings=64, bos_token_id=hf_tok.bos_token_id,
                 eos_token_id=hf_tok.eos_token_id)  # fmt: skip
    out = {}
    for name in ("a", "b"):
        torch.manual_seed(0)
        out[name] = root / name / "tape"
        PeevalForCausalLM(PeevalConfig(**small, pe="rope")).save_pretrained(out[name])
        hf_tok.save_pretrained(out[name])
    torch.manual_seed(0)
    out["llama"] = root / "llama"
    LlamaForCausalLM(LlamaConfig(**small, num_key_value_heads=2)).save_pretrained(out["llama"])
    hf_tok.save_pretrained(out["llama"])
    out["trunc"] = root / "trunc"
    shutil.copytree(out["a"], out["trunc"])
    f = out["trunc"] / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return out


def run_eval(capsys, *argv) -> tuple[int, str]:
    from peeval.cli import main

    rc = main(["eval", *map(str, argv)])
    return rc, capsys.readouterr().err


def one_line_error(rc: int, err: str, *needles: str) -> None:
    """exit 2, the last stderr line is peeval's one-line error, it names what it is about."""
    lines = [li for li in err.splitlines() if li.strip()]
    assert rc == 2, err[-2000:]
    assert "Traceback" not in err and lines[-1].startswith("peeval eval: error: "), err[-2000:]
    for n in needles:
        assert n in lines[-1], lines[-1]


def task(name: str, metadata: dict):
    """The task as plain lm_eval builds it (TaskManager metadata -> the task's own handling)."""
    from lm_eval.tasks import TaskManager, get_task_dict

    tm = TaskManager(include_path=[str(PEEVAL_TASKS)], include_defaults=False, metadata=metadata)
    return get_task_dict([name], tm)[name]


# -- item 3: output folders ----------------------------------------------------------------
def test_default_run_names_differ_for_same_folder_name(ckpts):
    from peeval.cli import build_parser
    from peeval.evaluation.runner import parse_model_args, run_name

    def name(ckpt, extra=""):
        args = build_parser().parse_args(["eval", "--model", "peeval", "--tasks", "peeval_passkey"])
        return run_name(args, parse_model_args(f"pretrained={ckpt}{extra}"))

    a, b = name(ckpts["a"]), name(ckpts["b"])
    assert a != b and a.startswith("peeval__tape__peeval_passkey__") and b.startswith("peeval__tape__")
    assert name(ckpts["a"]) == a  # stable
    assert name(os.path.relpath(ckpts["a"])) == a  # the same checkpoint by another path: the same run
    assert name(ckpts["a"], ",max_length=128") != a  # other model_args: another run


@needs_mirror("local", "gutenberg-eval")
def test_reused_output_folder_is_refused_then_overwritten_without_stale_samples(ckpts, tmp_path, capsys):
    md = json.dumps({"lengths": [64], "depths": [0.5], "per_cell": 1})
    argv = ["--model", "peeval", "--model_args", f"pretrained={ckpts['a']}", "--tasks", "peeval_passkey", "--limit",
            "1", "--device", "cpu", "--metadata", md, "--output_path", tmp_path, "--run_name", "r"]  # fmt: skip
    run = tmp_path / "r"
    run.mkdir()
    (run / "samples_peeval_ppl_pg19.jsonl").write_text('{"stale": 1}\n')  # an interrupted earlier run
    rc, err = run_eval(capsys, *argv)
    assert rc == 0, err[-3000:]
    assert sorted(p.name for p in run.iterdir()) == ["results.json", "samples_peeval_passkey.jsonl"]
    first = json.loads((run / "results.json").read_text())
    first["marker"] = "earlier run"
    (run / "results.json").write_text(json.dumps(first))
    first = (run / "results.json").read_text()
    (run / "samples_peeval_ppl_pg19.jsonl").write_text('{"stale": 1}\n')
    one_line_error(*run_eval(capsys, *argv), str(run), "--overwrite")
    assert (run / "results.json").read_text() == first and (run / "samples_peeval_ppl_pg19.jsonl").exists()
    rc, err = run_eval(capsys, *argv, "--overwrite")
    assert rc == 0, err[-3000:]
    assert sorted(p.name for p in run.iterdir()) == ["results.json", "samples_peeval_passkey.jsonl"]
    assert "marker" not in json.loads((run / "results.json").read_text())  # written anew


@needs_mirror("local", "gutenberg-eval")
def test_failed_overwrite_keeps_the_old_run(ckpts, tmp_path, capsys, monkeypatch):
    """Issue 30: ``--overwrite`` over a finished run whose new results cannot be written (a full disk):
    the old results and samples stay as they were, the error names the file, no temporary is left."""
    import errno

    md = json.dumps({"lengths": [64], "depths": [0.5], "per_cell": 1})
    argv = ["--model", "peeval", "--model_args", f"pretrained={ckpts['a']}", "--tasks", "peeval_passkey", "--limit",
            "1", "--device", "cpu", "--metadata", md, "--output_path", tmp_path, "--run_name", "r"]  # fmt: skip
    rc, err = run_eval(capsys, *argv)
    assert rc == 0, err[-3000:]
    run = tmp_path / "r"
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    real = Path.write_text

    def full_disk(self, *a, **k):
        if "results.json" in self.name:  # the results file, however it is staged
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_disk)
    rc, err = run_eval(capsys, *argv, "--overwrite")
    monkeypatch.undo()
    one_line_error(rc, err, "No space left", "results.json")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no temporary folder or file left


# -- item 4: task metadata, --limit, --metadata ----------------------------------------------
@pytest.mark.parametrize(
    ("metadata", "needle"),
    [
        ({"lengths": [1]}, "lengths=1"),
        ({"lengths": [0, 64]}, "lengths=0"),
        ({"lengths": [32.5]}, "lengths=32.5"),
        ({"lengths": []}, "lengths=[]"),
        ({"lengths": [32], "protocol": "windows", "max_windows": 0}, "max_windows=0"),
        ({"lengths": [32], "protocol": "windows", "max_windows": -1}, "max_windows=-1"),
        ({"lengths": [32], "protocol": "windows", "stride": 0}, "stride=0"),
        ({"lengths": [32, 64], "protocol": "windows", "stride": 48}, "stride=48 is larger than length 32"),
        ({"lengths": [32], "stride": 16}, "stride=16: only the windows protocol reads it"),
        ({"lengths": [32], "protocol": "windows", "skip": 16}, "skip=16: only the targets protocol reads it"),
        ({"lengths": [32], "protocol": "sliding"}, "protocol='sliding'"),
        ({"lengths": [32], "targets": 0}, "targets=0"),
        ({"lengths": [32], "skip": -1}, "skip=-1"),
        ({"lengths": [32], "position_buckets": -1}, "position_buckets=-1"),
        ({"lengths": [32], "max_docs": 0}, "max_docs=0"),
    ],
)
def test_ppl_metadata_is_validated_where_the_task_reads_it(metadata, needle):
    with pytest.raises(ValueError, match="peeval_ppl metadata") as e:
        task("peeval_ppl_pg19", metadata)
    assert needle in str(e.value)


@needs_mirror("local", "gutenberg-eval")
def test_ppl_length_beyond_the_data_names_the_document(hub_offline):
    from peeval.tasks.ppl.ppl import build_dataset

    with pytest.raises(ValueError, match=r"length 10000000 is more than document 0 can give \(\d+ bytes"):
        build_dataset("deepmind/pg19", lengths=[512, 10_000_000], max_docs=1, protocol="windows")
    windows = {"protocol": "windows", "max_windows": 3, "stride": 64}
    rows = build_dataset("deepmind/pg19", lengths=[64], max_docs=1, **windows)["test"]
    assert rows["peeval_window"] == [64] and rows["peeval_max_windows"] == [3] and rows["peeval_stride"] == [64]


def test_no_nan_perplexity_when_no_window_was_scored():
    from peeval.tasks.ppl.ppl import _bpb, _ppl

    for fn in (_ppl, _bpb):
        with pytest.raises(ValueError, match="no token was scored"):
            fn([(0.0, 0), (0.0, 0)])
    assert _ppl([(-2.0, 2)]) == pytest.approx(math.e)  # exp(2/2), by hand


def test_window_guard_rejects_a_negative_window_count(ckpts):
    """max_windows=-1 used to drop the last window (``starts[:-1]``)."""
    from lm_eval.api.registry import get_model

    lm = get_model("peeval")(pretrained=str(ckpts["a"]), device="cpu", max_length=16)
    text = "The grass is green. The sky is blue. " * 4
    with pytest.raises(ValueError, match="max_windows"):
        lm.score_rows([(text, {"peeval_window": 8, "peeval_max_windows": -1})])
    with pytest.raises(ValueError, match="stride"):
        lm.score_rows([(text, {"peeval_window": 8, "peeval_stride": 9})])


@pytest.mark.parametrize(
    ("metadata", "needle"),
    [
        ({"lengths": [64], "depths": [1.8]}, "depths: 1.8"),
        ({"lengths": [64], "depths": [-0.5]}, "depths: -0.5"),
        ({"lengths": [0], "depths": [0.5]}, "lengths: 0"),
        ({"lengths": [64.5], "depths": [0.5]}, "lengths: 64.5"),
        ({"lengths": [64], "per_cell": 0}, "per_cell=0"),
    ],
)
def test_passkey_metadata_is_validated_where_the_task_reads_it(metadata, needle):
    with pytest.raises(ValueError, match="peeval_passkey metadata") as e:
        task("peeval_passkey", metadata)
    assert needle in str(e.value)


DIAG = ["--tasks", "peeval_diag_flip_flop_test", "--metadata", '{"n": 2}']


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--limit", "0"], "--limit 0"),
        (["--limit", "-1"], "--limit -1"),
        (["--limit", "2.5"], "--limit 2.5"),
        (["--metadata", "{lengths: [32]"], "--metadata is not valid JSON"),
        (["--metadata", "[32]"], "--metadata must be a JSON object"),
        pytest.param(["--tasks", "peeval_nonesuch"], "peeval_nonesuch", marks=pytest.mark.slow),  # indexes all lm-eval
        # a generated task: the model's error, whether or not a data mirror is there (tasks are built first)
        (["--model_args", "pretrained=/nonexistent/ckpt", *DIAG], "/nonexistent/ckpt"),
        (["--model", "no-such-model", *DIAG], "no-such-model"),
        (["--metadata", '{"lengths": [32], "protocol": "windows", "max_windows": 0}'], "max_windows=0"),
        (["--metadata", '{"lengths": [32], "max_windows": 1}'], "only the windows protocol reads it"),
        (["--metadata", '{"lengths": [64], "depths": [1.8]}', "--tasks", "peeval_passkey"], "depths: 1.8"),
    ],
)
def test_bad_eval_inputs_are_one_line_and_write_nothing(ckpts, tmp_path, capsys, flags, needle):
    base = {"--model": "peeval", "--model_args": f"pretrained={ckpts['a']}", "--tasks": "peeval_ppl_pg19",
            "--limit": "1", "--device": "cpu", "--output_path": str(tmp_path / "out"),
            "--metadata": '{"lengths": [32], "protocol": "windows", "max_windows": 1}'}  # fmt: skip
    for k, v in zip(flags[::2], flags[1::2]):
        base[k] = v
    one_line_error(*run_eval(capsys, *[x for kv in base.items() for x in kv]), needle)
    assert not (tmp_path / "out").exists()


def test_a_fraction_or_a_count_is_a_valid_limit():
    from peeval.evaluation.runner import parse_limit

    assert parse_limit(0.25) == 0.25 and parse_limit(2.0) == 2 and isinstance(parse_limit(2.0), int)
    assert parse_limit(1.0) == 1 and parse_limit(None) is None


# -- item 5: peeval-llama factor, unknown model_args -----------------------------------------
@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"rope_scaling": "linear", "factor": 0}, "factor=0 must be a number > 1"),
        ({"rope_scaling": "yarn", "factor": -2}, "factor=-2 must be a number > 1"),
        ({"rope_scaling": "yarn", "factor": 1}, "factor=1 must be a number > 1"),
        ({"rope_scaling": "ntk", "factor": 1.0}, "factor=1.0 must be a number > 1"),
        ({"rope_scaling": "dynamic", "factor": 0.5}, "factor=0.5 must be a number >= 1"),
        ({"rope_scaling": "ntk", "factor": "abc"}, "factor='abc'"),
        ({"rope_scaling": "linear", "factor": float("nan")}, "factor=nan"),
        ({"factor": 4}, "factor=4 has no effect without rope_scaling="),
        ({"fator": 4}, "unknown model_args fator"),
    ],
)
def test_peeval_llama_model_args_are_checked(ckpts, kw, needle):
    from lm_eval.api.registry import get_model

    with pytest.raises(ValueError) as e:
        get_model("peeval-llama")(pretrained=str(ckpts["llama"]), device="cpu", **kw)
    assert needle in str(e.value)


def test_peeval_llama_factor_reaches_the_rope_parameters(ckpts):
    from lm_eval.api.registry import get_model

    lm = get_model("peeval-llama")(pretrained=str(ckpts["llama"]), device="cpu", rope_scaling="linear", factor=4)
    assert lm.model.config.rope_parameters["rope_type"] == "linear"
    assert lm.model.config.rope_parameters["factor"] == 4.0
    lm = get_model("peeval-llama")(pretrained=str(ckpts["llama"]), device="cpu", rope_scaling="yarn")
    assert lm.model.config.rope_parameters["factor"] == 2.0  # the documented default
    lm = get_model("peeval-llama")(pretrained=str(ckpts["llama"]), device="cpu", rope_scaling="dynamic", factor=1)
    assert lm.model.config.rope_parameters == {**lm.model.config.rope_parameters, "rope_type": "dynamic", "factor": 1}


def test_factor_one_is_the_identity_except_for_dynamic_ntk(ckpts):
    """Why factor 1 is refused for linear / ntk / yarn but allowed for dynamic: at 2x the
    training length, cos/sin of each method at factor 1 vs the unscaled rope, in float64."""
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from peeval.harness.plugin import ROPE_SCALINGS
    from peeval.models.llama_adapters import rope_params_for

    def cos_sin(params):
        cfg = AutoConfig.from_pretrained(ckpts["llama"])
        cfg.rope_parameters = params
        x, pos = torch.zeros(1, 128, 16, dtype=torch.float64), torch.arange(128)[None]  # 2 x 64 tokens
        return torch.cat(LlamaRotaryEmbedding(cfg)(x, pos), -1)

    cfg = AutoConfig.from_pretrained(ckpts["llama"])
    base = cos_sin(dict(cfg.rope_parameters))
    for scaling, method in ROPE_SCALINGS.items():
        diff = (cos_sin(rope_params_for(cfg, method, 1.0)) - base).abs().max().item()
        assert (diff > 0.1) if scaling == "dynamic" else (diff == 0.0), (scaling, diff)


@pytest.mark.parametrize("model", ["peeval", "peeval-rope", "peeval-llama"])
def test_unknown_model_args_name_the_arg_and_the_allowed_ones(ckpts, model):
    from lm_eval.api.registry import get_model

    path = ckpts["llama" if model == "peeval-llama" else "a"]
    with pytest.raises(ValueError, match=rf"--model {model}: unknown model_args max_lenght \(allowed: .*max_length"):
        get_model(model)(pretrained=str(path), device="cpu", max_lenght=128)


# -- item 8 (eval): a truncated model.safetensors --------------------------------------------
def test_truncated_safetensors_names_the_file(ckpts, tmp_path, capsys):
    from lm_eval.api.registry import get_model

    f = str(ckpts["trunc"] / "model.safetensors")
    with pytest.raises(ValueError, match="truncated or corrupt") as e:
        get_model("peeval")(pretrained=str(ckpts["trunc"]), device="cpu")
    assert f in str(e.value)
    argv = ["--model", "peeval", "--model_args", f"pretrained={ckpts['trunc']}", "--tasks", "peeval_passkey",
            "--limit", "1", "--output_path", tmp_path / "out"]  # fmt: skip
    one_line_error(*run_eval(capsys, *argv), f)
    assert not (tmp_path / "out").exists()


def test_bad_metadata_from_the_command_line_is_exactly_one_line(tmp_path):
    """The real entry point, in a fresh process: stderr is one line, exit 2."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(PEEVAL_ROOT)}
    argv = [sys.executable, "-m", "peeval.cli", "eval", "--model", "peeval", "--tasks", "peeval_passkey",
            "--metadata", "{oops", "--output_path", str(tmp_path / "out")]  # fmt: skip
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("peeval eval: error: --metadata is not valid JSON")
    assert not (tmp_path / "out").exists()


@needs_mirror("local", "gutenberg-eval")
def test_seed_reaches_every_lm_eval_generator(ckpts, tmp_path, capsys, monkeypatch):
    """``--seed`` is handed to all four of lm-eval's seeds (python, numpy, torch, few-shot)."""
    from lm_eval import evaluator

    seen = {}
    monkeypatch.setattr(evaluator, "simple_evaluate", lambda **kw: seen.update(kw))  # None: "not rank 0"
    md = json.dumps({"lengths": [64], "depths": [0.5], "per_cell": 1})
    rc, err = run_eval(capsys, "--model", "peeval", "--model_args", f"pretrained={ckpts['a']}", "--tasks",
                       "peeval_passkey", "--limit", "1", "--device", "cpu", "--metadata", md, "--seed", "7",
                       "--output_path", tmp_path)  # fmt: skip
    assert rc == 0, err[-2000:]
    seeds = {k: v for k, v in seen.items() if k.endswith("seed")}
    assert seeds == {"random_seed": 7, "numpy_random_seed": 7, "torch_random_seed": 7, "fewshot_random_seed": 7}
    assert seen["log_samples"] is True and seen["limit"] == 1
