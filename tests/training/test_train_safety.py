"""Issue 16 (training half): no lost checkpoint, no mixed resume, validated settings, damaged files
named. Every bad input: exit code 2, one line on stderr naming the option / file, nothing written."""

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from helpers.training import TEXT, save_tiny_llama
from helpers.training import TINY as _TINY
from safetensors.torch import load_file

from peeval.cli import main
from peeval.training.data import train_bpe
from peeval.training.pretrain import run_train
from peeval.training.state import STATE_FILE

TINY = {**_TINY, "steps": 6, "save_every": 3}


def cli_args(out, corpus, tok_dir, pe="rope", extra=()):
    sets = [f"{k}={'null' if v is None else v}" for k, v in TINY.items()] + [f"corpus={corpus}", *extra]
    return ["train", "--pe", pe, "--profile", "smoke", "--out", str(out), "--tokenizer", tok_dir] + [
        a for s in sets for a in ("--set", s)
    ]


def one_error_line(capsys, *needles):
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]  # no tqdm
    assert len(err) == 1, err
    for n in needles:
        assert n in err[0], (n, err[0])
    return err[0]


def snapshot(folder: Path) -> dict:
    folder = Path(folder)  # every file, the step-0 control's in step0/ too
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- item 1: a finished checkpoint is not replaced silently ---------------------------------------------------
def test_train_refuses_a_finished_checkpoint_unless_overwrite(corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, tok_dir)) == 0
    before = snapshot(out)
    capsys.readouterr()
    assert main(cli_args(out, corpus, tok_dir, extra=["lr=0.01"])) == 2
    one_error_line(capsys, f"--out {out}", "finished", "--overwrite")
    assert snapshot(out) == before  # nothing written

    assert main(cli_args(out, corpus, tok_dir, extra=["lr=0.01"]) + ["--overwrite"]) == 0
    import json

    assert json.loads((out / "train_summary.json").read_text())["settings"]["lr"] == 0.01
    assert (out / "model.safetensors").read_bytes() != before["model.safetensors"]


