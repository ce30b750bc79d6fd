"""The offline data mirror the tests read: one definition of where it is (``$PEEVAL_DATA_MIRROR``, else
``../shared/data`` beside the repository), of how a test skips without it, and of the environment a test's
subprocess runs in (the hub offline, the mirror named). Its fixture (``data_mirror``) is registered for every test
by ``pytest_plugins`` in tests/conftest.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

MIRROR = Path(os.environ.get("PEEVAL_DATA_MIRROR", Path(REPO).parent / "shared" / "data"))
#: the virtual environment's scripts (dvc, peeval): first on a subprocess's PATH
BIN = Path(sys.executable).parent


def needs_mirror(*folder: str, reason: str = "no data mirror") -> pytest.MarkDecorator:
    """Skip the test unless the mirror holds ``folder`` (``needs_mirror("local", "gutenberg-eval")``)."""
    path = MIRROR.joinpath(*folder)
    return pytest.mark.skipif(not path.is_dir(), reason=f"{reason}: {path} is not a folder (set PEEVAL_DATA_MIRROR)")


@pytest.fixture
def data_mirror() -> Path:
    """The mirror's path; the test is skipped, saying where it looked, when the mirror is not there."""
    if not MIRROR.is_dir():
        pytest.skip(f"no data mirror: {MIRROR} is not a folder (set PEEVAL_DATA_MIRROR)")
    return MIRROR


def offline_env(**extra: str) -> dict[str, str]:
    """``os.environ`` as a pipeline stage run by a test sees it: the venv's scripts first on PATH, one thread, the
    hub offline and the mirror named; ``extra`` on top."""
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "PEEVAL_DATA_MIRROR": str(MIRROR), **extra}  # fmt: skip


def sh(args: list, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    """Run ``args`` in ``cwd`` (``env``: :func:`offline_env` unless given); a non-zero exit fails the test with
    the command and the ends of its output. Returns stdout + stderr."""
    env = offline_env() if env is None else env
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args}:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout + r.stderr
