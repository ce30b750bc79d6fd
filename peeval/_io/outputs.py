"""The output policy of every command that writes (``--out``, ``--json``, ``--md``, ``--summary``, ``--db``,
publish, export, train): a command replaces only a file or folder of its own kind, recognised by its content
(a DuckDB store by its header, a JSON file by parsing, a published profile by its SOURCE.json, an export by
its model card), and never writes into or over one of its own inputs. Anything else is refused with one line
(:class:`OutputRefused`, a ValueError: exit 2) before anything is written. A leaf module (no third-party
imports) beside ``_io``, which does the atomic writing itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

#: a file larger than this is not a JSON report or a markdown table a command wrote (weights, a store)
_TEXT_LIMIT = 64 << 20


class OutputRefused(ValueError):
    """An output names something the command may not replace (one line, exit 2)."""


def is_duckdb(path: Path) -> bool:
    """A DuckDB database file (its header holds ``DUCK`` at byte 8)."""
    try:
        with open(path, "rb") as f:
            return f.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def _text(path: Path) -> str | None:
    try:
        if path.stat().st_size > _TEXT_LIMIT:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_json(path: Path) -> bool:
    """A JSON document (a report, a summary); an empty file counts (a write interrupted before it began)."""
    text = _text(path)
    if text is None:
        return False
    if not text.strip():
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


#: the first line of a markdown table a command writes: its manifest (the sha256 of the rest of the file)
_MD_STAMP = "<!-- written by peeval ({}); replaced by its next run: edit a copy. sha256 {} -->"
_MD_STAMP_RE = re.compile(r"<!-- written by peeval \(([^()\n]*)\); replaced by its next run: edit a copy\. "
                          r"sha256 ([0-9a-f]{64}) -->")  # fmt: skip


def stamp_markdown(body: str, writer: str) -> str:
    """``body`` (a markdown table) under the line that proves it is the output of ``writer`` (``peeval bench
    --md``): the hash of what follows it, so a file the user wrote or edited is never taken for one."""
    return _MD_STAMP.format(writer, hashlib.sha256(body.encode()).hexdigest()) + "\n" + body


def is_markdown(path: Path) -> bool:
    """A markdown table a command wrote (:func:`stamp_markdown`), unchanged since, or an empty file: a user's notes,
    even ones holding a table, are not one."""
    text = _text(path)
    if text is None:
        return False
    if not text.strip():
        return True
    first, _, body = text.partition("\n")
    m = _MD_STAMP_RE.fullmatch(first)
    return m is not None and hashlib.sha256(body.encode()).hexdigest() == m.group(2)


def _json_doc(path: Path):
    text = _text(path)
    if text is None:
        return None
    try:
        return json.loads(text) if text.strip() else ...
    except ValueError:
        return None


def is_bench_report(path: Path) -> bool:
    """A report of ``peeval bench`` (``{"header", "rows"}``) or ``python -m peeval.bench.forward`` (a list of rows with
    an
    ``entry``), or empty: another JSON file (a results.json, a summary) is not one."""
    doc = _json_doc(path)
    if doc is ...:
        return True
    if isinstance(doc, dict):
        return set(doc) == {"header", "rows"}
    return isinstance(doc, list) and all(isinstance(r, dict) and "entry" in r for r in doc)


def is_claims_summary(path: Path) -> bool:
    """The claims stage's verdict counts (``{"comparisons": N, <verdict>: n, ...}``), or empty."""
    doc = _json_doc(path)
    return doc is ... or (isinstance(doc, dict) and "comparisons" in doc)


#: file kinds an output may replace, by name: (test, what the error calls it)
FILE_KINDS: dict[str, tuple[Callable[[Path], bool], str]] = {
    "json": (is_json, "a JSON file"),
    "bench": (is_bench_report, "a bench report"),
    "claims-summary": (is_claims_summary, "a claims summary"),
    "markdown": (is_markdown, "a markdown table"),
    "duckdb": (is_duckdb, "a DuckDB database"),
}


def _describe(path: Path) -> str:
    if path.is_dir():
        return "a folder"
    if is_duckdb(path):
        return "a DuckDB database"
    if is_json(path):
        return "a JSON file"
    return "a text file" if _text(path) is not None else "a binary file"


