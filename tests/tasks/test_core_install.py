"""Issue 32: `pip install peeval` without extras gives the lm-eval plugin. The packages of the extras
(dvc, duckdb, peft, gguf, rouge-score, triton) are made unimportable in a child interpreter, which then
runs the real `lm_eval` CLI with `--model peeval-tape` on a tiny checkpoint; `peeval adapt` in the same
state is one line naming the extra to install."""

import json
import os
import subprocess
import sys

import pytest
from helpers.checkpoints import save_tiny_checkpoint

EXTRAS_ONLY = ("dvc", "duckdb", "peft", "gguf", "rouge_score", "triton")

#: run first in the child: any import of an extra's package fails as if it were not installed
BLOCK = f"""
import sys
from importlib.machinery import PathFinder
class _NotInstalled(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.split(".")[0] in {EXTRAS_ONLY!r} else PathFinder.find_spec(name, path, target)
already = sorted(m for m in {EXTRAS_ONLY!r} if m in sys.modules)
assert not already, f"imported at interpreter start: {{already}}"
sys.meta_path[:] = [_NotInstalled if f is PathFinder else f for f in sys.meta_path]
sys.path_importer_cache.clear()
"""


def child(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)  # fmt: skip


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "tape"
    return save_tiny_checkpoint(out, ["the cat sat on the mat 0123456789 + ="], pe="tape", vocab_size=300,
                                max_positions=64)  # fmt: skip


def test_lm_eval_runs_peeval_tape_without_the_extras(ckpt, tmp_path):
    out = tmp_path / "out"
    argv = ["lm_eval", "--model", "peeval-tape", "--model_args", f"pretrained={ckpt}", "--tasks",
            "peeval_diag_addition_test", "--limit", "2", "--device", "cpu", "--output_path", str(out)]  # fmt: skip
    code = f"sys.argv = {argv!r}\nfrom lm_eval.__main__ import cli_evaluate\ncli_evaluate()\n"
    r = child(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    results = list(out.rglob("results*.json"))
    assert len(results) == 1, r.stderr[-2000:]
    assert "peeval_diag_addition_test" in json.loads(results[0].read_text())["results"]


def test_adapt_without_the_extra_is_one_line_naming_it(tmp_path):
    argv = ["adapt", "--method", "lora", "--out", "x", "--profile", "smoke"]
    code = f"from peeval.cli import main\nsys.exit(main({argv!r}))\n"
    r = child(code, tmp_path)
    lines = [li for li in r.stderr.splitlines() if li.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert "peft" in lines[0] and "peeval[adapt]" in lines[0], lines
    assert not (tmp_path / "x").exists()
