"""``peeval data``: every folder of the data mirror that a profile reads, verified or downloaded.

The committed manifest (``peeval/data/manifest.json``) names, for each mirror folder (``local/...``,
``hf/<org>/<name>``, ``tokenizers/gpt2``), its files with size and sha256 and where a copy can be
downloaded. :func:`resolve` reads a folder from the mirror root when every file there matches the
manifest; otherwise it downloads the folder with huggingface_hub's own ``hf_hub_download`` from

- ``$PEEVAL_DATA_REPO`` (``org/name[@revision]``): a hub dataset repository holding the mirror's
  layout (``<folder>/<file>``), when one is named; else
- the folder's public source in the manifest (hub repository, revision, file names); a folder with
  none (``mirror_only``) cannot be downloaded and says so,

verifies every file against the manifest (a mismatch is one line naming the file, and nothing is
kept), and swaps the finished folder into ``<root>/<folder>`` so that the next run reads it offline.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._io import replace_dir
from .lock import (  # its home: the lowest data module (data_lock, data_rebuild raise it too)
    DataError,
    read_folders,
)

MANIFEST = Path(__file__).with_name("manifest.json")
REPO_ENV = "PEEVAL_DATA_REPO"
_SHA = re.compile(r"[0-9a-f]{64}")
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


#: the mirror folder each evaluation task reads (lm-eval's own through the configured mirror, peeval's
#: always; a group's subtasks share its prefix); a task not here reads no mirror folder (peeval_passkey)
TASK_FOLDERS = (
    (r"peeval_ppl_pg19", "local/gutenberg-eval"),  # deepmind/pg19 (peeval.data.LOCAL)
    (r"peeval_ppl_proof_pile", "local/stacks-project"),  # hoskinson-center/proof-pile
    (r"lambada_openai", "hf/EleutherAI/lambada_openai"),
    (r"piqa", "hf/baber/piqa"),
    (r"arc_(easy|challenge)", "hf/allenai/ai2_arc"),
    (r"peeval_hellaswag", "hf/Rowan/hellaswag"),
    (r"blimp(_\w+)?", "hf/nyu-mll/blimp"),
    (r"mmlu(_\w+)?", "hf/cais/mmlu"),
)


def task_folders(tasks: Iterable[str]) -> list[str]:
    """The mirror folders the evaluation ``tasks`` read, in order, each once."""
    out: list[str] = []
    for task in tasks:
        for pattern, folder in TASK_FOLDERS:
            if re.fullmatch(pattern, task) and folder not in out:
                out.append(folder)
    return out


def profile_folders(mirror: Iterable[str], suites: dict[str, Iterable[str]], used: Iterable[str]) -> list[str]:
    """A parameter file's folders: ``data.mirror`` (the corpora it trains on), then those of the tasks of
    every evaluation suite it runs (``used``: eval.pretrain + adapt + base)."""
    folders = list(mirror)
    tasks = [t for name in dict.fromkeys(used) for t in suites.get(name, ())]
    return folders + [f for f in task_folders(tasks) if f not in folders]


def sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_rebuild(rel: str, src: dict, files: dict) -> None:
    from .rebuild import BUILDS, split_problem

    if not isinstance(src.get("repo"), str) or not _REPO.fullmatch(src["repo"]):
        raise DataError(f"manifest: {rel}.source.repo: a GitHub repository org/name")
    if not re.fullmatch(r"[0-9a-f]{40}", str(src.get("commit", ""))):
        raise DataError(f"manifest: {rel}.source.commit: a 40-hex commit")
    if src.get("build") not in BUILDS:
        raise DataError(f"manifest: {rel}.source.build: one of {', '.join(BUILDS)}")
    if src["build"] == "stacks" and not isinstance(src.get("license"), str):
        raise DataError(f"manifest: {rel}.source.license: a string (the rows' meta.license)")
    splits = src.get("splits")
    if not isinstance(splits, dict) or not splits:
        raise DataError(f"manifest: {rel}.source.splits: a mapping split -> {{file, rows_sha256, ...}}")
    for split, spec in splits.items():
        if (
            not isinstance(spec, dict)
            or spec.get("file") not in files
            or not _SHA.fullmatch(str(spec.get("rows_sha256")))
        ):
            raise DataError(f"manifest: {rel}.source.splits.{split}: a file the folder lists and a 64-hex rows_sha256")
        if why := split_problem(src, spec):
            raise DataError(f"manifest: {rel}.source.splits.{split}.{why}")


def _check_source(rel: str, src: Any, files: dict) -> None:
    if not isinstance(src, dict):
        raise DataError(f"manifest: {rel}.source: a mapping or null")
    if src.get("kind", "hub") == "github":
        return _check_rebuild(rel, src, files)
    if src.get("kind", "hub") != "hub":
        raise DataError(f"manifest: {rel}.source.kind: hub or github")
    for key in ("repo_id", "revision"):
        if not isinstance(src.get(key), str) or not src[key]:
            raise DataError(f"manifest: {rel}.source.{key}: a non-empty string")
    if src.get("repo_type", "dataset") not in ("dataset", "model"):
        raise DataError(f"manifest: {rel}.source.repo_type: dataset or model")
    mapping = src.get("files")
    if not isinstance(mapping, dict) or not all(isinstance(v, str) and v for v in mapping.values()):
        raise DataError(f"manifest: {rel}.source.files: a mapping of mirror file -> file in {src['repo_id']}")
    unknown = sorted(set(mapping) - set(files))
    if unknown:
        raise DataError(f"manifest: {rel}.source.files names files the folder does not list: {', '.join(unknown)}")
    missing = sorted(p for p, f in files.items() if p not in mapping and not f.get("optional"))
    if missing:
        raise DataError(f"manifest: {rel}.source.files: no source for {', '.join(missing)}")
    if not set(src.get("lock_only", [])) <= set(mapping):
        raise DataError(f"manifest: {rel}.source.lock_only: files of source.files")


def load_manifest(path: str | os.PathLike | None = None) -> dict[str, dict]:
    """The manifest's folders, checked: a malformed entry is one line naming it."""
    path = Path(path) if path is not None else MANIFEST
    folders = read_folders(path, f"manifest {path}")
    for rel, entry in folders.items():
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or not isinstance(entry, dict):
            raise DataError(f"manifest: folder {rel!r}: a relative path inside the mirror with a mapping")
        files = entry.get("files")
        if not isinstance(files, dict) or not files:
            raise DataError(f"manifest: {rel}.files: a non-empty mapping of file -> {{bytes, sha256}}")
        for name, f in files.items():
            bad_path = Path(name).is_absolute() or ".." in Path(name).parts
            if bad_path or not isinstance(f, dict) or not _SHA.fullmatch(str(f.get("sha256", ""))):
                raise DataError(f"manifest: {rel}/{name}: a relative file name with a 64-hex sha256")
            if not isinstance(f.get("bytes"), int) or f["bytes"] < 0:
                raise DataError(f"manifest: {rel}/{name}.bytes: an integer >= 0")
            if "rows_sha256" in f and not _SHA.fullmatch(str(f["rows_sha256"])):
                raise DataError(f"manifest: {rel}/{name}.rows_sha256: a 64-hex sha256 of the file's rows")
        if entry.get("source") is None:
            if not isinstance(entry.get("mirror_only"), str):
                raise DataError(f"manifest: {rel}: a source, or mirror_only saying why it has none")
        else:
            _check_source(rel, entry["source"], files)
    return folders


