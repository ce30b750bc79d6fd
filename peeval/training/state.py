"""The resume state of a training run (``train_state.pt``) and the rules of an output folder.

The state holds model, optimizer, scheduler, RNG and curve, and everything that defines the run
(``run``: encoding or method, settings, seed, tokenizer...): it is resumed only by the same run, and
an ``--out`` holding a finished run is replaced only on request.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from .._io import Claimed, atomic_write, claim_dir, files_aside, tmp_path
from .._io.outputs import MANIFEST, holds_nothing_of, is_written_by, start_manifest

STATE_FILE = "train_state.pt"
MAX_SEED = 2**32 - 1  # numpy's seed range (transformers.set_seed seeds numpy too)


class NonFiniteLoss(ValueError):
    """The loss became NaN or infinite: the run diverged, and no checkpoint is written."""


class ResumeMismatch(ValueError):
    """The resume state was written by a different run (encoding, settings, seed, tokenizer...)."""


def check_seed(seed: Any) -> None:
    """A run's seed is an integer that every RNG it seeds accepts."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed {seed!r}: allowed an integer from 0 to {MAX_SEED}")


def _torch_save(obj: Any, tmp: Path) -> None:
    """torch.save, its writer's failure an OSError: on a full disk torch raises a RuntimeError with no errno
    ("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534", measured on a full tmpfs), which
    reached the user as a traceback."""
    try:
        torch.save(obj, tmp)
    except RuntimeError as e:
        if "inline_container" not in str(e) and "PytorchStreamWriter" not in str(e) and "write failed" not in str(e):
            raise
        import errno

        raise OSError(errno.EIO, f"torch.save could not write it (is the disk full? {' '.join(str(e).split())})",
                      str(tmp)) from e  # fmt: skip


def atomic_torch_save(obj: Any, path: Path) -> None:
    atomic_write(path, lambda tmp: _torch_save(obj, tmp))


def jsonable(prof: dict) -> dict:
    """``prof`` as JSON would give it back (tuples as lists, odd values as strings): comparable with a
    recorded one."""
    return json.loads(json.dumps(prof, default=str))


def rng_state() -> dict:
    import random

    import numpy as np

    st = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict) -> None:
    import random

    import numpy as np

    torch.set_rng_state(st["torch"])
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def save_state(path, model, opt, sched, step, rows, tokens, elapsed, prof, seed, run) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_torch_save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "rng": rng_state(),
            "step": step,
            "rows": rows,
            "tokens": tokens,
            "elapsed_s": elapsed,
            "prof": jsonable(prof),
            "seed": seed,
            "run": run,
        },
        path,
    )


def load_state(path: Path) -> dict:
    """``train_state.pt`` as a dict; a truncated or foreign file is one error naming it."""
    try:
        st = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as e:  # torch raises RuntimeError / EOFError / UnpicklingError for a damaged file
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0]
        raise ValueError(
            f"{path}: cannot read the resume state, truncated or corrupt ({first}): delete it, or start anew "
            "with --overwrite"
        ) from e
    need = ("model", "optimizer", "scheduler", "rng", "step", "rows", "tokens", "elapsed_s")
    if not isinstance(st, dict) or any(k not in st for k in need):
        raise ValueError(f"{path}: not a peeval resume state (no {', '.join(need)}): delete it, or use --overwrite")
    return st


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_same_run(path: Path, old: dict | None, new: dict) -> None:
    """Refuse to resume a state whose run differs from this one, naming every differing key."""
    if old is None:
        raise ResumeMismatch(
            f"{path} was written by an older peeval that did not record the run's settings: delete it, or start "
            "anew with --overwrite"
        )
    a, b = _flatten(old), _flatten(new)
    missing = object()
    # what the user names (pe, task, seed, tokenizer...) first, then settings, then derived model fields
    rank = {"settings": 1, "model_config": 2}
    diff = sorted(
        (k for k in a.keys() | b.keys() if a.get(k, missing) != b.get(k, missing)),
        key=lambda k: (rank.get(k.split(".")[0], 0), k),
    )
    if diff:
        shown = "; ".join(f"{k}: {a.get(k, '<absent>')!r} there, {b.get(k, '<absent>')!r} now" for k in diff[:6])
        more = f"; and {len(diff) - 6} more" if len(diff) > 6 else ""
        raise ResumeMismatch(
            f"{path} belongs to a different run ({shown}{more}): rerun with the same settings to resume, or "
            "start anew with --overwrite"
        )


def drop_state(state_path: Path, keep_dir: Path) -> None:
    """Delete a finished run's resume state (and its folder when it is a separate, now empty one)."""
    state_path = Path(state_path)
    state_path.unlink(missing_ok=True)
    tmp_path(state_path).unlink(missing_ok=True)
    d = state_path.parent
    if d.resolve() != Path(keep_dir).resolve() and d.is_dir() and not any(d.iterdir()):
        d.rmdir()


