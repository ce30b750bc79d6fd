"""Atomic file writes for the whole repository (peeval, pipelines, leaderboard).

A reader (a DVC stage, ingest, a resumed run, a browser) sees the old file or the new one, never
half of one: everything is written beside its target and moved over it by ``os.replace``
(atomic on one file system). A leaf module with no third-party imports, so that ``leaderboard``
can use it without importing torch.

As a package it also owns ``outputs.py``: the output policy of every command that writes (a command
replaces only a file or folder of its own kind). Row 1 of the layer table (docs/design.md): the standard library
and ``peeval._log`` only.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path


def finite(value, infinity: str | None = None):
    """``value`` with every non-finite float as None (JSON has no NaN or infinity); with ``infinity``
    (e.g. ``"inf"``), ±inf as that string (``"-inf"``) instead, NaN still None."""
    if isinstance(value, float) and not math.isfinite(value):
        if infinity is None or math.isnan(value):
            return None
        return infinity if value > 0 else f"-{infinity}"
    if isinstance(value, dict):
        return {k: finite(v, infinity) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, infinity) for v in value]
    return value


def dumps_json(value, *, infinity: str | None = None, **kw) -> str:
    """``json.dumps`` that always writes valid JSON: a non-finite float is written as null, or ±inf as
    the string ``infinity`` (Python's ``json`` would write ``NaN`` / ``Infinity``, which no other JSON
    reader accepts)."""
    return json.dumps(finite(value, infinity), allow_nan=False, **kw)


def tmp_path(path: str | os.PathLike) -> Path:
    """Where ``atomic_write`` stages ``path`` (``<name>.tmp`` beside it; a crash can leave it behind)."""
    path = Path(path)
    return path.with_name(path.name + ".tmp")


def named(e: OSError, path: str | os.PathLike) -> OSError:
    """``e`` naming ``path`` when it names no file (``write()`` on a full disk says only "No space left")."""
    if e.filename:
        return e
    return type(e)(e.errno, e.strerror or str(e), str(path)) if e.errno else e


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` a file beside ``path`` (parents created), then move it over ``path``; on any
    failure (a full disk, Ctrl-C) the temporary is removed and ``path`` is as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise named(e, path) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """``path`` holds ``text`` (UTF-8), or what it held before."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """``path`` holds ``data``, or what it held before."""
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def save_dir_atomically(out_dir: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """``write(tmp_dir)`` into a fresh folder beside ``out_dir``, then move its files in by rename,
    so a reader never sees a half-written model or tokenizer (other files of ``out_dir`` stay)."""
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".save-", dir=out_dir))
    try:
        write(tmp)
        public_modes(tmp)
        for f in sorted(tmp.iterdir()):
            os.replace(f, out_dir / f.name)
    except OSError as e:
        raise named(e, out_dir) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if created and not any(out_dir.iterdir()):  # a failed first save leaves no empty folder
            out_dir.rmdir()


def replace_files(out_dir: str | os.PathLike, files: dict[str, str], stale=()) -> None:
    """Write ``files`` (name -> UTF-8 text) into a temporary folder beside ``out_dir``; only once every
    one is written, delete the ``stale`` paths and move the new files in, in order (renames: they need
    no disk space). A failure while writing (a full disk, Ctrl-C) leaves ``out_dir`` exactly as it was
    and no temporary file: a failed ``--overwrite`` keeps the old run."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-new-", dir=out_dir.parent))
    try:
        for name, text in files.items():
            try:
                (tmp / name).write_text(text, encoding="utf-8")
            except OSError as e:
                raise named(e, out_dir / name) from e
        out_dir.mkdir(exist_ok=True)
        for p in stale:
            Path(p).unlink(missing_ok=True)
        for name in files:
            os.replace(tmp / name, out_dir / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def files_aside(folder: str | os.PathLike, patterns: tuple[str, ...]):
    """Move the files (and folders: a run's ``step0`` control) of ``folder`` matching ``patterns`` into a hidden
    folder beside them for the duration of the block: deleted when it ends, moved back (over anything written
    meanwhile) when it raises. What ``--overwrite`` replaces survives a failed replacement."""
    folder = Path(folder)
    aside = folder / f".overwritten-{os.getpid()}"
    moved = []
    for pat in patterns:
        for f in sorted(folder.glob(pat)) if folder.is_dir() else []:
            if f.is_file() or (f.is_dir() and not f.is_symlink()):
                aside.mkdir(exist_ok=True)
                try:
                    os.replace(f, aside / f.name)
                except FileNotFoundError:  # another process of a launch moved it first
                    continue
                moved.append(f.name)
    try:
        yield
    except BaseException:
        for name in moved:
            if (folder / name).is_dir() and not (folder / name).is_symlink():
                shutil.rmtree(folder / name)  # a folder the failed run wrote meanwhile: os.replace needs it gone
            os.replace(aside / name, folder / name)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)  # read it: os.umask only reads by setting
    os.umask(mask)
    return mask


