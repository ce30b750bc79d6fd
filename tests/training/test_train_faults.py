"""Issue 42 (training rows): a diverging run stops and saves nothing, ``peeval tokenizer`` does not
replace a finished checkpoint's tokenizer, settings are checked against the run (warmup within the
steps, vocab_size against the tokenizer, batch_size against the data and the memory), and a failed
or terminated run leaves no empty ``--out``."""

import json
import os
import signal
import time

import pytest
from helpers.training import TEXT
from helpers.training import TINY as _TINY

from peeval.cli import main
from peeval.training.data import train_bpe
from peeval.training.state import STATE_FILE

TINY = {**_TINY, "steps": 6, "save_every": 3}


def cli_args(out, corpus, tok_dir, extra=(), tokenizer=True):
    sets = [f"{k}={'null' if v is None else v}" for k, v in TINY.items()] + [f"corpus={corpus}", *extra]
    tok = ["--tokenizer", str(tok_dir)] if tokenizer else []
    return ["train", "--pe", "rope", "--profile", "smoke", "--out", str(out), *tok] + [
        a for s in sets for a in ("--set", s)
    ]


def one_error_line(capsys, cmd, *needles):
    err = [li for li in capsys.readouterr().err.splitlines() if li.strip() and "%|" not in li]
    assert len(err) == 1, err
    assert err[0].startswith(f"peeval {cmd}: error: "), err
    for n in needles:
        assert n in err[0], (n, err[0])
    return err[0]


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- row 1: a diverging run ------------------------------------------------------------------------------------
def test_a_diverging_run_stops_with_one_line_and_saves_nothing(corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, tok_dir, ["lr=1e9"])) == 2
    one_error_line(capsys, "train", "loss is nan at step", "diverged", "lower --set lr")
    assert not out.exists()  # no NaN model, no summary, no resume state, no empty folder


def test_a_diverging_overwrite_keeps_the_finished_checkpoint(corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, tok_dir)) == 0
    before = snapshot(out)
    summary = json.loads((out / "train_summary.json").read_text(), parse_constant=lambda c: 1 / 0)
    assert summary["final_val_loss"] > 0  # valid JSON, finite numbers
    capsys.readouterr()
    assert main(cli_args(out, corpus, tok_dir, ["lr=1e9"]) + ["--overwrite"]) == 2
    one_error_line(capsys, "train", "diverged")
    assert snapshot(out) == before and not (out / STATE_FILE).exists()


# -- row 2: peeval tokenizer -----------------------------------------------------------------------------------
def test_tokenizer_never_replaces_a_checkpoints_tokenizer(corpus, tok_dir, tmp_path, capsys):
    ck = tmp_path / "ckpt"
    assert main(cli_args(ck, corpus, tok_dir)) == 0
    before = snapshot(ck)
    capsys.readouterr()
    for extra in ([], ["--overwrite"]):
        rc = main(["tokenizer", "--out", str(ck), "--profile", "smoke", "--set", f"corpus={corpus}", *extra])
        assert rc == 2
        one_error_line(capsys, "tokenizer", f"--out {ck} holds a model (model.safetensors)")
        assert snapshot(ck) == before


def test_tokenizer_replaces_a_tokenizer_only_with_overwrite(corpus, tmp_path, capsys):
    tok = tmp_path / "tok"
    argv = ["tokenizer", "--out", str(tok), "--profile", "smoke", "--set", f"corpus={corpus}", "--set",
            "train_chars=null"]  # fmt: skip
    assert main(argv) == 0
    (tok / "tokenizer.json").write_text("{}")  # mark it: a refused build leaves it
    capsys.readouterr()
    assert main([*argv, "--set", "vocab_size=300"]) == 2
    one_error_line(capsys, "tokenizer", "already holds a tokenizer", "--overwrite")
    assert (tok / "tokenizer.json").read_text() == "{}"
    assert main([*argv, "--set", "vocab_size=300", "--overwrite"]) == 0
    assert (tok / "tokenizer.json").read_text() != "{}"


# -- row 7: settings checked against the run -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("warmup_steps=100", "--set warmup_steps=100: allowed an integer from 0 to steps=6"),
        ("vocab_size=100", "--set vocab_size=100: allowed an integer >= 257"),
        ("batch_size=100000", "--set batch_size=100000: the training set has"),
    ],
)
def test_settings_checked_against_the_run(setting, needle, corpus, tok_dir, tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, tok_dir, [setting])) == 2
    one_error_line(capsys, "train", needle)
    assert not out.exists()


def test_vocab_size_below_the_tokenizer_is_refused(corpus, tmp_path, capsys):
    big = tmp_path / "tok330"
    train_bpe([TEXT], 384).save_pretrained(big)  # 330 tokens
    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, big, ["vocab_size=300"])) == 2
    one_error_line(capsys, "train", "--set vocab_size=300: the tokenizer has 330 tokens, allowed >= 330")
    assert not out.exists()


def test_a_batch_beyond_the_memory_is_refused_before_step_0(corpus, tok_dir, tmp_path, capsys, monkeypatch):
    from peeval.training import loop

    monkeypatch.setattr(loop, "memory_bytes", lambda device: 1 << 16)  # a 64 KiB machine
    out = tmp_path / "ckpt"
    assert main(cli_args(out, corpus, tok_dir)) == 2
    one_error_line(capsys, "train", "--set batch_size=4: one micro-batch needs at least", "GiB", "batch_size <= 1")
    assert not out.exists()


def test_warmup_is_checked_in_the_adapt_profile_too():
    from peeval.settings import SettingsError
    from peeval.training.profiles import get_profile

    with pytest.raises(SettingsError, match="warmup_steps=9: allowed an integer from 0 to steps=5"):
        get_profile("adapt", "cpu", {"steps": 5, "warmup_steps": 9})
    assert get_profile("adapt", "cpu", {"steps": 0, "warmup_steps": 9})["steps"] == 0  # no schedule at 0 steps


# -- row 7: a terminated run leaves no empty --out ---------------------------------------------------------------
@pytest.mark.parametrize("how", ["sigterm", "ctrl_c"])
def test_a_stopped_run_leaves_no_empty_out(how, corpus, tok_dir, tmp_path, capsys, monkeypatch):
    from peeval.training import pretrain

    def stopped(*a, **k):
        if how == "ctrl_c":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` / a scheduler would, during step 0
        time.sleep(5)
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(pretrain, "fit", stopped)
    previous = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "ckpt"
    rc = main(cli_args(out, corpus, tok_dir))
    err = [li for li in capsys.readouterr().err.splitlines() if li.strip()]
    assert rc == (143 if how == "sigterm" else 130) and len(err) == 1, err
    assert "terminated" in err[0] if how == "sigterm" else "interrupted" in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is previous  # the handler is the command's only
