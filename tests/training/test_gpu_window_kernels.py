"""benchmarks/gpu_window_kernels.py (issue 65's table in one GPU window): its dry run on the CPU runs real
`peeval bench` processes at tiny sizes and writes raw rows and a summary; its options are checked before it runs;
bench's --linear_loss liger is refused on the CPU in one line."""

import json
import subprocess
import sys

import pytest
from conftest import REPO

from peeval import cli

SCRIPT = f"{REPO}/benchmarks/gpu_window_kernels.py"


def test_dry_run_writes_every_groups_rows_and_a_summary(tmp_path):
    out = tmp_path / "w"
    groups = ["fused_512", "liger_512", "chunked_512"]  # the full dry run: 2.5 min on 2 busy cores; this subset 1
    r = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--out", str(out), "--groups", *groups],
                       cwd=REPO, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert [g["group"] for g in s["groups"]] == groups
    status = {g["group"]: g["status"] for g in s["groups"]}
    assert status == {"fused_512": "ok", "liger_512": "skipped: liger runs on CUDA only", "chunked_512": "ok"}
    rows = {(r["group"], r["entry"]): r for r in s["rows"]}
    fused = {e for g, e in rows if g == "fused_512"}
    assert fused == {"rope", "t5@triton", "kerple@triton", "fire@triton", "alibi@triton", "cope@recompute"}
    assert rows["fused_512", "cope@recompute"]["backends"] == ["recompute"]  # the fast path ran, not a fallback
    assert all("step_s" in r and r["tokens_per_step"] == 2 * 32 for r in rows.values())
    raw = json.loads((out / "fused_512.json").read_text())  # bench's own file, as written
    assert "linear_loss logits" in raw["header"] and "linear_loss chunked" in json.loads(
        (out / "chunked_512.json").read_text())["header"]  # fmt: skip
    base = rows["fused_512", "rope"]["step_s"]
    assert rows["fused_512", "cope@recompute"]["step_vs_rope_logits"] == pytest.approx(
        rows["fused_512", "cope@recompute"]["step_s"] / base)  # fmt: skip
    assert rows["chunked_512", "rope"]["step_vs_rope_logits"] == pytest.approx(rows["chunked_512", "rope"]["step_s"]
                                                                                / base)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--groups", "default_999"], "--groups: allowed one or more of default_512"),
        (["--budget_s", "0"], "--budget_s: allowed a number > 0"),
    ],
)
def test_a_bad_option_is_one_line_exit_2_nothing_written(tmp_path, args, says):
    out = tmp_path / "w"
    r = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--out", str(out), *args], cwd=REPO,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and says in r.stderr and not out.exists()


def test_never_writes_into_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("a user's file")
    r = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--out", str(tmp_path)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "--out" in r.stderr and sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_bench_refuses_liger_on_the_cpu_in_one_line(tmp_path, capsys):
    out = tmp_path / "b.json"
    argv = ["bench", "--train", "--profile", "smoke", "--device", "cpu", "--linear_loss", "liger", "--json", str(out)]
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's own refusal (an unknown option)
        rc = e.code
    assert rc == 2
    assert "--linear_loss liger: runs on CUDA only" in capsys.readouterr().err and not out.exists()
