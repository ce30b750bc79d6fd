"""The upstream versions peeval is tested on (the lock itself: ``peeval.install.lock``).

pyproject.toml accepts ranges (a user's own transformers is fine); ``TESTED`` says which releases
the suite actually passed on: the lock's version at the low end, the newest ``make upgrade-check``
passed on at the high end. Importing peeval with a version outside logs one line (never raises):
transformers and lm-eval change their model protocols between minor releases (transformers 5.24
renamed ``past_key_values`` to ``cache``), and a silent protocol change gives wrong numbers.
"""

from __future__ import annotations

from importlib import metadata

from .._log import logger

#: distribution -> (oldest, newest) release the suite passed on, both inclusive. Kept equal to the
#: lock's low end by tests/models/test_versions.py; move the high end after a green upgrade-check.
TESTED: dict[str, tuple[str, str]] = {
    "transformers": ("5.23.0", "5.24.0"),
    "lm_eval": ("0.4.13", "0.4.13"),
}

_said = False


def release(v: str) -> tuple[int, ...]:
    """The numeric release of a version ("5.24.0.dev0" -> (5, 24, 0), "2.13.0+cpu" -> (2, 13, 0)),
    zero-padded as PEP 440 compares releases."""
    from packaging.version import Version  # transformers' own dependency

    r = Version(v).release
    return r + (0,) * (4 - len(r))


def outside_tested(versions: dict[str, str | None] | None = None) -> list[str]:
    """One message per distribution whose installed version lies outside ``TESTED`` (none missing)."""
    out = []
    for dist, (lo, hi) in TESTED.items():
        v = versions.get(dist) if versions is not None else installed(dist)
        if v is None:
            continue
        if not release(lo) <= release(v) <= release(hi):
            span = lo if lo == hi else f"{lo} to {hi}"
            out.append(f"{dist} {v} is outside the versions peeval is tested on ({span})")
    return out


def installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def warn_if_untested() -> None:
    """Log one line (once per process) when transformers or lm-eval is outside the tested range."""
    global _said
    if _said:
        return
    _said = True
    problems = outside_tested()
    if problems:
        logger.warning(
            "peeval: %s; results may differ (peeval's constraints.txt pins the tested set)", "; ".join(problems)
        )


def cpu_identity() -> dict[str, str | None]:
    """The CPU a number was computed on and torch's CPU kernel path there (``default``, ``AVX2``, ``AVX512``;
    ``ATEN_CPU_CAPABILITY`` picks a lower one). Floats differ in their last bits between paths (summation order,
    vector width), so a rerun elsewhere reproduces numbers to a tolerance, not bit for bit (docs/reproducing.md:
    Reproducing on another CPU)."""
    import platform

    import torch

    model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    return {
        "model": model or platform.processor() or platform.machine() or None,
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
    }
