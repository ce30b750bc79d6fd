"""Dataset resolution: offline mirror first, then the Hugging Face hub, else one clear error.

The mirror root is ``$PEEVAL_DATA_MIRROR``, defaulting to ``../shared/data`` beside the
repository when that exists (SPEC 8). A hub id ``org/name`` is looked up as
``<mirror>/hf/org/name``; corpora that stand in for a hub dataset are mapped in ``LOCAL``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: hub datasets the mirror replaces with a local corpus of the same schema
LOCAL = {
    "deepmind/pg19": "local/gutenberg-eval",
    "hoskinson-center/proof-pile": "local/stacks-project",
}


def mirror_root() -> Path | None:
    env = os.environ.get("PEEVAL_DATA_MIRROR")
    if env:
        return Path(env)
    # the repository root (editable install), else the working directory's parent
    for base in (Path(__file__).resolve().parent.parent, Path.cwd()):
        default = base.parent / "shared" / "data"
        if default.is_dir():
            return default
    return None


def mirror_path(hub_id: str) -> Path | None:
    """The mirror folder for a hub id (or a ``local/...`` name), if it is there."""
    root = mirror_root()
    if root is None:
        return None
    for rel in (LOCAL.get(hub_id), f"hf/{hub_id}", hub_id if hub_id.startswith("local/") else None):
        if rel and (root / rel).is_dir():
            return root / rel
    return None


def load_dataset(hub_id: str, name: str | None = None, split: str | None = None, **kwargs):
    """``datasets.load_dataset`` from the mirror, else the hub; a clear error if neither has it."""
    import datasets

    local = mirror_path(hub_id)
    if local is not None:
        return datasets.load_dataset(str(local), name, split=split, **kwargs)
    try:
        return datasets.load_dataset(hub_id, name, split=split, **kwargs)
    except Exception as e:
        root = mirror_root()
        where = f"the mirror {root}" if root else "no mirror (set PEEVAL_DATA_MIRROR)"
        raise FileNotFoundError(
            f"dataset {hub_id!r}{f' ({name})' if name else ''} is neither in {where} nor reachable on the hub: {e}"
        ) from e
