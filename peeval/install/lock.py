"""The lock, ``constraints.txt``: the exact versions the test suite last passed on.

The one reader and writer of that file. ``make test`` / ``make leaderboard`` / ``.ci/run`` install
with ``pip -c constraints.txt``; ``python -m peeval.install.lock --against constraints.txt`` prints the
installed versions beside the locked ones (``make upgrade-check``); ``--write constraints.txt``
writes the running environment as the new lock (``make lock``) and, beside it, ``constraints-cuda.txt``:
the same lock without the pins that belong to this CPU machine's torch build (torch, triton, nvidia-*,
cuda-*), for a CUDA machine that installed its own torch first (docs/reproducing.md: What to install).
"""

from __future__ import annotations

import sys

from .versions import installed, outside_tested

HEADER = [
    "# The exact versions the test suite last passed on (make test, make leaderboard and .ci/run install with",
    "# pip -c constraints.txt). pyproject.toml keeps ranges; see README 'Reproducible installs' to move this lock.",
]
#: pins of one torch build (the lock is made on a CPU machine): a CUDA machine keeps its own
MACHINE_PINS = ("torch", "triton", "nvidia-", "cuda-")
#: the CUDA lock, beside the lock
CUDA_LOCK = "constraints-cuda.txt"
CUDA_HEADER = [
    "# constraints.txt without the pins of the CPU machine's torch build (torch, triton, nvidia-*, cuda-*): on a CUDA",
    "# machine install torch for your CUDA first, then pip install -c constraints-cuda.txt '.[pipeline,gpu]'.",
]
#: what --against shows
KEY_PACKAGES = ["torch", "transformers", "lm-eval", "datasets", "tokenizers", "huggingface-hub", "peft",
                "accelerate", "dvc", "duckdb"]  # fmt: skip


def norm(name: str) -> str:
    """A distribution name as pip compares them (``lm_eval`` == ``lm-eval``)."""
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


def read_lock(path: str) -> dict[str, str]:
    """``name==version`` lines of a constraints file, names normalised as pip does."""
    pins = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                pins[norm(name)] = version.strip()
    return pins


def without_machine_pins(lines: list[str]) -> list[str]:
    """The lock's ``name==version`` lines less those of the torch build (:data:`MACHINE_PINS`)."""
    out = []
    for line in lines:
        name = norm(line.split("==", 1)[0]) if "==" in line and not line.startswith("#") else None
        if name is None:
            continue
        if name == "torch" or name == "triton" or name.startswith(MACHINE_PINS[2:]):
            continue
        out.append(line)
    return out


def write_cuda_lock(lock_path: str) -> str:
    """``constraints-cuda.txt`` beside ``lock_path``, made from it; returns its path."""
    import os

    with open(lock_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    made = [line for line in lines if line.startswith("# Made ")]
    out = os.path.join(os.path.dirname(os.path.abspath(lock_path)), CUDA_LOCK)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join([*CUDA_HEADER, *made, *without_machine_pins(lines)]) + "\n")
    return out


def freeze() -> list[str]:
    """``pip freeze`` of the running interpreter, without peeval itself and without local version
    labels (torch 2.13.0+cpu -> 2.13.0, so the lock also serves a CUDA build of the same release)."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"], check=True, capture_output=True, text=True
    ).stdout
    lines = []
    for line in out.splitlines():
        if "==" not in line or norm(line.split("==")[0]) == "peeval":
            continue
        name, version = line.split("==", 1)
        lines.append(f"{name}=={version.split('+', 1)[0]}")
    return sorted(lines, key=str.lower)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m peeval.install.lock", description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--against", metavar="LOCK", help="print installed vs locked versions of the key packages")
    group.add_argument("--write", metavar="LOCK", help="write the running environment's versions as the lock")
    args = ap.parse_args(argv)
    if args.write:
        from datetime import date

        made = f"# Made {date.today()} on Python {sys.version_info.major}.{sys.version_info.minor}: make lock"
        with open(args.write, "w", encoding="utf-8") as f:
            f.write("\n".join([*HEADER, made, *freeze()]) + "\n")
        print(f"wrote {args.write} and {write_cuda_lock(args.write)}")
        return 0
    try:
        lock = read_lock(args.against)
    except OSError as e:
        print(f"--against: cannot read {args.against}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"{'package':<18}{'locked':<12}installed")
    for k in KEY_PACKAGES:
        print(f"{k:<18}{lock.get(k, '-'):<12}{installed(k) or '-'}")
    for line in outside_tested():
        print(f"note: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
