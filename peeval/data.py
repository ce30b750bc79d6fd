"""Dataset resolution: offline mirror first, then the Hugging Face hub, else one clear error.

The mirror root is ``$PEEVAL_DATA_MIRROR``, defaulting to ``../shared/data`` beside the
repository when that exists (SPEC 8). A hub id ``org/name`` is looked up as
``<mirror>/hf/org/name``; corpora that stand in for a hub dataset are mapped in ``LOCAL``.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

#: hub datasets the mirror replaces with a local corpus of the same schema
LOCAL = {
    "deepmind/pg19": "local/gutenberg-eval",
    "hoskinson-center/proof-pile": "local/stacks-project",
}


def configured_mirror() -> Path | None:
    """The mirror the user named (``$PEEVAL_DATA_MIRROR``; the pipeline sets it from params.yaml's
    data.root): the only one lm-eval's *own* tasks are ever routed through."""
    env = os.environ.get("PEEVAL_DATA_MIRROR")
    return Path(env) if env else None


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


def mirror_configs(folder: Path) -> list[str] | None:
    """Config names declared in a mirror folder's README (``configs: - config_name: X``), or None."""
    readme = folder / "README.md"
    if not readme.is_file():
        return None
    names = re.findall(r"^\s*-\s*config_name:\s*[\"']?([^\"'\s]+)", readme.read_text(encoding="utf-8"), flags=re.M)
    return names or None


def mirror_path(hub_id: str, name: str | None = None) -> Path | None:
    """The mirror folder for a hub id (or a ``local/...`` name), if it is there and, when
    ``name`` is given, declares that config (a partial mirror lacks some configs)."""
    root = mirror_root()
    if root is None:
        return None
    for rel in (LOCAL.get(hub_id), f"hf/{hub_id}", hub_id if hub_id.startswith("local/") else None):
        if rel and (root / rel).is_dir():
            configs = mirror_configs(root / rel)
            if name and configs is not None and name not in configs:
                return None
            return root / rel
    return None


def load_dataset(hub_id: str, name: str | None = None, split: str | None = None, **kwargs):
    """``datasets.load_dataset`` from the mirror, else the hub; a clear error if neither has it."""
    import datasets

    local = mirror_path(hub_id, name)
    if local is not None:
        return datasets.load_dataset(str(local), name, split=split, **kwargs)
    try:
        return datasets.load_dataset(hub_id, name, split=split, **kwargs)
    except Exception as e:
        if not is_not_found(e):
            raise  # a bad split, a cast error, a bug: the library's own error, with its cause
        raise _not_found(hub_id, name, e) from e


def _not_found_types() -> tuple[type[BaseException], ...]:
    """Exceptions that mean 'this dataset/config/file does not exist' or 'the hub cannot be reached'."""
    kinds: list[type[BaseException]] = [FileNotFoundError, ConnectionError, TimeoutError]
    try:
        from huggingface_hub import errors as hub

        kinds += [hub.RepositoryNotFoundError, hub.RevisionNotFoundError, hub.EntryNotFoundError]
    except ImportError:
        pass
    for mod in ("httpx", "httpx2", "requests"):  # whichever HTTP client the installed hub uses
        try:
            lib = importlib.import_module(mod)
        except ImportError:
            continue
        for attr in ("TransportError", "ConnectionError", "Timeout"):
            if isinstance(getattr(lib, attr, None), type):
                kinds.append(getattr(lib, attr))
    return tuple(kinds)


def is_not_found(error: BaseException) -> bool:
    """Whether ``error`` (or an exception it was raised from) is a genuine not-found or offline error."""
    kinds = _not_found_types()
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, kinds):
            return True
        seen.add(id(e))
        e = e.__cause__
    return False


def _not_found(hub_id: str, name: str | None, error: Exception) -> FileNotFoundError:
    root = mirror_root()
    where = f"the mirror {root}" if root else "no mirror (set PEEVAL_DATA_MIRROR)"
    return FileNotFoundError(
        f"dataset {hub_id!r}{f' ({name})' if name else ''} is neither in {where} nor reachable on the hub: {error}"
    )


def _is_peeval_task(task) -> bool:
    name = getattr(getattr(task, "config", None), "task", None)
    return isinstance(name, str) and name.startswith("peeval_")


def patch_lm_eval_tasks(task_module=None) -> None:
    """Route YAML tasks (``ConfigurableTask.download``) through the mirror: peeval's own always,
    lm-eval's own only when the user configured one (``$PEEVAL_DATA_MIRROR``).

    A task whose ``dataset_path`` is a hub id present in the mirror loads ``<mirror>/hf/<id>``
    with the task's own ``dataset_name`` and ``dataset_kwargs`` (same schema, so the task's
    prompts, ``process_docs`` and metrics run unchanged); otherwise the hub as before; if that
    fails because the dataset is missing or the hub unreachable, one ``FileNotFoundError`` naming the
    dataset (other errors propagate unchanged). Idempotent; called by the lm-eval
    import hook and by peeval's model wrappers."""
    if task_module is None:
        import lm_eval.api.task as task_module
    cls = task_module.ConfigurableTask
    if getattr(cls.download, "_peeval_mirror", False):
        return
    original = cls.download

    def download(self, dataset_kwargs=None, **kwargs):
        hub_id = getattr(self, "DATASET_PATH", None)
        if callable(getattr(self.config, "custom_dataset", None)) or not isinstance(hub_id, str) or not hub_id:
            return original(self, dataset_kwargs, **kwargs)
        if not _is_peeval_task(self) and configured_mirror() is None:  # a folder that happens to sit nearby
            return original(self, dataset_kwargs, **kwargs)  # is no reason to change what lm-eval reads
        local = mirror_path(hub_id, getattr(self, "DATASET_NAME", None)) if not Path(hub_id).exists() else None
        if local is not None:
            self.DATASET_PATH = str(local)
            try:
                return original(self, dataset_kwargs, **kwargs)
            finally:
                self.DATASET_PATH = hub_id
        try:
            return original(self, dataset_kwargs, **kwargs)
        except Exception as e:  # offline or unknown id: name the dataset; anything else is lm-eval's own error
            if not is_not_found(e):
                raise
            raise _not_found(hub_id, getattr(self, "DATASET_NAME", None), e) from e

    download._peeval_mirror = True
    download.__doc__ = original.__doc__
    cls.download = download