def parse_repo(spec: str | None) -> tuple[str, str] | None:
    """``org/name[@revision]`` (``$PEEVAL_DATA_REPO`` / ``--repo``) -> (repo id, revision)."""
    if spec is None or spec == "":
        return None
    repo, _, revision = spec.partition("@")
    if not _REPO.fullmatch(repo) or (_ and not revision):
        raise DataError(f"{REPO_ENV} / --repo {spec!r}: a hub dataset repository org/name, optionally @revision")
    return repo, revision or "main"


def problems_in(root: Path, rel: str, entry: dict, lock: dict | None = None) -> list[str]:
    """What keeps ``<root>/<rel>`` from matching the manifest (missing files, sizes, sha256); [] when it does.
    A file equal to what the data lock recorded for the folder (``lock``: its entry) matches too, where the source
    is not pinned to a commit (or the file is one of its ``lock_only``): the manifest's pins outrank the lock."""
    found = []
    written = (lock or {}).get("files", {})
    src = entry.get("source") or {}
    pinned = re.fullmatch(r"[0-9a-f]{40}", str(src.get("commit") or src.get("revision") or "")) is not None
    rows_pins = {spec["file"]: spec["rows_sha256"] for spec in (src.get("splits") or {}).values()}
    rows_pins |= {n: f["rows_sha256"] for n, f in entry["files"].items() if f.get("rows_sha256")}
    generated = ("README.md",) if src.get("kind") == "github" else ()  # a rebuild's own text declaring the splits
    for name, f in sorted(entry["files"].items()):
        p = root / rel / name
        if name not in written or not p.is_file() or (p.stat().st_size, sha256(p)) == (f["bytes"], f["sha256"]):
            continue
        # the file holds what the lock recorded, not the manifest's bytes: the manifest's pins outrank the lock (a
        # lock listing the sha256 of a halved copy made that copy "verified", cited as the pinned commit)
        if name in rows_pins:
            from .rebuild import parquet_rows, rows_sha256

            try:
                same = rows_sha256(parquet_rows(p)) == rows_pins[name]
            except Exception:  # not a parquet file
                same = False
            if not same:
                found.append(f"{rel}/{name}: its rows differ from the manifest's pinned rows_sha256 (the data lock "
                             "records this copy, the manifest outranks it)")  # fmt: skip
        elif pinned and name not in (*src.get("lock_only", ()), *generated):
            found.append(f"{rel}/{name}: sha256 differs from the manifest's {f['sha256'][:12]}… (pinned commit; "
                         "the data lock's record does not replace the pin)")  # fmt: skip
    if found:
        return found
    for name, f in sorted(entry["files"].items()):
        p = root / rel / name
        ok = {(f["bytes"], f["sha256"])} | (
            {(written[name]["bytes"], written[name]["sha256"])} if name in written else set()
        )
        if not p.is_file():
            if not f.get("optional"):
                found.append(f"{rel}/{name}: missing")
        elif p.stat().st_size not in {size for size, _ in ok}:
            found.append(f"{rel}/{name}: {p.stat().st_size} bytes, the manifest pins {f['bytes']}")
        elif (p.stat().st_size, sha256(p)) not in ok:
            found.append(f"{rel}/{name}: sha256 differs from the manifest's {f['sha256'][:12]}…")
    return found


