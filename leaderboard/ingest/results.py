"""A ``peeval eval`` results folder: ``results.json`` with its ``peeval`` provenance (+ ``samples_<task>.jsonl``).

The run's kind comes from its own record, never from its model's name: the summaries of the checkpoint it
evaluated (an ``adapt_summary.json``, or an adapter loaded: adapt; a ``train_summary.json``: diagnostic when
trained on a task, else pretrain) and the kind ``peeval eval`` recorded (``peeval.run_kind``); the two must
agree. Results written before peeval recorded it (the published ones) keep the rule of their time: the
packaged base model as shipped is the adapters' reference row (adapt), any other model external.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from leaderboard.store import RunKind
from peeval.records import (
    LOCAL_SOURCE,
    PROVENANCE_KEY,
    SHIPPED_MODELS,
    adapted_name,
    base_model_label,
    encoding_label,
    external_name,
    shipped_name,
    size_tag,
    sized_label,
    task_setting,
    task_setting_label,
    trained_base_label,
)
from peeval.training.profiles import TRAIN_PROFILES, get_profile

from .external import LM_EVAL_RESULTS, parse_external, results_file
from .identity import check_checkpoint
from .rows import RunRows
from .run import RunRecord, measure, read_results, run_rows
from .values import IngestError, obj, rel, summary

ADAPT_SUMMARY, TRAIN_SUMMARY = "adapt_summary.json", "train_summary.json"
#: a training profile's name -> the settings of its default shape (None: unknown, the name carries no size)
Defaults = Callable[[str], dict | None]


def profile_defaults(profile: str) -> dict | None:
    """A local run's default shape: its training profile as peeval defines it now (the run was made here)."""
    return get_profile("train", profile) if profile in TRAIN_PROFILES else None


def parse_results_dir(run_dir: Path, root: Path, defaults: Defaults = profile_defaults) -> RunRows:
    """All rows one run contributes: a ``peeval eval`` results directory, or a results file of plain
    ``lm_eval --log_samples`` (an external run); IngestError naming the file if any part is malformed.
    ``defaults``: the default shape of a training profile (a pretrained model of another shape is named with
    its size)."""
    path = results_file(run_dir)
    try:
        doc, raw = read_results(path)
        prov = doc.get(PROVENANCE_KEY)
        if prov is None and (plain := LM_EVAL_RESULTS.match(path.name)):
            return parse_external(doc, raw, path, root, plain["date"])
        return parse_peeval(doc, raw, path, root, defaults)
    except IngestError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise IngestError(f"{path}: {e}") from e


def parse_peeval(doc: dict, raw: bytes, path: Path, root: Path, defaults: Defaults = profile_defaults) -> RunRows:
    """The rows of one ``peeval eval`` results.json."""
    prov = doc.get(PROVENANCE_KEY)
    if not isinstance(prov, dict) or "model" not in prov or "date" not in prov:
        raise IngestError(f"{path}: no 'peeval' provenance (write results with `peeval eval`, or keep plain "
                          "lm_eval's own results_<date>.json name)")  # fmt: skip
    got = measure(doc, raw, path)
    record = peeval_record(prov, path, root, defaults)
    if prov.get("like"):  # yours, scored against a board: a row of its own, named by its run, never by encoding
        record = dataclasses.replace(record, name=path.parent.name)
    return run_rows(doc, path, root, prov, record, got)


#: a step-0 control's ``control`` (``peeval.training.pretrain.STEP0_CONTROL``) and what its row name adds
STEP0, STEP0_SUFFIX = "step0", " untrained (step 0)"


def peeval_record(prov: dict, path: Path, root: Path, defaults: Defaults = profile_defaults) -> RunRecord:
    """What a peeval run's record says of its model: the checkpoint it evaluated (checked unchanged since), its
    summaries, its kind and the row name that kind gives it."""
    model_args = obj(prov, "model_args", "peeval")
    if not isinstance(model_args.get("adapter") or prov.get("checkpoint") or "", str):
        raise ValueError("peeval.checkpoint and peeval.model_args.adapter must be paths (strings)")
    ckpt_raw = model_args.get("adapter") or prov.get("checkpoint")
    ckdir = (root / ckpt_raw) if ckpt_raw and not Path(ckpt_raw).is_absolute() else Path(ckpt_raw or ".")
    check_checkpoint(prov, model_args, path, root)
    pe, pe_options = prov.get("pe"), obj(prov, "pe_options", "peeval")
    train = adapt = None
    if (ckdir / ADAPT_SUMMARY).is_file():
        adapt = summary(ckdir / ADAPT_SUMMARY)
    elif (ckdir / TRAIN_SUMMARY).is_file():
        train = summary(ckdir / TRAIN_SUMMARY)
        pe_options = train.get("pe_options") or pe_options
        if not isinstance(pe_options, dict):
            raise IngestError(f"{ckdir / TRAIN_SUMMARY}: 'pe_options' must be an object")
    kind = run_kind(prov, model_args, train, adapt, path, ckdir)
    common = {"kind": kind, "source": LOCAL_SOURCE, "pe_options": pe_options, "checkpoint": rel(ckpt_raw, root),
              "train": train, "adapt": adapt}  # fmt: skip
    if kind is RunKind.ADAPT and (adapt is not None or model_args.get("adapter")):
        name, base_train = _adapted(adapt, ckpt_raw, root)
        return RunRecord(name=name, pe=pe, base_train=base_train, **common)
    if kind is RunKind.ADAPT:  # the adapters' base as shipped: their reference row (params.adapt null: no method)
        label = base_model_label(model_args.get("gguf_file"))
        if label is None:
            raise IngestError(f"{path}: peeval.run_kind is 'adapt' but names neither an adapter nor a packaged base "
                              f"model (model_args.gguf_file one of: {', '.join(SHIPPED_MODELS)})")  # fmt: skip
        return RunRecord(name=shipped_name(label), pe=pe, **common)
    if kind in (RunKind.PRETRAIN, RunKind.DIAGNOSTIC):
        pe = train.get("pe") or pe
        label = encoding_label(pe, pe_options)
        if train.get("control") == STEP0:  # a run's untrained control (issue 67): its own row, never one more seed
            label += STEP0_SUFFIX
        if kind is RunKind.PRETRAIN:  # another shape than its profile's is another row (issue 43's ladder)
            profile = train.get("profile")
            shape = (train.get("settings"), defaults(profile) if isinstance(profile, str) else None)
            return RunRecord(name=sized_label(label, *shape), pe=pe, size=size_tag(*shape), **common)
        # another generator setting than its task's default is another row (flip-flop at 256 pairs)
        setting = _task_setting(train)
        return RunRecord(name=task_setting_label(label, *setting), pe=pe, task_setting=task_setting(*setting),
                         **common)  # fmt: skip
    name = external_name(prov["model"], Path(str(ckpt_raw)).name if ckpt_raw else None)
    return RunRecord(name=name, pe=pe, **common)


