"""What a newcomer reading only the README and docs needs (issue 68 items 9, 10, 12): how to reach ``peeval``
after ``make venv``, where the data comes from, and a tokenizer size that matches the profile it names."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_readme_says_how_to_reach_peeval_after_make_venv():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "source .venv/bin/activate" in install and ".venv/bin/peeval" in install


def test_readme_says_where_the_data_comes_from():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "PEEVAL_DATA_MIRROR" in readme and "docs/data.md" in readme
    assert "local/gutenberg-eval" in readme  # the folder the boards' perplexity documents come from


def test_training_doc_names_the_cpu_tokenizer_size_of_the_profile():
    profiles = yaml.safe_load((ROOT / "peeval/training/profiles.yaml").read_text())
    cpu_vocab = profiles["train"]["cpu"]["vocab_size"]
    line = next(x for x in (ROOT / "docs/training.md").read_text().splitlines() if "--profile cpu" in x and "BPE" in x)
    assert re.search(r"BPE \((\d+)\)", line).group(1) == str(cpu_vocab), line


def test_readme_says_how_long_make_test_takes():
    """Issue 68 item 12: the README's `make test` line gave no duration (the default suite: ~30 min on 2 cores)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("make test "))
    assert re.search(r"~?\d+ (min|h)\b", line), line
