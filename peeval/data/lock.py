"""The data lock (``data.lock.json`` at the repository root, or ``$PEEVAL_DATA_LOCK``): what ``peeval data``
resolved when it downloaded a folder whose manifest source could not be pinned in advance (a hub revision
such as ``main``) or whose files depend on the installed libraries (a rebuilt parquet).

peeval owns the format (peeval.data.lock; ``format: 1``): ``folders: {<mirror folder>: {source, revision,
commit, inputs: {path: sha256}, files: {name: {bytes, sha256}}}}``. ``source`` / ``revision`` are what the
manifest asked for, ``commit`` what it resolved to; ``inputs`` the files downloaded (hub files or raw
files), ``files`` the folder as written. The first download records an entry (written atomically);
later downloads fetch ``commit`` and must find the same ``inputs``, and a folder whose files equal the
entry's counts as verified offline. Committing the lock pins the data for everyone who clones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._io import atomic_write_text


class DataError(ValueError):
    """One line: what is wrong with the manifest, an option, the lock or a downloaded file (``peeval data``)."""


LOCK_ENV = "PEEVAL_DATA_LOCK"
DEFAULT = Path(__file__).resolve().parent.parent.parent / "data.lock.json"


def lock_path() -> Path:
    return Path(os.environ.get(LOCK_ENV) or DEFAULT)


def read_lock(path: Path | None = None) -> dict[str, dict]:
    """The lock's folders ({} when there is no lock yet); a malformed lock is one line."""

    path = path or lock_path()
    what = f"data lock {path} ({LOCK_ENV})"
    if path.exists() and not path.is_file():  # a folder was ignored: every download then unrecorded
        raise DataError(f"{what}: is a folder (or not a file); name the lock's JSON file")
    if not path.is_file():
        return {}
    folders = read_folders(path, what)
    for rel, entry in folders.items():
        check_entry(entry, f"{what}: folders[{rel!r}]")
    return folders


def check_entry(entry, where: str) -> None:
    """DataError (one line naming ``where``) unless ``entry`` has the lock's shape: ``files`` {name: {bytes: int,
    sha256: hex}}, ``inputs`` {path: sha256}, strings elsewhere (a malformed entry was a TypeError)."""
    if not isinstance(entry, dict):
        raise DataError(f"{where}: an object of source, revision, commit, inputs and files")
    for k in ("source", "revision", "commit"):
        if entry.get(k) is not None and not isinstance(entry[k], str):
            raise DataError(f"{where}.{k}: a string")
    inputs, files = entry.get("inputs", {}), entry.get("files", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise DataError(f"{where}.inputs: an object of path: sha256")
    if not isinstance(files, dict) or not all(
        isinstance(f, dict) and type(f.get("bytes")) is int and isinstance(f.get("sha256"), str) for f in files.values()
    ):
        raise DataError(f"{where}.files: an object of name: {{bytes: <integer>, sha256: <hex>}}")


def read_folders(path: Path, what: str) -> dict[str, dict]:
    """``folders`` of a ``{format: 1, folders: {...}}`` JSON file (the data lock, the manifest); an unreadable
    or malformed file is one DataError starting with ``what``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{what}: cannot read ({e})") from None
    if not isinstance(data, dict) or data.get("format") != 1 or not isinstance(data.get("folders"), dict):
        raise DataError(f"{what}: a JSON object with format: 1 and folders: {{...}}")
    return data["folders"]


def locked(rel: str, source: str, revision: str, path: Path | None = None) -> dict | None:
    """The lock entry of ``rel`` when it was made from the same source and requested revision."""
    entry = read_lock(path).get(rel)
    if isinstance(entry, dict) and entry.get("source") == source and entry.get("revision") == revision:
        return entry
    return None


def record(rel: str, entry: dict, path: Path | None = None) -> None:
    """Add or replace ``rel``'s entry, atomically."""
    path = path or lock_path()
    folders = read_lock(path) | {rel: entry}
    doc = {"format": 1, "about": "peeval data's lock (format: peeval/data/lock.py)",
           "folders": dict(sorted(folders.items()))}  # fmt: skip
    try:
        atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        raise DataError(f"data lock {path} ({LOCK_ENV}): cannot write ({e}): nothing kept") from None


def fetched_from(root: Path, rel: str) -> str | None:
    """``<source>@<commit>`` (e.g. ``github stacks/stacks-project@4ac4…``) when ``<root>/<rel>`` holds exactly the
    files the data lock recorded for the folder: a run reading it cites what ``peeval data`` fetched it from
    (the store's ``task_data.revision``). None when the lock has no entry, cannot be read (``peeval data`` says
    why), or the folder is not that download (e.g. the original mirror)."""
    import hashlib

    try:
        entry = read_lock().get(rel)
    except ValueError:
        return None
    files = entry.get("files") if isinstance(entry, dict) else None
    if not isinstance(files, dict) or not files or not entry.get("commit"):
        return None
    for name, f in files.items():
        p = Path(root) / rel / name
        if not p.is_file() or p.stat().st_size != f.get("bytes"):
            return None
        if hashlib.sha256(p.read_bytes()).hexdigest() != f.get("sha256"):
            return None
    return f"{entry['source']}@{entry['commit']}"