def source_of(entry: dict) -> tuple[str, str] | None:
    """(source, revision asked for) of a folder's public source: the data lock's key; None for mirror-only."""
    src = entry.get("source")
    if src is None:
        return None
    if src.get("kind") == "github":
        return f"github {src['repo']}", src["commit"]
    return f"hub {src.get('repo_type', 'dataset')} {src['repo_id']}", src["revision"]


def describe(rel: str, entry: dict, repo: tuple[str, str] | None = None) -> str:
    """Where the folder's verified copy comes from (stable across runs: the stage output records it)."""
    if repo is not None:
        return f"hub dataset {repo[0]}@{repo[1]} ({rel}/)"
    src = source_of(entry)
    if src is None:
        return entry["mirror_only"]
    return f"{src[0]}@{src[1]}" + (
        f" ({entry['source']['build']} rebuild)" if entry["source"].get("kind") == "github" else ""
    )


def _hub_call(rel: str, what: str, repo_id: str, revision: str, call, /, *args, **kwargs):
    """``call(*args, **kwargs)``; the library's own errors (offline, not found, HTTP) as one line naming ``what``."""
    from huggingface_hub import constants

    try:
        return call(*args, **kwargs)
    except Exception as e:
        reason = " ".join(str(e).split())[:300] or type(e).__name__
        raise DataError(
            f"{rel}: cannot download {what} from {repo_id}@{revision} ({constants.ENDPOINT}): {reason}"
        ) from None