def test_overwrite_discards_resume_state_and_starts_from_step_0(corpus, tok_dir, tmp_path):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    fresh, b = tmp_path / "fresh", tmp_path / "b"
    run_train(fresh, "rope", **kw)
    run_train(b, "nope", stop_after=3, **kw)  # another encoding's state in the folder
    assert (b / STATE_FILE).exists()
    run_train(b, "rope", overwrite=True, **kw)
    wa, wb = load_file(str(fresh / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not (b / STATE_FILE).exists()


def test_out_that_is_a_file_is_refused(corpus, tok_dir, tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(cli_args(f, corpus, tok_dir)) == 2
    one_error_line(capsys, f"--out {f}", "folder")
    assert f.read_text() == "x"


# -- item 1: resume checks everything that defines the run -------------------------------------------------
@pytest.mark.parametrize(
    "change, key",
    [
        ({"pe": "rope"}, "pe:"),
        ({"pe_options": {"mlp_update": False}}, "pe_options.mlp_update"),
        ({"seed": 1}, "seed"),
        ({"lr": 1e-4}, "settings.lr"),
        ({"hidden_size": 64}, "settings.hidden_size"),
        ({"other_tokenizer": True}, "tokenizer"),
        ({"profile": "cpu", "warmup_steps": 2}, "profile"),  # cpu's warmup (20) is more than TINY's 6 steps
    ],
)
def test_resume_refuses_a_different_run_naming_the_key(change, key, corpus, tok_dir, tmp_path):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    run_train(tmp_path, "tape", stop_after=3, **kw)
    state = (tmp_path / STATE_FILE).read_bytes()
    change = dict(change)
    pe = change.pop("pe", "tape")
    if change.pop("other_tokenizer", False):
        other = tmp_path.parent / f"{tmp_path.name}-tok"
        train_bpe([TEXT], 300).save_pretrained(other)  # 200 tokens: the bytes only
        change["tokenizer"] = str(other)
    with pytest.raises(ValueError, match=key) as e:  # a ResumeMismatch
        run_train(tmp_path, pe, **{**kw, **change})
    assert "\n" not in str(e.value) and "--overwrite" in str(e.value)
    assert (tmp_path / STATE_FILE).read_bytes() == state and not (tmp_path / "model.safetensors").exists()


def test_resume_refuses_a_diagnostic_task_on_a_text_state(corpus, tok_dir, tmp_path, capsys):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    run_train(tmp_path, "rope", stop_after=3, **kw)
    with pytest.raises(ValueError, match="task: None there, 'addition' now"):
        run_train(tmp_path, "rope", task="addition", profile="smoke", steps=6)
    # the CLI: the same refusal as one line, exit 2
    capsys.readouterr()
    assert main(cli_args(tmp_path, corpus, tok_dir, pe="nope")) == 2
    one_error_line(capsys, str(tmp_path / STATE_FILE), "pe: 'rope' there, 'nope' now")


def test_resume_of_the_same_run_still_equals_uninterrupted(corpus, tok_dir, tmp_path, capsys):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    a, b = tmp_path / "a", tmp_path / "b"
    run_train(a, "tape", pe_options={"mlp_update": True}, **kw)  # the default, spelled out
    run_train(b, "tape", stop_after=4, **kw)
    run_train(b, "tape", **kw)
    assert "resuming from step 3" in capsys.readouterr().err
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


# -- item 2 at the run_train level: the state outside the outputs survives DVC deleting them -------------------
def test_resume_dir_outside_out_survives_deleting_out(corpus, tok_dir, tmp_path, capsys):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    a, b, resume = tmp_path / "a", tmp_path / "b", tmp_path / "resume" / "b"
    run_train(a, "rope", **kw)
    assert run_train(b, "rope", resume_dir=resume, stop_after=4, **kw) == {"interrupted_at": 4}
    assert (resume / STATE_FILE).exists() and not (b / STATE_FILE).exists()
    shutil.rmtree(b)  # what `dvc repro` does to a stage's outputs before running it again
    run_train(b, "rope", resume_dir=resume, **kw)
    assert "resuming from step 3" in capsys.readouterr().err
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not resume.exists()  # a finished run leaves no state behind


def test_pipeline_discards_a_state_of_other_parameters(corpus, tok_dir, tmp_path, capsys):
    from resume import resumable

    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    a, b, resume = tmp_path / "a", tmp_path / "b", tmp_path / "resume"
    run_train(b, "rope", resume_dir=resume, stop_after=4, **kw)
    shutil.rmtree(b)
    kw["lr"] = 1e-2  # params.yaml changed after the kill: DVC reruns the stage, the old state must not be mixed in
    run_train(a, "rope", **kw)
    resumable(lambda rd: run_train(b, "rope", resume_dir=rd, **kw), resume, "train@rope")
    assert "train@rope: discarding the resume state of other parameters" in capsys.readouterr().err
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


# -- item 3: numeric settings validated where they enter ---------------------------------------------------
BAD_SETTINGS = [
    ("steps=0", "an integer >= 1"),
    ("steps=-3", "an integer >= 1"),
    ("steps=2.5", "an integer >= 1"),
    ("eval_every=0", "an integer >= 1"),
    ("save_every=0", "an integer >= 1"),
    ("batch_size=0", "an integer >= 1"),
    ("grad_accum=0", "an integer >= 1"),
    ("eval_batches=0", "an integer >= 1"),
    ("lr=0", "a number > 0"),
    ("lr=-1", "a number > 0"),
    ("lr=abc", "a number > 0"),
    ("warmup_steps=-1", "an integer >= 0"),
    ("seq_len=1", "an integer >= 2"),
    ("min_lr_ratio=2", "<= 1"),
    ("betas=[0.9]", "two numbers in [0, 1)"),
    ("weight_decay=-0.1", "a number >= 0"),
    ("grad_clip=-1", "a number >= 0 or null"),
    ("hidden_size=0", "an integer >= 1"),
    ("hidden_size=30", "a multiple of num_attention_heads=4"),
    ("num_key_value_heads=3", "a divisor of num_attention_heads=4"),
    ("rope_theta=0", "a number > 0"),
    ("vocab_size=0", "an integer >= 1"),
    ("train_chars=0", "an integer >= 1 or null"),
    ("val_docs=0", "an integer >= 1"),
    ("tokenizer=word", "'bpe' or 'gpt2'"),
    ("tie_word_embeddings=1", "true or false"),
]


@pytest.mark.parametrize("setting, allowed", BAD_SETTINGS)
def test_bad_train_settings(setting, allowed, corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["train", "--pe", "rope", "--profile", "smoke", "--out", str(out), "--tokenizer", tok_dir]
    assert main(args + ["--set", f"corpus={corpus}", "--set", setting]) == 2
    key, value = setting.split("=")
    one_error_line(capsys, f"--set {key}=", allowed)
    assert not out.exists()


@pytest.mark.parametrize(
    "setting, allowed",
    [("train_examples=0", "an integer >= 1"), ("task_params=3", "a JSON object"), ("gen_profile=x", "'cpu'")],
)
def test_bad_diagnostic_settings(setting, allowed, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["train", "--pe", "rope", "--task", "addition", "--profile", "smoke", "--out", str(out), "--set", setting]
    assert main(args) == 2
    one_error_line(capsys, f"--set {setting.split('=')[0]}=", allowed)
    assert not out.exists()


def test_bad_seed_and_tokenizer_with_a_task(tok_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train", "--pe", "rope", "--profile", "smoke", "--out", str(out), "--seed", "-1"]) == 2
    one_error_line(capsys, "--seed -1", "0 to 4294967295")
    args = ["train", "--pe", "rope", "--task", "addition", "--profile", "smoke", "--out", str(out)]
    assert main(args + ["--tokenizer", tok_dir]) == 2
    one_error_line(capsys, f"--tokenizer {tok_dir}", "text pretraining")
    assert not out.exists()


def test_integral_float_settings_are_ints():
    from peeval.training.profiles import get_profile

    p = get_profile("train", "smoke", {"steps": 1e3, "betas": [0.9, 0.99]})
    assert p["steps"] == 1000 and isinstance(p["steps"], int) and p["betas"] == (0.9, 0.99)
    assert get_profile("adapt", "smoke", {"steps": 0})["steps"] == 0  # pi / yarn: training-free


# -- item 4 (training half): damaged files are named -------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "foreign"])
def test_damaged_train_state_is_one_line_naming_it(damage, corpus, tok_dir, tmp_path, capsys):
    kw = dict(profile="smoke", tokenizer=tok_dir, corpus=corpus, **TINY)
    run_train(tmp_path, "rope", stop_after=3, **kw)
    state = tmp_path / STATE_FILE
    if damage == "truncate":
        data = state.read_bytes()
        state.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        state.write_bytes(b"not a torch file" * 10)
    elif damage == "empty":
        state.write_bytes(b"")
    else:
        torch.save([1, 2, 3], state)
    damaged = state.read_bytes()
    capsys.readouterr()
    assert main(cli_args(tmp_path, corpus, tok_dir)) == 2
    one_error_line(capsys, str(state), "--overwrite")
    assert state.read_bytes() == damaged and not (tmp_path / "model.safetensors").exists()


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("tiny_llama"), TEXT)


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_adapt_base_weights_are_one_line_naming_the_file(damage, tiny_llama, corpus, tmp_path, capsys):
    base = tmp_path / "base"
    shutil.copytree(tiny_llama, base)
    w = base / "model.safetensors"
    if damage == "truncate":
        os.truncate(w, w.stat().st_size // 2)
    else:
        w.write_bytes(b"\x00" * 64)
    out = tmp_path / "out"
    args = ["adapt", "--method", "tape", "--base", str(base), "--profile", "smoke", "--out", str(out)]
    assert main(args + ["--set", f"corpus={corpus}", "--set", "max_layers=null"]) == 2
    one_error_line(capsys, str(w), "truncated or corrupt")
    assert not out.exists()


def test_adapt_refuses_a_finished_adapter_and_bad_settings(tiny_llama, corpus, tmp_path, capsys):
    from peeval.training.adapt import run_adapt

    out = tmp_path / "out"
    kw = dict(base=str(tiny_llama), profile="smoke", corpus=corpus, max_layers=None, steps=1)
    run_adapt(out, "lora", **kw)
    before = snapshot(out)
    with pytest.raises(ValueError, match="already holds a finished run .*--overwrite"):
        run_adapt(out, "lora", **kw)
    assert snapshot(out) == before
    run_adapt(out, "lora", overwrite=True, **kw)
    cases = [("pi", "steps=-1", "an integer >= 0"), ("pi", "factor=0", "a number > 0"), ("pi", "seq_len=0", ">= 2")]
    cases += [("lora", "steps=0", "an integer >= 1 for --method lora")]  # an untrained adapter
    for method, setting, allowed in cases:
        args = ["adapt", "--method", method, "--base", str(tiny_llama), "--out", str(tmp_path / "x")]
        assert main(args + ["--profile", "smoke", "--set", setting]) == 2
        one_error_line(capsys, f"--set {setting.split('=')[0]}=", allowed)
    assert not (tmp_path / "x").exists()


def test_pipeline_stage_bad_params_is_one_line(tmp_path):
    """`dvc repro` runs pipelines/train.py: a bad params.yaml value is one line naming it, exit 2."""
    import subprocess

    import yaml

    root = Path(__file__).resolve().parents[2]
    p = yaml.safe_load((root / "params" / "smoke.yaml").read_text())
    p["data"]["root"] = str(tmp_path)  # not read before the settings are checked
    p["train"]["set"] = {"steps": 0}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    env = {k: v for k, v in os.environ.items() if k != "PEEVAL_DATA_MIRROR"}
    r = subprocess.run(
        [sys.executable, str(root / "pipelines" / "train.py"), "rope"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "train@rope" in err[0] and "--set steps=0" in err[0], err
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / ".resume").exists()


def test_overwrite_on_a_full_disk_keeps_the_finished_checkpoint(corpus, tok_dir, tmp_path, capsys, monkeypatch):
    """Issue 30: ``train --overwrite`` whose save fails (injected ENOSPC, which names no file) is one line
    naming the folder, exit 2; the finished checkpoint stays as it was and no temporary is left."""
    import errno

    from peeval.models import PeevalForCausalLM

    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, tok_dir)) == 0
    before = snapshot(out)
    capsys.readouterr()

    def full_disk(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PeevalForCausalLM, "save_pretrained", full_disk)
    assert main(cli_args(out, corpus, tok_dir, extra=["lr=0.01"]) + ["--overwrite"]) == 2
    one_error_line(capsys, "peeval train: error: No space left on device", str(out))
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before, sorted(after)
    assert not [
        p
        for p in tmp_path.rglob("*")
        if (p.name.startswith(".") and p.name != ".peeval-manifest.json") or p.name.endswith(".tmp")
    ]


@pytest.mark.parametrize("method", ["lora", "tape"])
def test_adapt_overwrite_on_a_full_disk_keeps_the_finished_adapter(method, tiny_llama, corpus, tmp_path, capsys,
                                                                   monkeypatch):  # fmt: skip
    """Issue 30: ``adapt --overwrite`` whose save fails (injected ENOSPC, which names no file) is one line
    naming the folder, exit 2; the finished adapter stays as it was and no temporary is left. Without a
    finished adapter, nothing is left at all."""
    import errno

    import safetensors.torch

    out = tmp_path / "ad"
    args = ["adapt", "--method", method, "--base", str(tiny_llama), "--profile", "smoke", "--out", str(out),
            "--set", f"corpus={corpus}", "--set", "max_layers=null", "--set", "steps=1"]  # fmt: skip
    assert main(args) == 0
    before = snapshot(out)
    capsys.readouterr()

    def full_disk(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    if method == "tape":
        monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    else:
        import peft

        monkeypatch.setattr(peft.PeftModel, "save_pretrained", full_disk)
    assert main(args + ["--set", "lr=0.01", "--overwrite"]) == 2
    one_error_line(capsys, "peeval adapt: error: No space left on device", str(out))
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before, sorted(after)
    assert not [
        p
        for p in tmp_path.rglob("*")
        if (p.name.startswith(".") and p.name != ".peeval-manifest.json") or p.name.endswith(".tmp")
    ]
    fresh = tmp_path / "fresh"
    assert main([*args[:8], str(fresh), *args[9:]]) == 2
    one_error_line(capsys, "No space left on device", str(fresh))
    assert not fresh.exists() or not any(fresh.iterdir()), sorted(fresh.iterdir())