#: the manifest a folder writer leaves in its folder: who wrote it and the sha256 of every file it wrote
MANIFEST = ".peeval-manifest.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _tree(folder: Path) -> tuple[list[str], list[str]]:
    """(files, folders) under ``folder``, relative, as posix paths; a symbolic link counts as a file."""
    files, dirs = [], []
    for p in folder.rglob("*"):
        (dirs if p.is_dir() and not p.is_symlink() else files).append(p.relative_to(folder).as_posix())
    return sorted(files), sorted(dirs)


def write_manifest(folder: str | os.PathLike, writer: str) -> None:
    """Record in ``folder`` (a finished output, before it is swapped in) every file in it and its sha256: the
    proof :func:`is_own_folder` asks for before the next run of ``writer`` may replace the folder."""
    folder = Path(folder)
    files = {f: _sha256(folder / f) for f in _tree(folder)[0] if f != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"written_by": writer, "files": files}, indent=1) + "\n")


def is_own_folder(folder: str | os.PathLike, writer: str) -> bool:
    """``folder`` is exactly what ``writer`` left (:func:`write_manifest`): every file listed, unchanged (its
    sha256), none added (a ``.git/``, a user's note, even an empty folder); never judged by a name or a README."""
    folder = Path(folder)
    doc = _json_doc(folder / MANIFEST)
    if not isinstance(doc, dict) or doc.get("written_by") != writer or not isinstance(doc.get("files"), dict):
        return False
    listed: dict = doc["files"]
    files, dirs = _tree(folder)
    if sorted(f for f in files if f != MANIFEST) != sorted(listed):
        return False
    parents = {str(q) for f in listed for q in Path(f).parents}
    if any(d not in parents for d in dirs) or any((folder / f).is_symlink() for f in listed):
        return False
    return all(_sha256(folder / f) == h for f, h in listed.items())


#: the names of a run folder's own bookkeeping, never a file the run produced: its manifest, a writer's claim
#: (``.peeval-*.lock``), the folders ``--overwrite`` and the atomic saves stage files in
_BOOKKEEPING = re.compile(r"^\.(peeval-manifest\.json|peeval[\w-]*\.lock|overwritten-\d+|save-\w+)$")


def _run_files(folder: Path) -> list[str]:
    """The files a run left under ``folder`` (relative posix paths), its bookkeeping left out."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if any(_BOOKKEEPING.match(part) for part in rel.parts) or (p.is_dir() and not p.is_symlink()):
            continue
        out.append(rel.as_posix())
    return sorted(out)


def start_manifest(folder: str | os.PathLike, writer: str) -> bool:
    """Mark ``folder`` as being written by ``writer`` before its first file (an unfinished manifest, no files):
    a run killed before it finished is still recognised as ``writer``'s by :func:`is_written_by`. Returns
    False (and writes nothing) when ``folder`` already holds ``writer``'s manifest (a resumed run)."""
    folder = Path(folder)
    if isinstance(doc := _json_doc(folder / MANIFEST), dict) and doc.get("written_by") == writer:
        return False
    from . import atomic_write_text

    atomic_write_text(folder / MANIFEST, json.dumps({"written_by": writer, "finished": False, "files": {}}) + "\n")
    return True


def _top_matching(folder: Path, patterns: tuple[str, ...]) -> list[str]:
    return [f for f in _run_files(folder) if "/" not in f and any(Path(f).match(g) for g in patterns)]


def finish_manifest(folder: str | os.PathLike, writer: str, patterns: tuple[str, ...]) -> None:
    """Record in ``folder`` every file ``writer``'s run wrote there (the files of ``folder`` matching ``patterns``,
    what the run writes) and its sha256; a user's files beside them are not listed (not the run's)."""
    from . import atomic_write_text

    folder = Path(folder)
    files = {f: _sha256(folder / f) for f in _top_matching(folder, patterns)}
    doc = {"written_by": writer, "finished": True, "files": files}
    atomic_write_text(folder / MANIFEST, json.dumps(doc, indent=1) + "\n")


