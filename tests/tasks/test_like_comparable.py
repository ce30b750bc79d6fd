"""Issue 68 items 3 and 8: ``--like`` says in one line, before scoring, what differs from the board's pretrained models
(tokenizer, size, training length) and what to run to match; and ``peeval eval --model hf`` scores any causal LM
(here a GPT-2) on the machine's CPU with the board's protocol, bits per byte included, with no CUDA traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import MIRROR, needs_mirror

from peeval.cli import main

TEXT = ["the cat sat on the mat 0123456789 and the dog ran"]

#: `peeval` as its console script runs it, but from this checkout (run with cwd = the repository root)
PEEVAL = "import sys; from peeval.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A published profile of one pretrained run (what `python -m leaderboard.publish` lays out): a tiny RoPE model
    scored on 2 documents at 16 and 32 tokens, with its training summary (size, training length, tokenizer)."""
    root = tmp_path_factory.mktemp("like")
    ck = save_tiny_checkpoint(root / "ck" / "rope", TEXT, pe="rope", vocab_size=300, max_positions=64)
    md = {"lengths": [16, 32], "targets": 40, "skip": 0, "max_docs": 2}
    args = ["--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", "peeval_ppl_pg19", "--metadata",
            json.dumps(md), "--output_path", str(root / "pub"), "--run_name", "rope"]  # fmt: skip
    assert main(["eval", "--device", "cpu", *args]) == 0
    folder = root / "board"
    (folder / "results" / "pretrain" / "rope").mkdir(parents=True)
    shutil.copytree(root / "pub" / "rope", folder / "results" / "pretrain" / "rope" / "ppl")
    prov = json.loads((root / "pub" / "rope" / "results.json").read_text())["peeval"]
    (folder / "checkpoints" / "pretrain" / "rope").mkdir(parents=True)
    summary = {"pe": "rope", "params": prov["model_params"], "training_length": 64,
               "settings": {"tokenizer": "bpe", "vocab_size": 300}}  # fmt: skip
    (folder / "checkpoints" / "pretrain" / "rope" / "train_summary.json").write_text(json.dumps(summary))
    (folder / "SOURCE.json").write_text(json.dumps({"profile": "tiny"}))
    return root, ck, folder


def _like(capsys, board_dir, ck, out, run) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["eval", "--device", "cpu", "--like", str(board_dir), "--model_args", f"pretrained={ck}",
               "--output_path", str(out), "--run_name", run])  # fmt: skip
    return rc, capsys.readouterr().out


@needs_mirror("local", "gutenberg-eval")
def test_like_says_what_differs_from_the_board_before_scoring(board, capsys):
    root, ck, folder = board
    rc, out = _like(capsys, folder, ck, root / "mine", "same")  # the board's own model: nothing differs
    assert rc == 0
    said = [line for line in out.splitlines() if line.startswith("--like tiny: ") and "tasks" not in line]
    assert len(said) == 1, out[-2000:]
    assert said[0] == "--like tiny: tokenizer, size and training length as the board's pretrained models"

    other = save_tiny_checkpoint(root / "ck" / "mine", TEXT, pe="rope", vocab_size=280, max_positions=48)
    rc, out = _like(capsys, folder, other, root / "mine", "other")
    assert rc == 0
    said = [x for x in out.splitlines() if x.startswith("--like tiny: differs")]
    assert len(said) == 1, out[-2000:]
    line = said[0]
    assert "tokenizer (" in line and "bits per byte" in line and "size (" in line, line
    assert "training length (48 vs 64)" in line, line
    assert "`peeval tokenizer --profile tiny --out TOK`" in line and "`peeval train --profile tiny" in line, line
    assert out.index(line) < out.index("peeval eval: results")  # said before the numbers


@needs_mirror("local", "gutenberg-eval")
@needs_mirror("tokenizers", "gpt2")
def test_any_causal_lm_scores_with_model_hf_on_the_cpu(board, tmp_path):
    """A GPT-2 (random weights, the mirror's GPT-2 tokenizer) as a user would run it: on a machine without a GPU
    it scores the board's protocol on the CPU (lm-eval's own `hf` asked for cuda: "Torch not compiled with CUDA
    enabled"), bits per byte and all, and says its tokenizer differs."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    _, _, folder = board
    tok = GPT2TokenizerFast(vocab=str(MIRROR / "tokenizers/gpt2/vocab.json"),
                            merges=str(MIRROR / "tokenizers/gpt2/merges.txt"))  # fmt: skip
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=8, n_layer=1, n_head=2)).save_pretrained(
        tmp_path / "gpt2"
    )
    tok.save_pretrained(tmp_path / "gpt2")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # the machine as it is: no device hidden or named
    cmd = [sys.executable, "-c", PEEVAL, "eval", "--like", str(folder), "--model", "hf", "--model_args",
           f"pretrained={tmp_path / 'gpt2'}", "--output_path", str(tmp_path / "out"), "--run_name", "gpt2"]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    assert any(x.startswith("--like tiny: differs") and "tokenizer (50,257 tokens" in x for x in p.stdout.splitlines())
    got = json.loads((tmp_path / "out" / "gpt2" / "results.json").read_text())
    assert got["peeval"]["device"].startswith("cuda" if torch.cuda.is_available() else "cpu")
    assert got["peeval"]["like"] == "tiny" and got["peeval"]["model"] == "peeval-hf"
    cells = got["results"]["peeval_ppl_pg19"]
    for L in (16, 32):  # per token and per byte, at every length of the board
        assert cells[f"ppl@{L},none"] > 1 and 0 < cells[f"bpb@{L},none"] < 64
