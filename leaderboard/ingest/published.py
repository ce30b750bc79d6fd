"""A published profile folder (``leaderboard/published/<profile>``, see ``leaderboard.store.PUBLISHED``): its
SOURCE.json checked first (which profile and machine, exactly which files), then its runs and checkpoints read
as that profile's, told apart from local ones."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from pathlib import Path

from leaderboard.store import RUN_TABLES, SOURCE_FILE, TABLE_COLUMNS
from peeval.records import SHAPE_KEYS, model_shape, published_name, published_source

from .checkpoints import parse_checkpoint_dir
from .inputs import discover
from .results import parse_results_dir
from .values import IngestError, read_json, rel


def read_source(folder: Path) -> dict:
    """SOURCE.json of one published folder: which profile, machine and commit its numbers came from."""
    f = folder / SOURCE_FILE
    if not f.is_file():
        raise IngestError(
            f"{folder}: a published folder needs {SOURCE_FILE} (write it with `python -m leaderboard.publish`)"
        )
    src = read_json(f)
    if not isinstance(src, dict):
        raise IngestError(f"{f}: expected a JSON object")
    for key in ("profile", "machine"):
        if not isinstance(src.get(key), str) or not src[key].strip():
            raise IngestError(f"{f}: {key!r} must be a non-empty string")
    if src["profile"] != folder.name:
        raise IngestError(f"{f}: profile {src['profile']!r} but the folder is named {folder.name!r}")
    if "registration" in src and (why := registration_problem(src["registration"])):
        raise IngestError(f"{f}: 'registration' {why} (written by `python -m leaderboard.publish` or "
                          "pipelines/record_registration.py)")  # fmt: skip
    return src


_HEX = re.compile(r"^[0-9a-f]+$")


def registration_problem(reg) -> str:
    """Why SOURCE.json's ``registration`` (issue 67: what decides the profile's verdicts, hashed and dated by
    ``leaderboard.claims.registration``) is not one ('' when it is): an object with a 64-hex ``sha256``, a 40-hex
    ``commit``, ISO dates ``committed`` and ``data_from`` (null: no dated run) and the registration (``content``).
    Its hash is re-checked by the claims stage, which owns the serialisation."""
    if not isinstance(reg, dict):
        return "must be an object"
    for key, n in (("sha256", 64), ("commit", 40)):
        if not isinstance(reg.get(key), str) or len(reg[key]) != n or not _HEX.match(reg[key]):
            return f"{key} must be {n} lower-case hex digits, not {reg.get(key)!r}"
    for key in ("committed", "data_from"):
        value = reg.get(key)
        if value is None and key == "data_from":
            continue
        try:
            dt.datetime.fromisoformat(str(value) if isinstance(value, str) else "")
        except ValueError:
            return f"{key} must be an ISO 8601 date, not {value!r}"
    if not isinstance(reg.get("content"), dict):
        return "content must be the registration (an object)"
    return ""


def source_defaults(src: dict, f: Path):
    """The default shape of each training profile when the folder was published (SOURCE.json
    ``default_shapes``, written by ``leaderboard.publish``): a published run is named as where it was made, not
    by today's profiles. A folder published before it records none: its names carry no size (it has one)."""
    shapes = src.get("default_shapes", {})
    if not isinstance(shapes, dict) or not all(model_shape(v) is not None for v in shapes.values()):
        raise IngestError(f"{f}: 'default_shapes' must map training profiles to {{{', '.join(SHAPE_KEYS)}}} integers")
    return shapes.get


def published_files(folder: Path) -> dict[str, str]:
    """{path relative to ``folder``: sha256} of every file of a published folder but its SOURCE.json: what
    ``leaderboard.publish`` records in SOURCE.json ``files`` and ingest checks before it reads the folder."""
    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f != folder / SOURCE_FILE:
            h = hashlib.sha256()
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[f.relative_to(folder).as_posix()] = h.hexdigest()
    return out


def check_published(folder: Path, src: dict) -> None:
    """IngestError (one line) unless a published folder holds what its SOURCE.json says was published: the same
    number of runs and checkpoints, and, where SOURCE.json lists them (``files``), exactly those files with those
    sha256s. A run folder deleted (39 of 40 runs read) or copied (one more seed of a published row) is caught
    here, before a number of the folder is read."""
    f = folder / SOURCE_FILE
    files = src.get("files")
    if files is not None:
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise IngestError(f"{f}: 'files' must map each published file to its sha256")
        have = published_files(folder)
        missing = sorted(set(files) - set(have))
        extra = sorted(set(have) - set(files))
        changed = sorted(k for k in set(files) & set(have) if files[k] != have[k])
        for what, names in (("is missing", missing), ("is not in it", extra), ("changed since", changed)):
            if names:
                more = f" and {len(names) - 1} more" if len(names) > 1 else ""
                raise IngestError(f"{folder}: {names[0]}{more} {what} {SOURCE_FILE} ({len(files)} files published): "
                                  "restore the folder as published (git checkout) or publish it again")  # fmt: skip
    result_dirs, ck_dirs = discover([folder])
    for key, found in (("runs", result_dirs), ("checkpoints", ck_dirs)):
        want = src.get(key)
        if want is not None and (isinstance(want, bool) or not isinstance(want, int) or want != len(found)):
            raise IngestError(f"{folder}: {len(found)} {key} found, {SOURCE_FILE} says {want!r} were published: "
                              "restore the folder as published (git checkout) or publish it again")  # fmt: skip


def published_rows(folder: Path, root: Path) -> dict[str, list[dict]]:
    """Every row of one published folder, told apart from local ones: source ``published/<profile>``,
    the machine, names ``<label> @<profile>``, paths under the folder and run ids salted with the source
    (a published copy of a local results.json is a different run), so local runs never replace them."""
    src = read_source(folder)
    check_published(folder, src)
    source = published_source(src["profile"])
    prefix = rel(folder, root)
    prefix = f"{source}/" if prefix == "." else f"{prefix}/"  # never a local run's checkpoints/... key
    result_dirs, ck_dirs = discover([folder])
    rows: dict[str, list[dict]] = {t: [] for t in TABLE_COLUMNS}
    defaults = source_defaults(src, folder / SOURCE_FILE)
    for d in result_dirs:  # paths inside the results resolve against the folder, as where they were made
        got = parse_results_dir(d, folder, defaults)
        old = got["runs"][0]["run_id"]
        new = hashlib.sha256(f"{source}\n{old}".encode()).hexdigest()[:16]
        for t in RUN_TABLES:
            for r in got[t]:
                r["run_id"] = new
        run = got["runs"][0]
        run.update(source=source, machine=src["machine"], name=published_name(run["name"], src["profile"]))
        for key in ("checkpoint", "results_path"):
            if run[key] and not Path(run[key]).is_absolute():
                run[key] = f"{prefix}{run[key]}"
        for t, rs in got.items():
            rows[t].extend(rs)
    for d in ck_dirs:
        for t, rs in parse_checkpoint_dir(d, folder).items():
            for r in rs:
                r["checkpoint"] = f"{prefix}{r['checkpoint']}"
            rows[t].extend(rs)
    return rows
