"""Shared by the stage scripts: the repository root, params.yaml, and the output layout."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `leaderboard` is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

TOKENIZER = Path("checkpoints/tokenizer")
PRETRAIN = Path("checkpoints/pretrain")
DIAG = Path("checkpoints/diag")
ADAPT = Path("checkpoints/adapt")
RESULTS = Path("results")
DB = Path("leaderboard/peeval.duckdb")
SITE = Path("leaderboard/site")


def params() -> dict[str, Any]:
    """params.yaml (the active profile), read from the directory DVC runs the stage in."""
    path = Path("params.yaml")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SystemExit(f"{path.resolve()}: cannot read the pipeline parameters ({e})") from e


def use_mirror() -> Path:
    """Point the package at the mirror DVC watches (params.yaml `data.root`, relative to the
    repository), so that what a stage reads is what `dvc status` checks."""
    root = (ROOT / str(params().get("data", {}).get("root", "../shared/data"))).resolve()
    env = os.environ.get("PEEVAL_DATA_MIRROR")
    if env and Path(env).resolve() != root:
        raise SystemExit(
            f"PEEVAL_DATA_MIRROR={env} but params.yaml data.root names {root}: the pipeline reads and "
            "watches data.root, so set it to the same folder (or unset PEEVAL_DATA_MIRROR)"
        )
    os.environ["PEEVAL_DATA_MIRROR"] = str(root)
    return root


def entry(p: dict, section: str, key: str) -> dict:
    try:
        return p[section][key]
    except (KeyError, TypeError):
        raise SystemExit(f"params.yaml: no {section}.{key} (known: {sorted(p.get(section) or {})})") from None


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read ({e})") from e
