"""Dataset resolution: offline mirror first, then the Hugging Face hub, else one clear error.

The mirror root is ``$PEEVAL_DATA_MIRROR``, defaulting to ``../shared/data`` beside the
repository when that exists (SPEC 8). A hub id ``org/name`` is looked up as
``<mirror>/hf/org/name``; corpora that stand in for a hub dataset are mapped in ``LOCAL``.

It also records what each task read (:func:`recording`): the source (``mirror``, ``hub``, ``local``
for a folder given by path, ``generated``), where (mirror folder relative to the mirror root, hub id,
folder, generator), the hub commit where the hub tells it (for a mirror folder that ``peeval data``
downloaded: the source and commit the data lock records, peeval.data.lock.fetched_from), and the sha256 of the documents
(:func:`documents_sha256`), so that a run on the mirror's stand-in for a dataset is never taken for a
run on the dataset itself. ``peeval eval`` writes it into results.json (``peeval.data``).

The package owns the data: this resolver (the package itself, so ``from peeval.data import ...`` and an
installed ``.pth`` hook keep working), ``sources.py`` (``peeval data``: the mirror folders a profile reads,
verified against ``manifest.json`` or downloaded), ``rebuild.py`` (folders rebuilt from public files) and
``lock.py`` (data.lock.json). Row 2 of the layer table (docs/design.md): ``_io``, ``_log``, ``settings``; never the
models, the tasks or anything above.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from .._log import muted

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
    for base in (Path(__file__).resolve().parent.parent.parent, Path.cwd()):
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


def content_cache_dir(folder: Path) -> str:
    """Where ``datasets`` caches what it builds from the mirror folder ``folder``: a folder of datasets' cache named
    by the sha256 of every file's path and bytes. datasets keys a local folder by its path and files' modification
    times, so a changed copy with the old times (``cp -p``, a restored backup) was read from the stale cache
    (ppl 301.36 instead of 303.51); a mirror folder is a few MB, hashed in milliseconds."""
    import datasets

    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return str(Path(datasets.config.HF_DATASETS_CACHE) / "peeval-mirror" / h.hexdigest()[:32])


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


@dataclasses.dataclass(frozen=True)
class HubCopy:
    """A dataset's files on the hub in a form ``datasets`` 5 reads with a packaged builder, at a pinned commit: the
    way to a dataset whose own repository is a loading script that datasets 5 refuses ("Dataset scripts are no
    longer supported"). ``file`` is fetched with ``hf_hub_download`` (cached per commit, verified, offline from
    the cache); ``member``, for a zip file, is the JSON-lines member read. ``{name}`` in either becomes the
    config name, ``{split}`` the split."""

    repo: str
    revision: str
    builder: str  # "parquet" | "json"
    file: str
    member: str | None = None


#: the commit a file fetched with ``hf_hub_download`` was resolved at (``.../snapshots/<commit>/<file>``)
_SNAPSHOT = re.compile(r"[/\\]snapshots[/\\]([0-9a-f]{40})[/\\]")


_PG19_TEST = "data/test-00000-of-00001-29a571947c0b5ccc.parquet"  # PG-19's 100 test books, as both copies name it
#: corpus -> {repository: its split in files datasets 5 reads}, the first the default; each pinned to a commit
#: whose tree lists that file (PG-19: short_book_title, publication_date, url, text; proof-pile: text, meta)
HUB_COPIES = {
    "pg19": {
        "emozilla/pg19-test": HubCopy("emozilla/pg19-test", "c5e39bf32e33f9111323aa68d7d9000d22722035", "parquet",
                                      _PG19_TEST),
        "emozilla/pg19": HubCopy("emozilla/pg19", "c021754c8e01c5b1cc83a1f549c1f97fbbb756b8", "parquet", _PG19_TEST),
    },
    "proof_pile": {
        "dwzhu/PoSE-Datasets": HubCopy("dwzhu/PoSE-Datasets", "1f90fc715d30dfb18e1fa535e2f790a9f890a6e4", "json",
                                       "proof-pile/test.jsonl"),
        "hoskinson-center/proof-pile": HubCopy("hoskinson-center/proof-pile",
                                               "231bd79af7079c268b5825a95b08f41d8eac4737", "json",
                                               "test/proofpile_test.jsonl.gz"),
    },
    # SCROLLS' own files: ``<task>.zip`` holds ``<task>/{train,validation,test}.jsonl`` (id, pid, input, output), all
    # seven at the commit that uploaded them together
    "scrolls": {
        "tau/scrolls": HubCopy("tau/scrolls", "fd1aa83070c138b7b7f381388d3b59f1f70a0fa7", "json", "{name}.zip",
                               "{name}/{split}.jsonl"),
    },
}  # fmt: skip


def _zip_member(archive: str, member: str) -> str:
    """``member`` of the zip file ``archive`` as a plain file (extracted once, beside datasets' cache): datasets
    reads a ``zip://member::path`` URL through its remote-file layer, which offline mode refuses even for a
    file in the local hub cache."""
    import zipfile

    import datasets

    from .._io import atomic_write_bytes

    key = hashlib.sha256(f"{Path(archive).resolve()}\n{member}".encode()).hexdigest()[:16]
    out = Path(datasets.config.HF_DATASETS_CACHE) / "peeval-zip-members" / key / Path(member).name
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as z, z.open(member) as src:
            atomic_write_bytes(out, src.read())  # a reader never sees half a file
    return str(out)


def _load_copy(hub_id: str, name: str | None, split: str, copy: HubCopy):
    import datasets
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(copy.repo, copy.file.format(name=name), repo_type="dataset", revision=copy.revision)
    except Exception as e:
        if not is_not_found(e):
            raise
        raise _not_found(hub_id, name, e) from e  # the hub's error names the copy's repository, commit and file
    source = _zip_member(path, copy.member.format(name=name, split=split)) if copy.member else path
    ds = datasets.load_dataset(copy.builder, data_files={split: source}, split=split)
    found = _SNAPSHOT.search(path)
    _note(_read_of(copy.repo, name, split, found[1] if found else copy.revision, ds))
    return ds


def load_dataset(
    hub_id: str,
    name: str | None = None,
    split: str | None = None,
    *,
    copy: HubCopy | None = None,
    mirror: bool = True,
    **kwargs,
):
    """``datasets.load_dataset`` from the mirror, else the hub; a clear error if neither has it.
    ``copy``: where the hub serves ``hub_id`` (a loading-script repository) as files datasets 5 reads; it is
    recorded as read from its repository at the commit the hub resolved. ``mirror=False``: the hub only (a copy
    the user chose by name is never replaced by the mirror's stand-in). What was read is recorded for the task
    being built (:func:`recording`)."""
    import datasets

    local = mirror_path(hub_id, name) if mirror else None
    if local is None and copy is not None:
        return _load_copy(hub_id, name, split, copy)
    if local is not None:
        kwargs.setdefault("cache_dir", content_cache_dir(local))
        ds = datasets.load_dataset(str(local), name, split=split, **kwargs)
        _note(_read_of(str(local), name, split, kwargs.get("revision"), ds))
        return ds
    try:
        ds = datasets.load_dataset(hub_id, name, split=split, **kwargs)
    except Exception as e:
        if not is_not_found(e):
            raise  # a bad split, a cast error, a bug: the library's own error, with its cause
        raise _not_found(hub_id, name, e) from e
    _note(_read_of(hub_id, name, split, kwargs.get("revision"), ds))
    return ds


# ----------------------------------------------------------------------------- what a task read
_record: dict[str, list[dict]] | None = None  # task -> its reads, while recording
_task: str | None = None  # the task being built


@contextlib.contextmanager
def recording() -> Iterator[dict[str, list[dict]]]:
    """Collect, per task, what the tasks built inside read: ``{task: [read, ...]}``, each read
    ``{source, location, config, split, revision, documents, documents_sha256, params}``."""
    global _record
    outer, _record = _record, {}
    try:
        yield _record
    finally:
        _record = outer


@contextlib.contextmanager
def reading(task: str | None) -> Iterator[None]:
    """What is loaded inside is recorded as read by ``task``."""
    global _task
    outer, _task = _task, task
    try:
        yield
    finally:
        _task = outer


def _note(read: dict) -> None:
    if _record is not None and _task is not None:
        _record.setdefault(_task, []).append(read)


def _reads_of(task: str | None) -> list[dict]:
    return _record.get(task, []) if _record is not None and task is not None else []


def documents_sha256(docs: Iterable) -> str:
    """sha256 of documents in order: each one's UTF-8 text (a row: its JSON, keys sorted), preceded
    by its length in bytes (8 bytes, big-endian), so that moving a boundary between two documents
    changes it too."""
    h = hashlib.sha256()
    for d in docs:
        text = d if isinstance(d, str) else json.dumps(d, sort_keys=True, ensure_ascii=False, default=str)
        b = text.encode("utf-8")
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()


def record_documents(texts: list[str]) -> None:
    """The documents a task scores when it scores fewer than it loaded (peeval_ppl: the first
    ``max_docs``): their count and hash replace those of the rows its last read loaded."""
    reads = _reads_of(_task)
    if reads:
        reads[-1].update(documents=len(texts), documents_sha256=documents_sha256(texts))


def _rows(ds) -> tuple[int, str] | tuple[None, None]:
    """(count, sha256) of a Dataset's rows, or of a DatasetDict's splits in name order."""
    if ds is None:
        return None, None
    splits = [ds[k] for k in sorted(ds)] if hasattr(ds, "keys") else [ds]
    rows = [row for split in splits for row in split]
    return len(rows), documents_sha256(rows)


#: a hub dataset's commit, as the datasets cache names its folder (``.../<org>___<name>/<config>/<version>/<sha>/``)
_COMMIT = re.compile(r"/([0-9a-f]{40})/")


def _hub_commit(ds) -> str | None:
    """The hub commit a dataset was read at, where the datasets cache tells it."""
    try:
        files = ds.cache_files
    except AttributeError:
        return None
    files = [f for fs in files.values() for f in fs] if isinstance(files, dict) else files
    found = {m[1] for f in files if (m := _COMMIT.search(str(f.get("filename", ""))))}
    return found.pop() if len(found) == 1 else None


def where_read(path: str) -> tuple[str, str]:
    """(source, location) of a path or hub id ``datasets.load_dataset`` was given: a mirror folder relative
    to the mirror root, another existing folder absolute, anything else a hub id."""
    p = Path(path)
    if not p.exists():
        return "hub", path
    full, root = p.resolve(), mirror_root()
    if root is not None and full.is_relative_to(root.resolve()):
        return "mirror", full.relative_to(root.resolve()).as_posix()
    return "local", full.as_posix()


def _read_of(path: str, name: str | None, split: str | None, revision, ds, hashed: bool = True) -> dict:
    source, location = where_read(path)
    n, sha = _rows(ds) if hashed else (None, None)
    commit = (revision or _hub_commit(ds)) if source == "hub" else None
    if source == "mirror":  # a folder `peeval data` fetched: its source and commit, from the data lock
        from .lock import fetched_from

        commit = fetched_from(mirror_root().resolve(), location)
    return {"source": source, "location": location, "config": name, "split": split, "revision": commit,
            "documents": n, "documents_sha256": sha, "params": None}  # fmt: skip


#: metadata keys that are no parameter of a generator: lm-eval's own (its YAML's path: machine-dependent) and the
#: model's source, which ``peeval eval`` / lm-eval merge into every task's metadata
NOT_GENERATOR_KEYS = frozenset({"version", "config_source", "_metadata", "config", "pretrained", "gguf_file",
                                "tokenizer"})  # fmt: skip


def _generated(task, original_dataset) -> dict:
    """A custom dataset that read nothing: generated by peeval's code from the task's metadata (its seed)."""
    fn = task.config.custom_dataset
    n, sha = _rows(original_dataset)
    params = {k: v for k, v in (task.config.metadata or {}).items() if k not in NOT_GENERATOR_KEYS}
    return {"source": "generated", "location": f"{Path(str(getattr(fn, '__module__', ''))).name}."
            f"{getattr(fn, '__qualname__', getattr(fn, '__name__', 'custom_dataset'))}".lstrip("."),
            "config": None, "split": None, "revision": None, "documents": n, "documents_sha256": sha,
            "params": json.loads(json.dumps(params, default=str))}  # fmt: skip


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
    """One line: what is missing, where it was looked for, and the two ways to supply it."""
    root = mirror_root()
    where = f"the mirror {root}" if root else "a mirror (none found beside the repository)"
    why = " ".join(str(error).split()) or type(error).__name__
    local = f" or its stand-in {LOCAL[hub_id]} (what the published boards read)" if hub_id in LOCAL else ""
    return FileNotFoundError(
        f"dataset {hub_id!r}{f' ({name})' if name else ''} is neither in {where} nor reachable on the hub ({why}): "
        f"set PEEVAL_DATA_MIRROR to a mirror folder that holds it (hf/<org>/<name>){local}, or fetch the mirror "
        "with `peeval data`"
    )


def _is_peeval_task(task) -> bool:
    name = getattr(getattr(task, "config", None), "task", None)
    return isinstance(name, str) and name.startswith("peeval_")


def patch_lm_eval_tasks(task_module=None) -> None:
    """Route YAML tasks (``ConfigurableTask.download``) through the mirror: peeval's own always,
    lm-eval's own first when the user configured one (``$PEEVAL_DATA_MIRROR``), else (a mirror found
    beside the repository or working directory) only when the hub and its cache do not have the dataset.

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
        """lm-eval's download, read through the mirror and recorded (:func:`recording`)."""
        task = getattr(self.config, "task", None)
        with reading(task):
            before = len(_reads_of(task))
            out = routed(self, dataset_kwargs, **kwargs)
            if len(_reads_of(task)) == before:  # read neither through load_dataset nor the patched path
                if callable(getattr(self.config, "custom_dataset", None)):
                    _note(_generated(self, getattr(self, "dataset", None)))
                elif isinstance(getattr(self, "DATASET_PATH", None), str) and self.DATASET_PATH:
                    revision = (dataset_kwargs or getattr(self.config, "dataset_kwargs", None) or {}).get("revision")
                    name, ds = getattr(self, "DATASET_NAME", None), getattr(self, "dataset", None)
                    _note(_read_of(self._peeval_read_from, name, None, revision, ds, hashed=False))
        return out

    def routed(self, dataset_kwargs=None, **kwargs):
        hub_id = getattr(self, "DATASET_PATH", None)
        self._peeval_read_from = hub_id
        if callable(getattr(self.config, "custom_dataset", None)) and _is_peeval_task(self):
            # lm-eval's hint on every custom dataset names RULER's `max_seq_lengths`, a key peeval's tasks do not
            # read (they name their own: a misspelt one is refused with the closest); lm-eval's own tasks keep it
            with muted("lm_eval.api.task", logging.ERROR, "Custom kwargs can be passed"):
                return original(self, dataset_kwargs, **kwargs)
        if callable(getattr(self.config, "custom_dataset", None)) or not isinstance(hub_id, str) or not hub_id:
            return original(self, dataset_kwargs, **kwargs)
        name = getattr(self, "DATASET_NAME", None)
        local = mirror_path(hub_id, name) if not Path(hub_id).exists() else None
        if local is not None and (_is_peeval_task(self) or configured_mirror() is not None):
            return from_mirror(self, local, dataset_kwargs, **kwargs)
        try:
            return original(self, dataset_kwargs, **kwargs)
        except Exception as e:  # offline or unknown id: name the dataset; anything else is lm-eval's own error
            if not is_not_found(e):
                raise
            if local is None:
                raise _not_found(hub_id, name, e) from e
        # lm-eval's own task, the mirror found beside the repository / working directory but not named: a
        # folder that happens to sit nearby changes nothing while the hub (or its cache) answers (issue 32),
        # and is the fallback, as for peeval's own tasks, when it does not (offline, unreachable: issue 45)
        from .._log import log_once

        log_once(f"{getattr(self.config, 'task', None) or hub_id}: {hub_id!r} is not reachable on the hub; "
                 f"reading the mirror {local} (PEEVAL_DATA_MIRROR names a mirror to read first)")  # fmt: skip
        return from_mirror(self, local, dataset_kwargs, **kwargs)

    def from_mirror(self, local, dataset_kwargs=None, **kwargs):
        hub_id = self.DATASET_PATH
        self.DATASET_PATH = self._peeval_read_from = str(local)
        # lm-eval's own tasks too: the cache keyed by the folder's content, never a changed copy's stale rows
        dataset_kwargs = {"cache_dir": content_cache_dir(local), **(dataset_kwargs or {})}
        try:
            return original(self, dataset_kwargs, **kwargs)
        finally:
            self.DATASET_PATH = hub_id

    download._peeval_mirror = True
    download.__doc__ = original.__doc__
    cls.download = download