def public_modes(folder: str | os.PathLike) -> None:
    """Give each private file under ``folder`` (mode 0600: transformers writes ``model.safetensors`` through a
    temporary file) the mode a plain ``open(..., "w")`` would (0666 less the umask): weights, an export, a profile
    are meant to be read as any file the user writes is."""
    mode = 0o666 & ~_umask()
    for p in Path(folder).rglob("*"):
        if not p.is_symlink() and p.is_file() and p.stat().st_mode & 0o777 == 0o600 != mode:
            os.chmod(p, mode)


def replace_dir(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Swap the finished folder ``tmp`` in for ``target`` (which may not exist yet): the old folder
    is renamed aside first, so ``target`` is never a half-built or half-deleted tree. ``target`` gets the
    mode a plain ``mkdir`` would give it: ``tempfile.mkdtemp`` makes ``tmp`` private (0700), and a published
    profile, an export or a downloaded dataset is meant to be read by others as any folder is."""
    tmp, target = Path(tmp), Path(target)
    os.chmod(tmp, 0o777 & ~_umask())
    public_modes(tmp)
    if target.exists():
        # a fresh name of its own: a folder beside it that happens to be called .<name>-old is not ours to delete
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
        os.replace(target, old)  # over the empty folder just made
        try:
            os.replace(tmp, target)
        except BaseException:
            os.replace(old, target)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


class Claimed(ValueError):
    """Another live process holds the folder's claim."""


def is_alive(pid: int) -> bool:
    """A process of this host runs with ``pid`` (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


@contextmanager
def claim_dir(folder: str | os.PathLike, lock_name: str = ".peeval.lock"):
    """Hold ``folder`` exclusively for the block: ``<folder>/<lock_name>`` is created with O_EXCL
    (holding ``host pid``) and removed at the end. A second process asking for the same folder meanwhile
    gets :class:`Claimed`; a claim left by a process of this host that no longer runs (``kill -9``) is
    taken over. The folders created for the claim are removed at the end when they are left empty, so a
    run that fails writes nothing."""
    import socket

    folder = Path(folder)
    created, p = [], folder
    while not p.exists():
        created.append(p)
        p = p.parent
    folder.mkdir(parents=True, exist_ok=True)
    lock, me = folder / lock_name, f"{socket.gethostname()} {os.getpid()}"
    try:
        for attempt in (0, 1):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    host, pid = lock.read_text(encoding="utf-8").split()
                    stale = host == socket.gethostname() and not is_alive(int(pid))
                except (OSError, ValueError):  # being written, or removed meanwhile: not stale
                    host, pid, stale = "?", "?", False
                if stale and attempt == 0:
                    lock.unlink(missing_ok=True)
                    continue
                raise Claimed(f"{folder} is being written by another process (pid {pid} on {host}, {lock})") from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(me)
            break
    except BaseException:
        _remove_empty(created)
        raise
    try:
        yield folder
    finally:
        try:
            if lock.read_text(encoding="utf-8") == me:
                lock.unlink()
        except OSError:
            pass
        _remove_empty(created)


def _remove_empty(folders: list[Path]) -> None:
    for d in folders:  # deepest first
        try:
            d.rmdir()
        except OSError:  # not empty (or gone): kept
            break


def remove_database(path: str | os.PathLike) -> None:
    """Delete a DuckDB file and its write-ahead log, if there: removing what is not there never fails (a read-only
    file system refuses even the unlink of a missing file, EROFS: measured, a traceback after the one line)."""
    path = Path(path)
    for p in (path, path.with_name(path.name + ".wal")):
        if p.exists() or p.is_symlink():
            p.unlink()


def replace_database(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Move a finished DuckDB file over ``target`` in one step (readers see the old database or the
    new one); the old file's log must not replay onto the new one, and the temporary's is dropped."""
    tmp, target = Path(tmp), Path(target)
    target.with_name(target.name + ".wal").unlink(missing_ok=True)
    os.replace(tmp, target)
    remove_database(tmp)


def check_safetensors(folder: str | os.PathLike | None, what: str = "weights") -> None:
    """Open the header of every ``*.safetensors`` file in ``folder`` (no tensor is read), so that a
    truncated or corrupt file is one error naming it (safetensors' own error names no file)."""
    if not folder or not Path(folder).is_dir():
        return
    from safetensors import safe_open

    for f in sorted(Path(folder).glob("*.safetensors")):
        try:
            with safe_open(str(f), framework="pt"):
                pass
        except Exception as e:  # SafetensorError derives from Exception only
            raise ValueError(f"{f}: cannot read the {what}, truncated or corrupt ({e})") from e
