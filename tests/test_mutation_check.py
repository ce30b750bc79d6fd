"""`make mutation` runs every mutant of the decision modules, in shards (issue 67 item 6): the N shards of
``tests/mutation_check.py --shard I/N`` are disjoint and together are every mutant; no shard is a sample. Listed with
``--list`` (nothing is run); the mutants are enumerated by the script's own ``mutants``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO as _REPO

REPO = Path(_REPO)
SCRIPT = REPO / "tests" / "mutation_check.py"
FILE = "leaderboard/claims/decision.py"


def _every() -> list[str]:
    spec = importlib.util.spec_from_file_location("mutation_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [desc for desc, _fn, _text in mod.mutants(REPO / FILE)]


def _listed(*args: str) -> tuple[int, list[str], str]:
    r = subprocess.run([sys.executable, str(SCRIPT), "--list", "--files", FILE, *args], cwd=REPO, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    return r.returncode, [line.strip() for line in r.stdout.splitlines() if line.startswith("  ")], r.stderr


def test_default_lists_every_mutant_not_a_sample():
    every = _every()
    assert len(every) > 60  # more than the old default sample of 60
    rc, listed, err = _listed()
    assert rc == 0, err
    assert listed == every


@pytest.mark.parametrize("n", [3])
def test_shards_are_disjoint_and_cover_every_mutant(n):
    every = _every()
    shards = []
    for i in range(1, n + 1):
        rc, listed, err = _listed("--shard", f"{i}/{n}")
        assert rc == 0, err
        shards.append(listed)
    assert sorted(d for s in shards for d in s) == sorted(every)  # every mutant once: disjoint and complete
    assert max(map(len, shards)) - min(map(len, shards)) <= 1


@pytest.mark.parametrize("bad", ["0/4", "5/4", "2", "a/b", "1/0"])
def test_a_bad_shard_is_one_line_and_exit_2(bad):
    rc, listed, err = _listed("--shard", bad)
    assert rc == 2 and not listed
    assert err.count("\n") == 1 and err.startswith(f"tests/mutation_check.py: --shard {bad}: must be I/N"), err