def _download(rel: str, entry: dict, repo: tuple[str, str] | None, staging: Path) -> tuple[Path, dict | None]:
    """Download the folder's files into ``staging`` and verify them; the folder, arranged as the mirror has it,
    and the data lock entry to record (None for a ``$PEEVAL_DATA_REPO`` copy, which the manifest's sha256 verify)."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url

    from . import lock as data_lock

    src = entry.get("source")
    if repo is None and src is None:
        raise DataError(
            f"{rel}: not in the mirror and no public copy to download ({entry['mirror_only']}); set "
            f"PEEVAL_DATA_MIRROR to a folder holding it, or {REPO_ENV}=org/name[@revision] to a hub dataset "
            "repository with the mirror's layout"
        )
    folder = staging / "folder"
    key = source_of(entry)
    pinned = data_lock.locked(rel, *key) if repo is None else None
    if repo is None and src.get("kind") == "github":
        from .rebuild import rebuild

        folder.mkdir(parents=True)
        inputs = rebuild(rel, src, folder)
        for path, digest in sorted(inputs.items()):
            if pinned and pinned.get("inputs", {}).get(path, digest) != digest:
                raise DataError(
                    f"{rel}: {path} from {src['repo']}@{src['commit'][:12]} has sha256 {digest[:12]}…, the "
                    f"data lock {data_lock.lock_path()} records {pinned['inputs'][path][:12]}…: nothing kept"
                )
        return folder, {"commit": src["commit"], "inputs": inputs}
    if repo is not None:
        repo_id, revision, repo_type = repo[0], repo[1], "dataset"
        mapping = {name: f"{rel}/{name}" for name in entry["files"]}
    else:
        repo_id, revision, repo_type = src["repo_id"], src["revision"], src.get("repo_type", "dataset")
        mapping = dict(src["files"])
    commit = (pinned or {}).get("commit")
    if repo is None and commit is None:  # the commit the revision names now (recorded in the data lock)
        url = hf_hub_url(repo_id, min(mapping.values()), repo_type=repo_type, revision=revision)
        commit = _hub_call(rel, "the revision", repo_id, revision, get_hf_file_metadata, url).commit_hash or revision
    where = f"{repo_id}@{commit or revision} ({constants.ENDPOINT})"
    got: dict[str, Path] = {}
    for f in sorted(set(mapping.values())):
        kw = {"repo_type": repo_type, "revision": commit or revision, "local_dir": staging / "download"}
        got[f] = Path(_hub_call(rel, f, repo_id, revision, hf_hub_download, repo_id, f, **kw))
    inputs = {f: sha256(p) for f, p in got.items()}
    for name, source_file in sorted(mapping.items()):
        want, path, digest = entry["files"][name], got[source_file], inputs[source_file]
        if pinned is not None:
            ok = pinned.get("inputs", {}).get(source_file) == digest
            pins = (
                f"the data lock {data_lock.lock_path()} records {pinned.get('inputs', {}).get(source_file, '?')[:12]}…"
            )
        else:
            ok = digest == want["sha256"] and path.stat().st_size == want["bytes"]
            if not ok and want.get("rows_sha256"):
                from .rebuild import parquet_rows, rows_sha256

                try:
                    ok = rows_sha256(parquet_rows(path)) == want["rows_sha256"]
                except Exception:  # not a parquet file: refused below
                    ok = False
            ok = ok or (repo is None and name in src.get("lock_only", ()))
            pins = f"the manifest pins {want['sha256'][:12]}… ({want['bytes']} bytes)" + (
                " / those rows" if want.get("rows_sha256") else ""
            )
        if not ok:
            raise DataError(f"{rel}/{name}: {source_file} from {where} has sha256 {digest[:12]}… "
                            f"({path.stat().st_size} bytes); {pins}: nothing kept")  # fmt: skip
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / name)
    return folder, ({"commit": commit, "inputs": inputs} if repo is None else None)


def fetch(root: Path, rel: str, entry: dict, repo: tuple[str, str] | None = None) -> None:
    """Download ``rel`` and swap it in for ``<root>/<rel>``; on any failure nothing new is left behind. A folder
    from a public source is recorded in the data lock (peeval.data.lock)."""
    from . import lock as data_lock

    target = root / rel
    made = [p for p in reversed(target.parents) if not p.exists()]  # parents this call creates
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-download-", dir=target.parent))
    ok = False
    try:
        folder, resolved = _download(rel, entry, repo, staging)
        if resolved is not None:
            written = {n: {"bytes": (folder / n).stat().st_size, "sha256": sha256(folder / n)}
                       for n in entry["files"] if (folder / n).is_file()}  # fmt: skip
            source, revision = source_of(entry)
            data_lock.record(rel, {"source": source, "revision": revision, **resolved, "files": written})
        replace_dir(folder, target)
        ok = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not ok:
            for p in reversed(made):
                if p.is_dir() and not any(p.iterdir()):
                    p.rmdir()


def resolve(
    root: str | os.PathLike,
    folders: Iterable[str] | None = None,
    manifest: str | os.PathLike | None = None,
    repo: str | None = None,
    log=print,
) -> tuple[dict[str, str], list[str]]:
    """Every folder in ``folders`` (default: the manifest's) verified under ``root``, downloading those
    that are missing or differ. Returns (folder -> where its copy comes from, problems: one line each)."""
    entries = load_manifest(manifest)
    folders = list(entries) if folders is None else list(folders)
    unknown = [f for f in folders if f not in entries]
    if unknown:
        raise DataError(f"folders {', '.join(unknown)}: not in the manifest (known: {', '.join(entries)})")
    repo_id = parse_repo(os.environ.get(REPO_ENV) if repo is None else repo)
    from . import lock as data_lock

    root = Path(root)
    sources: dict[str, str] = {}
    problems: list[str] = []
    for rel in folders:
        entry = entries[rel]
        key = source_of(entry)
        found = problems_in(root, rel, entry, data_lock.locked(rel, *key) if key else None)
        if not found:
            sources[rel] = describe(rel, entry)
            log(f"{rel}: verified in {root} ({len(entry['files'])} files)")
            continue
        if (root / rel).exists():
            log(f"{rel}: {found[0]}{f' (+{len(found) - 1} more)' if len(found) > 1 else ''}; downloading it again")
        try:
            fetch(root, rel, entry, repo_id)
        except DataError as e:
            problems.append(str(e))
            continue
        sources[rel] = describe(rel, entry)
        size = sum(f["bytes"] for f in entry["files"].values()) / 2**20
        log(f"{rel}: downloaded from {describe(rel, entry, repo_id)}, verified ({size:.1f} MiB) into {root / rel}")
    return sources, problems


def params_data(params_dir: Path, profile: str | None) -> tuple[str, list[str]] | None:
    """``data.root`` and the folders (:func:`profile_folders`) of params/<profile>.yaml (``extends``
    followed), or of params.yaml when ``profile`` is None; None when there is no params.yaml here."""
    import yaml

    from ..settings import SettingsError, compose

    def load(path: Path):
        try:
            return yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:  # a malformed file: where, in one line
            mark = getattr(e, "problem_mark", None)
            at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            what = getattr(e, "problem", None) or type(e).__name__
            raise DataError(f"{path}: not valid YAML{at}: {what}") from None

    if profile is None:
        path = params_dir / "params.yaml"
        if not path.is_file():
            return None
        composed = load(path)
    else:
        table = {p.stem: load(p) for p in sorted(params_dir.glob("params/*.yaml"))}
        try:
            composed = compose(table, profile, "parameter file (--profile)")
        except SettingsError as e:
            raise DataError(str(e)) from None
        path = params_dir / "params" / f"{profile}.yaml"
    data = composed.get("data") if isinstance(composed, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("root"), str):
        raise DataError(f"{path}: no data.root (the mirror folder, relative to the repository)")
    mirror = data.get("mirror")
    if not isinstance(mirror, list) or not all(isinstance(m, str) for m in mirror):
        raise DataError(f"{path}: data.mirror: a list of mirror folders")
    ev = composed.get("eval") if isinstance(composed.get("eval"), dict) else {}
    raw = ev.get("suites") if isinstance(ev.get("suites"), dict) else {}
    suites = {k: v.get("tasks") or [] for k, v in raw.items() if isinstance(v, dict)}
    used = [s for key in ("pretrain", "adapt", "base") for s in (ev.get(key) or [])]
    return data["root"], profile_folders(mirror, suites, used)
