"""The four inputs ingest reads, and where they are found: a ``peeval eval`` results folder, a plain lm-eval
results file, a training or adaptation folder, and a published profile folder. A file named on the command
line that is none of them is refused (before, its whole folder was searched)."""

from __future__ import annotations

import enum
from pathlib import Path

from leaderboard.store import SOURCE_FILE

from .external import LM_EVAL_RESULTS
from .values import IngestError

SUMMARIES = ("train_summary.json", "adapt_summary.json")


class InputType(enum.Enum):
    """What an input is, by the record it holds; each has one parser."""

    RESULTS = "a peeval results folder (results.json)"  # results.parse_results_dir
    EXTERNAL = "a plain lm-eval results file (results_<date>.json)"  # external.parse_external
    CHECKPOINT = "a training or adaptation folder (train_summary.json / adapt_summary.json)"  # checkpoints
    PUBLISHED = f"a published profile folder ({SOURCE_FILE})"  # published.published_rows


def input_type(f: Path) -> InputType | None:
    """The input a file is the record of, by its name; None for any other file."""
    if f.name == "results.json":
        return InputType.RESULTS
    if LM_EVAL_RESULTS.match(f.name):
        return InputType.EXTERNAL
    if f.name in SUMMARIES:
        return InputType.CHECKPOINT
    if f.name == SOURCE_FILE:
        return InputType.PUBLISHED
    return None


def _named(p: Path) -> Path:
    """The path to search for a path given: a folder itself, a record file's folder (an lm-eval results file
    itself); IngestError (one line) for a missing path or a file of no known input."""
    if not p.exists():
        raise IngestError(f"{p}: no such file or directory")
    if p.is_dir():
        return p
    kind = input_type(p)
    if kind is None:
        known = "; ".join(t.value for t in InputType)
        raise IngestError(f"{p}: not an input ingest reads (name one of: {known}; or a folder holding them)")
    return p if kind is InputType.EXTERNAL else p.parent


def _holds_inputs(d: Path) -> bool:
    return any(input_type(f) is not None for f in [*d.iterdir(), *d.rglob("*")] if f.is_file())


def check_no_linked_runs(p: Path) -> None:
    """IngestError naming a symbolic link to a folder under ``p`` that holds runs: the search does not follow
    links (a run could be read twice, or from outside the folder given), and skipping it said nothing."""
    for link in sorted(f for f in p.rglob("*") if f.is_symlink() and f.is_dir()):
        if _holds_inputs(link):
            raise IngestError(f"{link}: a symbolic link to a folder of runs ({link.resolve()}); ingest does not "
                              "follow links inside the folders it searches: name the target itself, or copy it "
                              "here")  # fmt: skip


def discover(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(results directories and lm-eval results files, checkpoint directories) under ``paths``; a linked folder
    of runs under them is refused (:func:`check_no_linked_runs`)."""
    results, checkpoints = set(), set()
    for p in map(_named, paths):
        if p.is_dir():
            check_no_linked_runs(p)
        for f in [p / "results.json", *p.rglob("results.json")] if p.is_dir() else []:
            if f.is_file():
                results.add(f.parent)
        for f in [p, *(p.rglob("results_*.json") if p.is_dir() else [])]:  # plain lm_eval: a file per run
            if f.is_file() and LM_EVAL_RESULTS.match(f.name) and not (f.parent / "results.json").is_file():
                results.add(f)
        for name in SUMMARIES if p.is_dir() else ():
            for f in [p / name, *p.rglob(name)]:
                if f.is_file():
                    checkpoints.add(f.parent)
    return sorted(results), sorted(checkpoints)


def published_home(path: Path) -> Path | None:
    """The published folder (one with a SOURCE.json) that ``path`` is, or lies in; None for any other path."""
    for d in (path, *path.parents) if path.is_dir() else path.parents:
        if (d / SOURCE_FILE).is_file():
            return d
    return None