def is_written_by(folder: str | os.PathLike, writer: str, replaced: tuple[str, ...] = ()) -> bool:
    """``folder`` holds ``writer``'s manifest (:func:`start_manifest` / :func:`finish_manifest`), every file it
    lists is unchanged (its sha256) or gone, and no file it does not list matches ``replaced`` (the patterns the
    next run moves aside or writes over): a user's file there is never taken for the run's. Files the user added
    beside them (a note) do not matter: the next run never touches them."""
    folder = Path(folder)
    doc = _json_doc(folder / MANIFEST)
    if not isinstance(doc, dict) or doc.get("written_by") != writer or not isinstance(doc.get("files"), dict):
        return False
    listed: dict = doc["files"]
    for f, h in listed.items():
        p = folder / f
        if p.is_symlink() or (p.exists() and (not p.is_file() or _sha256(p) != h)):
            return False
    return not any(f not in listed for f in _top_matching(folder, replaced))


def holds_nothing_of(folder: str | os.PathLike, patterns: tuple[str, ...]) -> bool:
    """``folder`` holds no manifest (no other command's output) and no file a run writing ``patterns`` would
    replace: writing there takes nothing from anyone (a folder holding only a user's data or notes)."""
    folder = Path(folder)
    return not (folder / MANIFEST).exists() and not _top_matching(folder, patterns)


def overlap(out: Path, inputs: Iterable[str | os.PathLike | None], folder: bool = False) -> Path | None:
    """The input ``out`` is, lies inside, or (a folder output, replaced whole) holds; None if none. An input that
    does not exist is none (its own error names it)."""
    o = Path(out).resolve()
    for i in inputs:
        if i is None or str(i) == "" or not Path(i).exists():
            continue
        p = Path(i).resolve()
        if o == p or o.is_relative_to(p) or (folder and p.is_relative_to(o)):
            return Path(i)
    return None


def check_output_file(path: str | os.PathLike, option: str, kind: str, inputs: Iterable = ()) -> Path:
    """Refuse (:class:`OutputRefused`) writing ``path`` as ``kind`` (a key of :data:`FILE_KINDS`) when it is, or
    lies in, one of ``inputs``, or exists and is not a file of that kind; returns ``path``."""
    path = Path(path)
    test, what = FILE_KINDS[kind]
    if (hit := overlap(path, inputs)) is not None:
        raise OutputRefused(f"{option} {path}: is or lies inside the input {hit}; write it elsewhere")
    if path.is_symlink() and not path.exists():
        raise OutputRefused(f"{option} {path}: a broken symbolic link; remove it or choose another path")
    if path.exists() and (path.is_dir() or not test(path)):
        raise OutputRefused(
            f"{option} {path}: exists and is {_describe(path)}, not {what} this command writes; it is never "
            "replaced (remove it or choose another path)"
        )
    return path


def check_output_dir(
    path: str | os.PathLike,
    option: str,
    own: Callable[[Path], bool],
    what: str,
    inputs: Iterable = (),
    whole: bool = True,
) -> Path:
    """Refuse (:class:`OutputRefused`) writing the folder ``path`` when it is or lies in one of ``inputs`` (or, when
    it is replaced ``whole``, holds one), or exists, is not empty and is not ``what`` (``own(path)`` false);
    returns ``path``."""
    path = Path(path)
    if (hit := overlap(path, inputs, folder=whole)) is not None:
        held = ", lies inside or holds" if whole else " or lies inside"
        raise OutputRefused(f"{option} {path}: is{held} the input {hit}; write it elsewhere")
    if (whole and path.is_symlink()) or (path.exists() and not path.is_dir()):  # a link replaced whole: its target
        raise OutputRefused(f"{option} {path}: exists and is not a folder{' (a symbolic link)' * path.is_symlink()}")
    if path.is_dir() and any(path.iterdir()) and not own(path):
        shown = ", ".join(sorted(p.name for p in path.iterdir())[:3])
        raise OutputRefused(
            f"{option} {path}: holds files that are not {what} ({shown}); it is never replaced (move them out or "
            "choose another folder)"
        )
    return path
