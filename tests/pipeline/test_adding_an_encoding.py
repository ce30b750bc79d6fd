"""Adding an encoding is one module and one registry line (``peeval/registry/__init__.py``): in a copy of the
repository with a throwaway 14th encoding written that way and nothing else edited, it trains (`peeval train`),
evaluates through lm-eval under its own model name (`peeval eval --model peeval-<name>`), is a
randpe base, and its run reaches the site (`leaderboard.ingest` + `leaderboard.site`)."""

import json
import sys
from pathlib import Path

from helpers.data_mirror import BIN, needs_mirror, offline_env, sh
from helpers.training import TEXT
from helpers.worktree import copy_working_tree

NAME = "slope"
MODULE = '''"""A learned per-head linear penalty on distance (a throwaway 14th encoding)."""

import torch
from torch import nn
from transformers import initialization as init

from .distance import DistanceBias


class Slope(DistanceBias):
    name = "slope"

    def __init__(self, config) -> None:
        super().__init__(config)
        self.slope = nn.Parameter(torch.empty(self.num_heads))

    def init_weights(self) -> None:
        init.constant_(self.slope, 0.1)

    def distance_table(self, layer, dist):
        return -self.slope.abs()[:, None] * dist
'''
LINE = '    "slope": "slope:Slope",\n'


def copy_with_new_encoding(work: Path) -> Path:
    """The working tree's files (what a fresh clone has), plus the module and the registry line."""
    copy_working_tree(work)
    (work / "peeval" / "models" / "encodings" / f"{NAME}.py").write_text(MODULE)
    path = work / "peeval" / "registry" / "__init__.py"
    before, start, rest = path.read_text().partition("ENCODINGS: dict[str, str] = {")
    table, sep, tail = rest.partition("\n}\n")  # the end of the ENCODINGS literal
    assert start and sep
    path.write_text(before + start + table + "\n" + LINE.rstrip("\n") + sep + tail)
    return work


@needs_mirror("local", "gutenberg-eval")
def test_a_new_encoding_trains_evaluates_and_reaches_the_site(tmp_path):
    work = copy_with_new_encoding(tmp_path / "repo")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(4):
        (corpus / f"{i:02d}.txt").write_text(TEXT)
    py, peeval = sys.executable, str(BIN / "peeval")
    env = offline_env(PYTHONPATH=str(work))  # the copy's peeval, with the new encoding
    text = ["--profile", "smoke", "--set", f"corpus={corpus}"]
    sh(
        [peeval, "tokenizer", "--out", str(tmp_path / "tok"), *text, "--set", "vocab_size=300"],
        tmp_path,
        env,
        timeout=300,
    )
    sh([peeval, "train", "--pe", NAME, "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "ck"), *text,
        "--set", "steps=3", "--set", "seq_len=32", "--set", "train_chars=null", "--set", "val_chars=null"],
       tmp_path, env, timeout=300)  # fmt: skip
    summary = json.loads((tmp_path / "ck" / "train_summary.json").read_text())
    assert summary["pe"] == NAME and summary["steps"] == 3
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["pe"] == NAME

    sh([peeval, "eval", "--model", f"peeval-{NAME}", "--model_args", f"pretrained={tmp_path / 'ck'}",
        "--tasks", "peeval_ppl_pg19", "--limit", "1", "--output_path", str(tmp_path / "results"),
        "--run_name", NAME, "--metadata", '{"lengths": [32], "protocol": "windows", "max_windows": 1}'],
       tmp_path, env, timeout=300)  # fmt: skip
    res = json.loads((tmp_path / "results" / NAME / "results.json").read_text())
    assert res["peeval"]["pe"] == NAME and res["results"]["peeval_ppl_pg19"]["windows@32,none"] == 1

    # randpe takes it as a base (its bases are the registry's encodings that read positions)
    code = "from peeval.models import PeevalConfig; print(PeevalConfig(pe='randpe', pe_options={'base': 'slope'}).pe)"
    assert sh([py, "-c", code], tmp_path, env, timeout=300).strip().endswith("randpe")

    db, site = tmp_path / "peeval.duckdb", tmp_path / "site"
    sh([py, "-m", "leaderboard.ingest", str(tmp_path / "results"), str(tmp_path / "ck"), "--db", str(db),
        "--root", str(tmp_path)], work, env, timeout=300)  # fmt: skip
    sh([py, "-m", "leaderboard.site", "--db", str(db), "--out", str(site)], work, env, timeout=300)
    index = (site / "index.html").read_text()
    assert NAME in index and "ppl" in (site / "ppl.html").read_text()
