"""Publish a profile's results for the leaderboard of every clone: copy what `dvc repro` produced
on this machine (results with provenance and samples, training summaries and curves; never
weights) to ``leaderboard/published/<profile>/`` with a SOURCE.json naming the machine. Samples keep
what the store reads and no dataset text: each sample's ``doc`` (the dataset row; ``doc_hash`` stays) is
dropped and long prompts and targets are cut as ingest cuts them, so the published store equals the local one.

    python -m leaderboard.publish --profile gpu --machine "1x NVIDIA H100 80GB"

Run it in the repository that ran the profile, then commit the folder. An existing published
folder is never replaced unless ``--replace`` says so. See leaderboard/published/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from leaderboard._cli import run_command
from leaderboard.claims.registration import ROOT as REGISTRATION_ROOT
from leaderboard.claims.registration import RegistrationError, earliest
from leaderboard.claims.registration import record as registration_record
from leaderboard.ingest import (
    LM_EVAL_RESULTS,
    IngestError,
    discover,
    lm_eval_provenance,
    parse_results_dir,
    published_files,
    results_file,
)
from leaderboard.store import PUBLISHED, SOURCE_FILE
from peeval._io import is_alive, named, replace_dir
from peeval._io.outputs import OutputRefused, check_output_dir
from peeval.records import model_shape
from peeval.training.profiles import TRAIN_PROFILES, get_profile

#: what a checkpoint folder contributes: its summaries and curve, nothing that holds weights
CHECKPOINT_FILES = ("train_summary.json", "adapt_summary.json", "train_curve.csv")
PROFILE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,40}$")


class PublishError(ValueError):
    """A bad argument or input, reported as one line (exit 2)."""


def publish(
    profile: str,
    machine: str,
    results: Path = Path("results"),
    checkpoints: Path = Path("checkpoints"),
    out: Path = PUBLISHED,
    replace: bool = False,
    run_source: dict | None = None,
    registration_root: Path | None = None,
) -> Path:
    """Copy ``results`` and the checkpoints' summaries into ``out/<profile>``; returns that folder.
    ``run_source``: what a run elsewhere said of itself (``publish_tarball``), kept in SOURCE.json as ``run``.
    SOURCE.json's ``registration`` (issue 67): the profile's registration (``leaderboard.claims.registration``:
    families, test, gates, margins) in the repository ``registration_root`` (default: the one this package lies
    in), its hash and the commit from which it held, beside the date of the earliest run published; refused while
    its files have uncommitted changes."""
    if not PROFILE.match(profile or ""):
        raise PublishError(f"--profile {profile!r}: lower-case letters, digits, '_' or '-' (e.g. gpu)")
    if not machine or not machine.strip():
        raise PublishError("--machine: say which machine ran it, e.g. '1x NVIDIA H100 80GB'")
    if not results.is_dir():
        raise PublishError(f"--results {results}: no such folder (run the profile first)")
    target = out / profile
    if target.exists() and not replace:
        raise PublishError(f"{target} exists: pass --replace to publish over it")
    try:  # --replace replaces a published profile (its SOURCE.json), never a user's folder or the results read
        check_output_dir(target, "--out/--profile", _is_published, "a published profile (no SOURCE.json)",
                         inputs=[results, *([checkpoints] if checkpoints.is_dir() else [])])  # fmt: skip
    except OutputRefused as e:
        raise PublishError(str(e)) from None
    result_dirs, ck_dirs = discover([results, *([checkpoints] if checkpoints.is_dir() else [])])
    if not result_dirs:
        raise PublishError(f"--results {results}: no results.json under it")
    devices, commits, cpus, dates = set(), set(), set(), []
    for d in result_dirs:  # only what ingest accepts is published
        try:
            parse_results_dir(d, Path.cwd())
        except IngestError as e:
            raise PublishError(str(e)) from e
        doc = json.loads(results_file(d).read_text(encoding="utf-8"))
        prov = doc.get("peeval") or lm_eval_provenance(doc, results_file(d))  # plain lm_eval's own results file
        devices.add(str(prov.get("device")))
        commits.add(str(prov.get("git_commit")))
        cpus.add(_cpu_line(prov.get("cpu")))
        dates.append(prov.get("date"))
    try:  # what decides the verdicts, dated by its commit, before anything is written (issue 67 item 4)
        registration = registration_record(profile, earliest(dates), registration_root or REGISTRATION_ROOT)
    except (RegistrationError, ValueError) as e:
        raise PublishError(f"registration of profile {profile}: {e}") from None
    here = Path.cwd().resolve()
    for d in (*result_dirs, *ck_dirs):  # the published layout mirrors the repository's
        if not d.resolve().is_relative_to(here):
            raise PublishError(f"{d}: outside the current directory {here} (run publish in the repository root)")
    out.mkdir(parents=True, exist_ok=True)
    if removed := remove_leftovers(out):
        print(f"publish: removed {len(removed)} temporary folder(s) a killed publish left in {out}: "
              f"{', '.join(p.name for p in removed)}", file=sys.stderr)  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix=f".{profile}.", dir=out))
    try:
        (tmp / TMP_MARK).write_text(f"{socket.gethostname()} {os.getpid()}", encoding="utf-8")
        for d in result_dirs:
            if d.is_file():  # plain lm_eval: its results file and the samples of the same date, as written
                dest = tmp / d.parent.resolve().relative_to(here)
                dest.mkdir(parents=True, exist_ok=True)
                date = LM_EVAL_RESULTS.match(d.name)["date"]
                for f in [d, *sorted(d.parent.glob(f"samples_*_{date}.jsonl"))]:
                    shutil.copy2(f, dest / f.name)
                continue
            dest = tmp / d.resolve().relative_to(here)
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "results.json").write_text(_relative_paths(d / "results.json", here), encoding="utf-8")
            for f in sorted(d.glob("samples_*.jsonl")):
                _slim_samples(f, dest / f.name)
        for d in ck_dirs:
            dest = tmp / d.resolve().relative_to(here)
            dest.mkdir(parents=True, exist_ok=True)
            for name in CHECKPOINT_FILES:
                if (d / name).is_file():
                    shutil.copy2(d / name, dest / name)
        source = {
            "profile": profile,
            "machine": machine.strip(),
            "devices": sorted(devices),
            # the CPU and torch's kernel path each result was computed on (docs/reproducing.md)
            "cpu": sorted(cpus),
            "git_commits": sorted(commits),
            "published": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "runs": len(result_dirs),
            "checkpoints": len(ck_dirs),
            # ingest reads the folder only while it holds exactly these (the writer's mark goes before the swap)
            "files": {k: v for k, v in published_files(tmp).items() if k != TMP_MARK},
            # each training profile's default shape now: ingest names a pretrained model of another shape with its
            # size (a ladder rung, issue 43), and a profile resized later does not rename what was published
            "default_shapes": {name: model_shape(get_profile("train", name)) for name in TRAIN_PROFILES},
            **({"run": run_source} if run_source else {}),
            # what decides this profile's verdicts and since which commit (the claims page: before / after the data)
            "registration": registration,
        }
        (tmp / SOURCE_FILE).write_text(json.dumps(source, indent=1) + "\n", encoding="utf-8")
        (tmp / TMP_MARK).unlink()  # from here on the folder is a published one (_is_published)
        replace_dir(tmp, target)
    except OSError as e:  # a full disk: the temporary goes, the folder published before stays
        raise named(e, target) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


#: the mark a publish leaves in its temporary folder while it fills it ("host pid"): a kill -9 leaves the folder
#: behind, and the next publish knows it for a dead publish's by this mark, never by its name alone
TMP_MARK = ".peeval-publish-tmp"
#: the names of publish's temporaries on the shelf: ``.<profile>.XXXXXXXX`` (``publish``) and
#: ``.<profile>-old-XXXXXXXX`` (``peeval._io.replace_dir``), as ``tempfile.mkdtemp`` makes them
_TEMPORARY = re.compile(r"^\.[a-z0-9][a-z0-9_-]{0,40}(\.|-old-)[a-z0-9_]{8}$")


def remove_leftovers(out: Path) -> list[Path]:
    """Delete the temporary folders a killed publish left on the shelf ``out`` (issue 66): one still marked by a
    publish of this host that no longer runs, one already complete (``_is_published``: set aside by a swap, or
    finished and never swapped in), or an empty one; a live publish's, another host's or anything else (a user's
    hidden folder) is left alone. Returns the folders removed."""
    removed = []
    for d in sorted(out.iterdir()) if out.is_dir() else []:
        if d.is_symlink() or not d.is_dir() or not _TEMPORARY.match(d.name):
            continue
        mark = d / TMP_MARK
        if mark.is_file() and not mark.is_symlink():
            try:
                host, pid = mark.read_text(encoding="utf-8").split()
                dead = host == socket.gethostname() and not is_alive(int(pid))
            except (OSError, ValueError):
                dead = False
        else:
            dead = not any(d.iterdir()) or _is_published(d)
        if dead:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _is_published(folder: Path) -> bool:
    """A folder this command published: its SOURCE.json names a profile and a machine, and lists every other
    file in it (``files``); a file added since (a user's) makes it not ours to delete."""
    try:
        doc = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or not isinstance(doc.get("profile"), str) or not isinstance(doc.get("machine"), str):
        return False
    listed = doc.get("files")
    if not isinstance(listed, dict):  # no manifest (a "legacy" SOURCE.json, or a user's): never ours (issue 66)
        return False
    present = {f.relative_to(folder).as_posix() for f in folder.rglob("*") if not f.is_dir()}
    if not present - {SOURCE_FILE} <= set(listed):
        return False
    current = published_files(folder)  # a listed file a user has since edited is theirs too
    return all(current[name] == listed[name] for name in present - {SOURCE_FILE})


#: what SOURCE.json's ``run`` keeps of a tarball's gpu_diag.json (benchmarks/gpu_diag.py)
RUN_SOURCE_KEYS = ("device", "torch", "commit", "commit_dirty", "jobs", "started", "wall_s", "dry_run_cpu")


def _tarball_manifest(manifest: Path, tarball: Path) -> dict:
    """The tarball's gpu_diag.json: a JSON object whose ``dry_run_cpu`` is a boolean (the string "false" is not
    false), ``{}`` when the tarball has none; anything else is one PublishError naming the file."""
    if not manifest.is_file():
        return {}
    where = f"--tarball {tarball}: its gpu_diag.json"
    try:
        run = json.loads(manifest.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise PublishError(f"{where} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise PublishError(f"{where} is not valid JSON ({e})") from None
    except RecursionError:
        raise PublishError(f"{where} is nested too deeply to be benchmarks/gpu_diag.py's") from None
    if not isinstance(run, dict):
        raise PublishError(f"{where} must be a JSON object (benchmarks/gpu_diag.py's), not {type(run).__name__}")
    if not isinstance(run.get("dry_run_cpu", False), bool):
        raise PublishError(f"{where}: dry_run_cpu must be true or false, not {run['dry_run_cpu']!r}")
    return run


def publish_tarball(tarball: Path, profile: str, machine: str, out: Path = PUBLISHED, replace: bool = False) -> Path:
    """Publish results made on another machine (``benchmarks/gpu_diag.sh``'s gpu-diag.tar.gz: results/ and
    checkpoints/ as in a repository, and gpu_diag.json): unpacked into a temporary folder and published from there
    as from a repository root; SOURCE.json's ``run`` names the device, torch and commit the tarball says."""
    import contextlib
    import tarfile

    if not Path(tarball).is_file():
        raise PublishError(f"--tarball {tarball}: no such file")
    out = Path(out).resolve()
    with tempfile.TemporaryDirectory(prefix=".publish-tarball.") as tmp:
        try:
            with tarfile.open(tarball) as tf:
                tf.extractall(tmp, filter="data")  # no absolute paths, links out or devices
        except (tarfile.TarError, OSError) as e:
            why = " ".join(str(e).split())[:120]  # tarfile's reasons span lines
            raise PublishError(f"--tarball {tarball}: not a readable tar archive ({type(e).__name__}: {why})") from None
        run = _tarball_manifest(Path(tmp) / "gpu_diag.json", tarball)
        if run.get("dry_run_cpu"):
            raise PublishError(f"--tarball {tarball}: a --cpu dry run (not a measurement): not published")
        with contextlib.chdir(tmp):
            return publish(profile, machine, Path("results"), Path("checkpoints"), out=out, replace=replace,
                           run_source={k: run[k] for k in RUN_SOURCE_KEYS if k in run} or None)  # fmt: skip


def _cpu_line(cpu) -> str:
    """``AMD EPYC, torch kernels AVX2`` from a provenance's ``cpu`` record (peeval.install.versions.cpu_identity)."""
    if not isinstance(cpu, dict):
        return "not recorded (results written before provenance named the CPU)"
    return f"{cpu.get('model') or 'unknown CPU'}, torch kernels {cpu.get('torch_capability') or 'unknown'}"


def _slim_samples(src: Path, dest: Path) -> None:
    """A samples_<task>.jsonl with what the store reads and no dataset text: ``doc`` dropped, the first request
    only (the prompt the store keeps; flip-flop's per-read requests repeat their prefixes), ``resps`` dropped
    where ``filtered_resps`` holds the response, prompt strings and target cut as the store keeps them
    (``ingest.clip``, which leaves a cut text as it is); everything else as written."""
    from leaderboard.ingest import clip

    def cut(v):
        return clip(v) if isinstance(v, str) else [cut(x) for x in v] if isinstance(v, list) else v

    with open(src, encoding="utf-8") as fin, open(dest, "w", encoding="utf-8") as fout:
        for line in fin:
            if not line.strip():
                continue
            s = json.loads(line)
            s.pop("doc", None)
            if "filtered_resps" in s:
                s.pop("resps", None)
            if "arguments" in s:
                args = s["arguments"]
                if isinstance(args, list):
                    args = args[:1]
                elif isinstance(args, dict):  # plain lm_eval's {"gen_args_0": {...}, ...}
                    args = dict(list(args.items())[:1])
                s["arguments"] = {k: {a: cut(x) for a, x in v.items()} if isinstance(v, dict) else cut(v)
                                  for k, v in args.items()} if isinstance(args, dict) else cut(args)  # fmt: skip
            if isinstance(s.get("target"), str):
                s["target"] = clip(s["target"])
            fout.write(json.dumps(s, ensure_ascii=False) + "\n")


def _relative_paths(results: Path, here: Path) -> str:
    """results.json with its checkpoint paths made relative to the repository (an absolute path of
    the machine that ran it means nothing elsewhere; relative, it finds the published summaries)."""
    doc = json.loads(results.read_text(encoding="utf-8"))
    prov = doc["peeval"]
    args = prov.get("model_args") or {}

    def rel(v):
        if isinstance(v, str) and Path(v).is_absolute() and Path(v).resolve().is_relative_to(here):
            return Path(v).resolve().relative_to(here).as_posix()
        return v

    prov["checkpoint"] = rel(prov.get("checkpoint"))
    for key in ("pretrained", "adapter"):
        if key in args:
            args[key] = rel(args[key])
    return json.dumps(doc, indent=1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m leaderboard.publish", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", required=True, help="the profile that produced the results, e.g. gpu")
    p.add_argument("--machine", required=True, help="the machine it ran on, e.g. '1x NVIDIA H100 80GB'")
    p.add_argument("--results", default="results", type=Path)
    p.add_argument("--checkpoints", default="checkpoints", type=Path)
    p.add_argument("--replace", action="store_true", help="publish over an existing <out>/<profile>")
    p.add_argument("--out", default=PUBLISHED, type=Path, help="where published profiles live (leaderboard/published)")
    p.add_argument("--tarball", default=None, type=Path, help="publish this tarball of benchmarks/gpu_diag.sh "
                   "instead of --results / --checkpoints")  # fmt: skip
    a = p.parse_args(argv)

    def action() -> str:
        if a.tarball is not None:
            target = publish_tarball(a.tarball, a.profile, a.machine, out=a.out, replace=a.replace)
        else:
            target = publish(a.profile, a.machine, a.results, a.checkpoints, out=a.out, replace=a.replace)
        return f"{target} (commit it; the ingest stage reads it beside the local runs)"

    return run_command("publish", action, (PublishError, OSError))


if __name__ == "__main__":
    sys.exit(main())