def _task_setting(train: dict) -> tuple[dict, dict | None]:
    """A diagnostic training's generator parameters (``settings.task_params``) and its task's defaults at its
    generator size (``settings.gen_profile``); None when the task or size is not one peeval knows."""
    from peeval.tasks.diagnostics.generators import params

    settings = train.get("settings") if isinstance(train.get("settings"), dict) else {}
    given = settings.get("task_params") if isinstance(settings.get("task_params"), dict) else {}
    try:
        return given, params(str(train.get("task")), str(settings.get("gen_profile") or "cpu"))
    except ValueError:
        return given, None


def summary_kind(model_args: dict, train: dict | None, adapt: dict | None) -> RunKind | None:
    """The kind the evaluated checkpoint's own summaries say (an adapter loaded: adapt); None without one."""
    if adapt is not None or model_args.get("adapter"):
        return RunKind.ADAPT
    if train is not None:
        return RunKind.DIAGNOSTIC if train.get("task") else RunKind.PRETRAIN
    return None


def recorded_kind(prov: dict, path: Path) -> RunKind | None:
    """``peeval.run_kind`` as ``peeval eval`` recorded it; None in results written before it did."""
    value = prov.get("run_kind")
    if value is None:
        return None
    try:
        return RunKind(value)
    except ValueError:
        kinds = ", ".join(k.value for k in RunKind)
        raise IngestError(f"{path}: peeval.run_kind {value!r} is not one of {kinds}") from None


def legacy_kind(prov: dict, model_args: dict) -> RunKind:
    """The kind of a run whose results predate ``peeval.run_kind`` and whose checkpoint has no summary: the
    packaged base evaluated as shipped by peeval's Llama (its GGUF, no rope scaling) is the adapters' reference
    row, any other model external (the rule those results were written under)."""
    shipped = base_model_label(model_args.get("gguf_file")) and not model_args.get("rope_scaling")
    return RunKind.ADAPT if prov["model"] == "peeval-llama" and shipped else RunKind.EXTERNAL


def run_kind(prov: dict, model_args: dict, train: dict | None, adapt: dict | None, path: Path, ckdir: Path) -> RunKind:
    """The run's kind from its record: the recorded one, checked against the checkpoint's summaries; else what
    the summaries say; else (older results) :func:`legacy_kind`."""
    recorded, summarised = recorded_kind(prov, path), summary_kind(model_args, train, adapt)
    if recorded is not None and summarised is not None and recorded is not summarised:
        found = ADAPT_SUMMARY if adapt is not None else TRAIN_SUMMARY if train is not None else "its adapter"
        raise IngestError(f"{path}: peeval.run_kind is {recorded.value!r} but the checkpoint {ckdir} ({found}) makes "
                          f"it {summarised.value!r}: evaluate the checkpoint again")  # fmt: skip
    if recorded in (RunKind.PRETRAIN, RunKind.DIAGNOSTIC) and train is None:
        raise IngestError(f"{path}: peeval.run_kind is {recorded.value!r} but {ckdir / TRAIN_SUMMARY} is missing "
                          "(moved or deleted): ingest from the root it was evaluated in")  # fmt: skip
    return recorded or summarised or legacy_kind(prov, model_args)


def _trained_base(adapt: dict | None, root: Path) -> dict | None:
    """The train_summary of an adapter's base when that base is a peeval pretraining checkpoint (its
    ``base`` folder, relative to ``root`` as the pipeline writes it), else None."""
    base = (adapt or {}).get("base")
    if not isinstance(base, str) or not base:
        return None
    f = (Path(base) if Path(base).is_absolute() else root / base) / TRAIN_SUMMARY
    return summary(f) if f.is_file() else None


def _adapted(adapt: dict | None, ckpt_raw, root: Path) -> tuple[str, dict | None]:
    """An adapter's row name (``<base label> + <method>``, or the method alone for another base) and, when it
    extended a peeval model, that model's budget."""
    name = str((adapt or {}).get("method") or Path(str(ckpt_raw)).name)
    if (label := base_model_label((adapt or {}).get("gguf_file"))) is not None:
        return adapted_name(label, name), None
    if (base := _trained_base(adapt, root)) is not None:  # the pipeline's own model extended (`extend`)
        label = trained_base_label(base.get("pe"), base.get("pe_options"), base.get("training_length"))
        return adapted_name(label, name), {"tokens": base.get("tokens"), "params": base.get("params")}
    return name, None