def check_out_dir(out: Path, finished_files: tuple[str, ...], state_path: Path, overwrite: bool, flag: str) -> None:
    """Refuse an ``--out`` that is a file, or that holds a finished run, unless ``overwrite``."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, allowed a folder (new or holding a checkpoint to resume)")
    done = [f for f in finished_files if (out / f).exists()]
    if done and not overwrite and not state_path.exists():
        raise ValueError(
            f"--out {out} already holds a finished run ({', '.join(done)}): pass {flag} to replace it, or "
            "choose another folder"
        )


#: what a run writes into ``--out`` besides its summaries (``save_pretrained`` of the model and its tokenizer,
#: moved in by rename): a file of these names the manifest does not list is someone else's, never written over
RUN_FILES = ("config.json", "generation_config.json", "*.safetensors", "tokenizer*", "vocab*", "merges.txt",
             "special_tokens_map.json", "added_tokens.json", "README.md", "adapter_*", "*.bin")  # fmt: skip
#: the claim ``peeval train`` / ``peeval adapt`` hold on ``--out`` while they run (``_io.claim_dir``)
RUN_LOCK = ".peeval-run.lock"


def is_run_dir(out: Path, state_path: Path, writer: str, replaced: tuple[str, ...]) -> bool:
    """``out`` is ``writer``'s (``peeval train`` / ``peeval adapt``) run folder: its resume state, or the manifest
    the writer left (``_io.outputs.is_written_by``: every listed file unchanged, no unlisted file the run would
    replace), or a folder holding nothing a run writes and no other command's manifest (a user's data folder: the
    run takes nothing from it). Never judged by a name or a config: a training checkpoint is not an adapter's
    folder, an export or a base model not a training run's (issue 66). The output policy's test for ``--out``."""
    if Path(state_path).exists() or (out.is_dir() and {p.name for p in out.iterdir()} <= {RUN_LOCK}):
        return True  # resumable, or holding only the claim (this run's, or a killed run's before its first file)
    return is_written_by(out, writer, (*replaced, *RUN_FILES)) or holds_nothing_of(out, (*replaced, *RUN_FILES))


@contextmanager
def writing_run(out: Path, writer: str, recheck=None, extras: tuple[str, ...] = ()):
    """Hold ``out`` for this run (``_io.claim_dir``: a second run into the same folder meanwhile is refused in one
    line) and mark it as ``writer``'s before its first file (``start_manifest``); a run that fails before writing
    anything but its ``extras`` (the step-0 control) leaves neither the mark, them, nor a folder it created.
    ``recheck()``: the output checks again, once the claim is held (another run may have finished meanwhile). In a
    launch's other processes (RANK > 0) nothing: rank 0 claims and writes."""
    import os
    import shutil

    if int(os.environ.get("RANK", "0")) != 0:
        yield
        return
    try:
        with claim_dir(out, RUN_LOCK):
            if recheck is not None:
                recheck()
            marked = start_manifest(out, writer)
            try:
                yield
            except BaseException:
                left = [p for p in out.iterdir() if p.name not in (MANIFEST, RUN_LOCK)] if out.is_dir() else []
                if marked and all(p.name in extras for p in left):  # only what this run began (its step-0 control)
                    for p in left:
                        shutil.rmtree(p, ignore_errors=True)
                    (out / MANIFEST).unlink(missing_ok=True)
                raise
    except Claimed as e:
        raise ValueError(f"--out: {e}: wait for it, or choose another --out") from None


@contextmanager
def cleaned_on_failure(out: Path, state_path: Path, curve: str = "train_curve.csv", extras: tuple[str, ...] = ()):
    """A run that fails leaves no empty ``--out`` it created (Ctrl-C, SIGTERM, a bad setting found
    late), nor one holding only its ``extras`` (the step-0 control folder, written before the first update);
    one that diverged (:class:`NonFiniteLoss`) also leaves no resume state or curve of its
    own: resuming it would diverge again. Used inside ``overwriting`` (which then restores the old run)."""
    import shutil

    out = Path(out)
    created = not out.exists()
    try:
        yield
    except NonFiniteLoss:
        drop_state(state_path, out)
        (out / curve).unlink(missing_ok=True)
        raise
    finally:
        if created and out.is_dir() and all(p.name in extras for p in out.iterdir()):
            for name in extras:
                shutil.rmtree(out / name, ignore_errors=True)
            out.rmdir()


@contextmanager
def overwriting(out: Path, state_path: Path, patterns: tuple[str, ...], overwrite: bool = True):
    """``--overwrite``: the previous run's resume state is discarded and its finished outputs are set
    aside while the new run trains (``_io.files_aside``): deleted when it finishes, moved back when it
    fails (a full disk, Ctrl-C), so a failed overwrite keeps the finished checkpoint."""
    if not overwrite:
        yield
        return
    Path(state_path).unlink(missing_ok=True)
    try:
        with files_aside(out, patterns):
            yield
    except BaseException:
        Path(state_path).unlink(missing_ok=True)  # the failed new run's state: the old run is back
        raise
