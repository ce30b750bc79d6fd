"""pyproject's extras at the point of use: a command that needs a package the core install does not
bring (``pip install peeval`` gives the lm-eval plugin, training and evaluation) says which extra to
install, in one line, before it writes anything."""

from __future__ import annotations

import importlib.util

#: the package each extra's import name comes from (pyproject.toml [project.optional-dependencies])
EXTRA_OF = {
    "peft": "adapt",
    "gguf": "adapt",
    "rouge_score": "scrolls",
    "duckdb": "pipeline",
    "dvc": "pipeline",
    "liger_kernel": "cuda",
}


class MissingExtra(ValueError):
    """A command needs an optional package that is not installed (one line, exit 2)."""


def require(what: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` naming the extra when one of ``modules`` cannot be imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        extras = ",".join(sorted({EXTRA_OF[m] for m in missing}))
        raise MissingExtra(f"{what} needs {', '.join(missing)}, not installed: pip install 'peeval[{extras}]'")
