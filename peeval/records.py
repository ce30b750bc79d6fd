"""Every string format that crosses a file boundary downstream of ``results.json`` (torch-free).

One module writes and reads them, so a producer (task, ``peeval eval``, shift measurement,
training) and a consumer (``leaderboard.ingest``, the site, the claims) cannot drift apart.
Rule: nothing parses a metric name, task name, label or curve column that is not defined here.

API (all pure functions of strings and numbers; ``decode`` returns None for "not this format"):

- task names: ``ppl_task(corpus)`` / ``ppl_corpus(task)``, ``PASSKEY_TASK``, ``SHIFT_TASK``,
  ``diag_task(name, split)`` / ``split_diag_task(task)``, ``DIAG_TASKS``;
- metric cells, encode / decode:
  ``ppl_metric(base, L)`` ``"ppl@512"`` / ``parse_ppl_metric(m) -> (base, L)`` (base in ``PPL_BASES``);
  ``passkey_metric(L, depth)`` ``"acc@512@0.5"`` / ``parse_passkey_metric(m) -> (L_text, depth_text)``;
  ``addition_cell(a, b)`` ``"3x5"``, ``addition_metric(a, b)`` ``"acc@3x5"`` / ``parse_addition_cell(c) -> (a, b)``;
  ``diag_cell_metric(cell)`` ``"acc@<cell>"`` / ``parse_diag_cell_metric(m) -> cell``; flip-flop ``FLIP_FLOP_METRICS``;
  ``shift_metric(base, shift, layer)`` ``"attn_diff@shift_ids@3"`` / ``parse_shift_metric(m) -> (base, shift, layer)``;
  what a task of these families reports: ``family_metric(task, m) -> (description, ok)``;
  ``metric_base(m)`` (the part before the first ``@``), ``is_cell(m)`` (has an ``@`` part);
- results keys of lm-eval: ``result_key(metric, filter)`` ``"acc,none"``, ``stderr_key`` ``"acc_stderr,none"``;
- the provenance record of ``peeval eval`` / the shift measurement: :class:`Provenance`
  (``to_json()`` -> the dict stored under ``results["peeval"]`` (``PROVENANCE_KEY``), ``from_json(d)``);
- labels: ``encoding_label(pe, pe_options)`` ``"tape(equivariant=False)"``, ``adapt_label(method)``
  ``"adapt:pi"``, ``external_name(model, checkpoint_name)``, ``published_name(name, profile)``;
  the adaptation family of a packaged base model: ``base_model_label(gguf_file)``
  ``"SmolLM2-135M-Instruct (GGUF Q4_1)"``, ``shipped_name(label)`` ``"SmolLM2-135M-Instruct (GGUF Q4_1) as shipped"``,
  ``adapted_name(label, method)`` ``"SmolLM2-135M-Instruct (GGUF Q4_1) + yarn"``, ``shipped_first(name)`` (row order);
- the data a task read (``peeval.data`` records it): ``DATA_SOURCES``, ``data_label(source, location)``
  ``"Gutenberg books (PG-19 substitute)"`` (``DATA_NAMES``), ``task_label(task, reads)``;
- sample texts: ``clip_text(text, limit)`` (head and tail around a marker; cutting twice changes nothing);
- training curves: ``CURVE_COLUMNS`` (the header of ``train_curve.csv``);
- the metric registry: :data:`METRICS` (each metric base once: kind and unit, direction, headline rank,
  aggregation over seeds, per-example outcome), ``metric_spec(m)``, ``higher_is_better(m, lm_eval)``,
  ``metric_kind(task, m)``, ``headline_metrics(ms)``, ``is_count(m)``, ``is_outcome(m)``, ``outcome_scale(m)``;
- statistics: ``mean_stderr(xs)`` (mean, stdev/sqrt(n) or None for n < 2), ``seed_stderr(xs)``, and the one
  mean ± stderr over seeds that the leaderboard and the claims show, :func:`seed_estimate`;
- the interval of a difference of two such estimates: :func:`welch_difference` (Student's ``t_quantile``);
- the site's number format: ``fmt_number(v, digits=4)``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------- task names
PPL_PREFIX = "peeval_ppl_"
PASSKEY_TASK = "peeval_passkey"
DIAG_PREFIX = "peeval_diag_"
SHIFT_TASK = "peeval_shift_stability"
#: the diagnostic generators (peeval.tasks.diagnostics.generators.TASKS is this tuple)
DIAG_TASKS: tuple[str, ...] = ("indirect_indexing", "flip_flop", "selective_copy", "counting", "addition")
#: the generators' size sets (``generators.params(profile=...)``, a diag profile's ``gen_profile``,
#: params.yaml ``diagnostics.eval.profile``): not the training profiles of peeval.training.profiles
GEN_PROFILES: tuple[str, ...] = ("cpu", "paper")


def ppl_task(corpus: str) -> str:
    """``pg19`` -> ``peeval_ppl_pg19``."""
    return PPL_PREFIX + corpus


def ppl_corpus(task: str) -> str | None:
    """``peeval_ppl_pg19`` -> ``pg19``; None for another task."""
    return task[len(PPL_PREFIX) :] if task.startswith(PPL_PREFIX) else None


def diag_task(name: str, split: str) -> str:
    """(``flip_flop``, ``ood_dense``) -> ``peeval_diag_flip_flop_ood_dense``."""
    return f"{DIAG_PREFIX}{name}_{split}"


def split_diag_task(task: str) -> tuple[str, str] | None:
    """``peeval_diag_<task>_<split>`` -> (task, split): the longest known generator name wins (task
    names hold underscores); an unknown one splits at the last underscore, no underscore -> split "test"."""
    if not task.startswith(DIAG_PREFIX):
        return None
    rest = task[len(DIAG_PREFIX) :]
    for name in sorted(DIAG_TASKS, key=len, reverse=True):
        if rest.startswith(name + "_"):
            return name, rest[len(name) + 1 :]
    head, _, split = rest.rpartition("_")
    return (head, split) if head else (rest, "test")


# ----------------------------------------------------------------------------- metric cells
PPL_BASES = ("ppl", "bpb", "tokens", "windows")
#: peeval's SCROLLS tasks (their scores are percentages)
SCROLLS_PREFIX = "peeval_scrolls_"
SHIFTS = ("add_tokens", "shift_ids")
SHIFT_BASES = ("attn_diff", "pe_dot_diff")
FLIP_FLOP_METRICS = ("read_acc", "seq_acc")
#: diagnostic_cells.cell of a task's overall accuracy
ALL_CELL = "all"


def metric_base(metric: str) -> str:
    """``ppl@512`` -> ``ppl``; a plain metric is its own base."""
    return metric.partition("@")[0]


def is_cell(metric: str) -> bool:
    """True for a per-cell metric (``base@...``)."""
    return "@" in metric


def ppl_metric(base: str, length: int) -> str:
    """``ppl@<L>`` (also ``bpb``, ``tokens``, ``windows``)."""
    if base not in PPL_BASES:
        raise ValueError(f"ppl metric base {base!r}: must be one of {list(PPL_BASES)}")
    return f"{base}@{length}"


#: the loss by position inside the longest perplexity windows: ``nll_pos@<first context size of the bucket>``
POSITION_BASE = "nll_pos"


def position_metric(position: int) -> str:
    """``nll_pos@<P>``: mean NLL of the targets predicted from P.. tokens of context (one position bucket)."""
    return f"{POSITION_BASE}@{position}"


def parse_position_metric(metric: str) -> int | None:
    """``nll_pos@128`` -> 128; None for anything else."""
    base, _, cell = metric.partition("@")
    return int(cell) if base == POSITION_BASE and cell.isdigit() else None


def parse_ppl_metric(metric: str) -> tuple[str, int] | None:
    """``ppl@512`` -> (``ppl``, 512); None unless base in PPL_BASES and L all digits."""
    base, _, cell = metric.partition("@")
    if base in PPL_BASES and cell.isdigit():
        return base, int(cell)
    return None


def passkey_metric(length: int, depth: float) -> str:
    """``acc@<length>@<depth>``, the depth as Python prints the float (``0.0``, ``0.25``)."""
    return f"acc@{length}@{depth}"


def parse_passkey_metric(metric: str) -> tuple[str, str] | None:
    """``acc@512@0.5`` -> (``"512"``, ``"0.5"``): the texts, so the caller's range check names them."""
    base, _, cell = metric.partition("@")
    if base != "acc" or cell.count("@") != 1:
        return None
    length, depth = cell.split("@")
    return length, depth


def addition_cell(len_a: int, len_b: int) -> str:
    """The addition grid cell ``<len_a>x<len_b>``."""
    return f"{len_a}x{len_b}"


def parse_addition_cell(cell: str) -> tuple[int, int] | None:
    """``3x5`` -> (3, 5); None for another cell."""
    m = re.fullmatch(r"(\d+)x(\d+)", cell)
    return (int(m[1]), int(m[2])) if m else None


def diag_cell_metric(cell: str) -> str:
    """``acc@<cell>`` (a diagnostic task's per-cell accuracy)."""
    return f"acc@{cell}"


def addition_metric(len_a: int, len_b: int) -> str:
    """``acc@<len_a>x<len_b>``."""
    return diag_cell_metric(addition_cell(len_a, len_b))


def parse_diag_cell_metric(metric: str) -> str | None:
    """``acc@3x5`` -> ``3x5``; None unless an ``acc@<cell>`` metric."""
    base, _, cell = metric.partition("@")
    return cell if base == "acc" and cell else None


def shift_metric(base: str, shift: str, layer: int) -> str:
    """``<base>@<shift>@<layer>``, e.g. ``attn_diff@shift_ids@3`` (layers from 1)."""
    return f"{base}@{shift}@{layer}"


def parse_shift_metric(metric: str) -> tuple[str, str, int] | None:
    """``attn_diff@shift_ids@3`` -> (``attn_diff``, ``shift_ids``, 3); None otherwise."""
    m = re.fullmatch(rf"({'|'.join(SHIFT_BASES)})@({'|'.join(SHIFTS)})@(\d+)", metric)
    return (m[1], m[2], int(m[3])) if m else None


def family_metric(task: str, metric: str) -> tuple[str, bool] | None:
    """(what ``task`` reports, whether ``metric`` is one of those) for a task of one of the families whose
    metric names this module formats (shift stability, perplexity, passkey, diagnostics); None otherwise."""
    if task == SHIFT_TASK:
        bases = " or ".join(f"{b}@<shift>@<layer>" for b in SHIFT_BASES)
        return f"{bases}, shift in {', '.join(SHIFTS)}", parse_shift_metric(metric) is not None
    if ppl_corpus(task) is not None:
        *first, last = (f"{b}@L" for b in PPL_BASES)
        ok = parse_ppl_metric(metric) is not None or parse_position_metric(metric) is not None
        return f"{', '.join(first)}, {last} (L a length, {{max}} or {{train}}) or {POSITION_BASE}@P", ok
    if task == PASSKEY_TASK:
        pk = parse_passkey_metric(metric)
        cell = pk is not None and pk[0].isdigit() and re.fullmatch(r"(0|1)(\.\d+)?", pk[1]) is not None
        return "acc or acc@<length>@<depth>", metric == "acc" or cell
    if (diag := split_diag_task(task)) is not None:
        extra = list(FLIP_FLOP_METRICS) if diag[0] == "flip_flop" else []
        cells = [ALL_CELL, *extra, *(["<a>x<b>"] if diag[0] == "addition" else [])]
        cell = parse_diag_cell_metric(metric)
        ok = metric in ("acc", *extra) or cell in (ALL_CELL, *extra)
        ok = ok or (diag[0] == "addition" and cell is not None and parse_addition_cell(cell) is not None)
        return ", ".join(["acc", *extra, *(diag_cell_metric(c) for c in cells)]), ok
    return None


def result_key(metric: str, filt: str = "none") -> str:
    """lm-eval's results key ``<metric>,<filter>``."""
    return f"{metric},{filt}"


def stderr_key(metric: str, filt: str = "none") -> str:
    """lm-eval's stderr key ``<metric>_stderr,<filter>``."""
    return f"{metric}_stderr,{filt}"


def parse_result_key(key: str) -> tuple[str, str] | None:
    """``acc,none`` -> (``acc``, ``none``); None for ``alias``-like keys and for stderr keys."""
    if "," not in key or key.split(",")[0].endswith("_stderr"):
        return None
    metric, filt = key.rsplit(",", 1)
    return metric, filt


# ----------------------------------------------------------------------------- provenance
PROVENANCE_KEY = "peeval"


@dataclass
class Provenance:
    """What produced a results.json (``results["peeval"]``): code, checkpoint, encoding, protocol,
    machine. Written by ``peeval eval`` and ``python -m peeval.shift_stability``; read by ingest.
    ``to_json`` keeps this field order and writes every field (None as null)."""

    peeval_version: str | None
    git_commit: str | None
    model: str
    model_args: dict
    checkpoint: str | None
    checkpoint_sha256: str | None
    pe: str | None
    pe_options: dict | None
    rope_parameters: Any
    training_length: int | None
    max_length: int | None
    protocol: dict
    dtype: str | None
    seed: int | None
    limit: Any
    device: str | None
    world_size: int | None
    torch_threads: int | None
    versions: dict
    command: list
    date: str
    #: per task, the datasets it read (peeval.data.recording): source, location, revision, documents' sha256
    data: dict | None = None
    #: the CPU and torch's CPU kernel path (peeval._versions.cpu_identity): what a bit-for-bit rerun needs
    cpu: dict | None = None
    #: what made the model (leaderboard.store.RunKind: pretrain, diagnostic, adapt, external), recorded where the
    #: run is made so ingest reads it rather than guessing it from the model's name; None: an older writer
    run_kind: str | None = None
    extra: dict = field(default_factory=dict)  # keys of a newer writer, kept on a round trip

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**d, **self.extra}

    @classmethod
    def from_json(cls, d: dict) -> Provenance:
        """From a ``results["peeval"]`` dict; missing fields are None (older writers), unknown keys kept."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "extra"]
        return cls(**{n: d.get(n) for n in names}, extra={k: v for k, v in d.items() if k not in names})


# ----------------------------------------------------------------------------- labels
def encoding_label(pe: str | None, pe_options: dict | None) -> str:
    """The leaderboard name of an encoding: ``pe`` or ``pe(k=v,...)`` (keys sorted)."""
    opts = pe_options or {}
    if not opts:
        return str(pe)
    return f"{pe}(" + ",".join(f"{k}={opts[k]}" for k in sorted(opts)) + ")"


def adapt_label(method: str) -> str:
    """An adaptation method's encoding label: ``adapt:<method>``."""
    return f"adapt:{method}"


#: packaged base models of `peeval adapt` (file name -> row label); the GGUF is
#: ``peeval.models.llama_adapters.SMOLLM2_GGUF`` (SmolLM2-135M-Instruct, Q4_1, dequantised to float32)
#: the label names the file that is measured (the Instruct model, 4-bit Q4_1), not the base SmolLM2-135M it
#: was made from: rows of it answer what adaptation costs this packaged model
SHIPPED_MODELS = {"SmolLM2-135M-Instruct.Q4_1.gguf": "SmolLM2-135M-Instruct (GGUF Q4_1)"}


def base_model_label(gguf_file: str | None) -> str | None:
    """The row label of a packaged base model, or None for any other checkpoint."""
    return SHIPPED_MODELS.get(str(gguf_file)) if gguf_file else None


def shipped_name(label: str) -> str:
    """The base model evaluated without adaptation: ``<label> as shipped``."""
    return f"{label} as shipped"


def trained_base_label(pe: str, pe_options: dict | None, window: int | None) -> str:
    """A peeval-pretrained model as the base of an adaptation (params.yaml ``extend``): ``rope (256 tokens)``."""
    label = encoding_label(pe, pe_options or {})
    return f"{label} ({window} tokens)" if window else label


def adapted_name(label: str, method: str) -> str:
    """The base model after one adaptation method: ``<label> + <method>``."""
    return f"{label} + {method}"


def shipped_first(name: str) -> tuple[str, int, str]:
    """Sort key of row names: a packaged model as shipped right above its adaptations (its reference row;
    by name alone ``as shipped`` would sort after ``+ lora``), every other name by itself."""
    for label in SHIPPED_MODELS.values():
        if name == shipped_name(label):
            return label, 0, name
        if name.startswith(adapted_name(label, "")):
            return label, 1, name
    return name, 0, name


def external_name(model: str, checkpoint_name: str | None) -> str:
    """A run of a model peeval did not train: ``<model>:<checkpoint folder>`` or ``<model>``."""
    return str(model) if checkpoint_name is None else f"{model}:{checkpoint_name}"


def published_name(name: str, profile: str) -> str:
    """A published run's name: ``<name> @<profile>``."""
    return f"{name} @{profile}"


#: ``runs.source`` of a run made by this repository's own pipeline (schema.sql's default)
LOCAL_SOURCE = "local"
_PUBLISHED = "published/"


def published_source(profile: str) -> str:
    """``runs.source`` of a published run: ``published/<profile>``."""
    return _PUBLISHED + profile


def published_profile(source: str) -> str | None:
    """The profile of a ``published/<profile>`` source, None for a local run."""
    return source[len(_PUBLISHED) :] if source.startswith(_PUBLISHED) else None


# ----------------------------------------------------------------------------- the data a task read
#: where a task's documents came from (results.json ``peeval.data``, the store's ``task_data.source``):
#: the offline mirror, the hub, a folder given by path, or generated by the task's own code
DATA_SOURCES = ("mirror", "hub", "local", "generated")
#: corpora by where they were read. A mirror corpus that stands in for a hub dataset (peeval.data.LOCAL) is
#: named as what it is, never as the dataset it replaces: their numbers are not the paper's numbers.
DATA_NAMES = {
    ("hub", "deepmind/pg19"): "PG-19 test",
    ("mirror", "local/gutenberg-eval"): "Gutenberg books (PG-19 substitute)",
    ("hub", "hoskinson-center/proof-pile"): "proof-pile test",
    ("mirror", "local/stacks-project"): "Stacks project (proof-pile substitute)",
}
#: a task whose run did not record what it read (written before peeval recorded it, or by plain lm_eval)
NOT_RECORDED = "data not recorded"


def data_label(source: str | None, location: str | None) -> str:
    """The name of what one read gave: ``DATA_NAMES``, else the hub id, the mirror's copy of one
    (``<id> (mirror copy)``: the mirror may hold a subset or a reconstruction), a folder or a generator."""
    if (source, location) in DATA_NAMES:
        return DATA_NAMES[(source, location)]
    if source == "hub":
        return str(location)
    if source == "mirror":
        return f"{str(location).removeprefix('hf/')} (mirror copy)"
    if source == "local":
        return f"{location} (local folder)"
    if source == "generated":
        return f"generated ({location})"
    return NOT_RECORDED


def task_label(task: str, reads: Iterable[tuple[str, str]]) -> str:
    """What the site calls a task's numbers, given its reads ((source, location) pairs): a perplexity task
    by its corpus as read; passkey and the diagnostics (generated by peeval's own code) by their name; another
    task by its name, with what it read after a `` · `` where that is not the hub or a generator. A mirror
    run and a hub run of one task never share a label."""
    if task == PASSKEY_TASK or task.startswith(DIAG_PREFIX):  # generated by peeval's own code, never read
        return task
    reads = sorted(set(reads))
    names = " + ".join(dict.fromkeys(data_label(s, loc) for s, loc in reads))
    if (corpus := ppl_corpus(task)) is not None:
        return names or f"{corpus} ({NOT_RECORDED})"
    if not reads:
        return f"{task} · {NOT_RECORDED}"
    shown = [data_label(s, loc) for s, loc in reads if s not in ("hub", "generated")]
    return f"{task} · {' + '.join(dict.fromkeys(shown))}" if shown else task


# ----------------------------------------------------------------------------- sample texts
def clip_text(text: str, limit: int) -> str:
    """``text`` cut to its head and tail around a ``[... N characters ...]`` marker when longer than ``limit``
    (samples files and the store keep long prompts so; the doc hash names the whole). A text this function
    already cut to ``limit`` or less is returned as it is, so cutting again (ingest after publish) changes nothing."""
    half = limit // 2
    if len(text) <= limit or re.fullmatch(rf"(?s).{{{half}}}\[\.\.\. \d+ characters \.\.\.\].{{{half}}}", text):
        return text
    return f"{text[:half]}[... {len(text) - 2 * half} characters ...]{text[-half:]}"


# ----------------------------------------------------------------------------- training curves
#: the header of train_curve.csv, written by training and read by ingest
CURVE_COLUMNS = ("step", "tokens", "lr", "train_loss", "val_loss", "elapsed_s")


# ----------------------------------------------------------------------------- the metric registry
#: what a metric's values are, and the range ingest holds them to:
#: fraction: a share of examples in [0, 1]; percent: a score in [0, 100]; perplexity: exp of a mean NLL >= 0,
#: so >= 1; bits: bits per byte >= 0; count: a whole number >= 0; score: a score of no fixed range (lm-eval's
#: em / f1 / ROUGE are in [0, 1] or [0, 100] by task: on a SCROLLS task they are percents, ``metric_kind``);
#: loss: a mean NLL; difference: a measured difference (shift stability)
KINDS = ("fraction", "percent", "perplexity", "bits", "count", "score", "loss", "difference")


@dataclass(frozen=True)
class MetricSpec:
    """One metric base (the part before the first ``@``: ``ppl@512`` is a ``ppl``), described once for
    every reader: ingest's range checks, the site's columns and arrows, the claims' tests.

    ``higher_is_better``: None for a count (no direction, never "best"); lm-eval's own ``higher_is_better``
    in results.json must agree (ingest checks). ``headline``: the rank of a task's leaderboard column (lowest
    first; None: never a column). ``seeds``: how runs of several seeds combine: ``"mean"`` (± the stderr of
    :func:`seed_estimate`) or ``"sum"`` (counts). ``outcome``: a sample's value of it is that example's 0/1
    correctness (``samples.correct``), so two runs on the same examples can be compared example by example."""

    kind: str
    higher_is_better: bool | None
    headline: int | None = None
    seeds: str = "mean"
    outcome: bool = False


_FRACTION = MetricSpec("fraction", True)
_SCORE = MetricSpec("score", True)
_PPL = MetricSpec("perplexity", False)
_BITS = MetricSpec("bits", False)
_COUNT = MetricSpec("count", None, seeds="sum")
#: every metric base peeval knows (its own tasks' and the lm-eval ones its suites run); a metric not here
#: takes lm-eval's ``higher_is_better`` from results.json, else counts as higher-is-better
METRICS: dict[str, MetricSpec] = {
    "acc_norm": dataclasses.replace(_FRACTION, headline=0),
    "acc": dataclasses.replace(_FRACTION, headline=1, outcome=True),
    "exact_match": dataclasses.replace(_FRACTION, headline=2, outcome=True),
    "em": dataclasses.replace(_SCORE, headline=3, outcome=True),
    "f1": dataclasses.replace(_SCORE, headline=4),
    "rougeL": dataclasses.replace(_SCORE, headline=5),
    "mcc": dataclasses.replace(_SCORE, headline=6),
    "seq_acc": dataclasses.replace(_FRACTION, headline=7),  # flip-flop: the whole sequence right
    "read_acc": dataclasses.replace(_FRACTION, headline=0),  # flip-flop: every read (the claims' unit, Liu et al.)
    "acc_mutual_info": _FRACTION,
    "acc_all": _FRACTION,
    "rouge1": _SCORE,
    "rouge2": _SCORE,
    "rouge_gm": _SCORE,
    "scrolls_score": _SCORE,
    "ppl": _PPL,
    "perplexity": _PPL,
    "word_perplexity": _PPL,
    "byte_perplexity": _PPL,
    "bpb": _BITS,
    "bits_per_byte": _BITS,
    "loss": MetricSpec("loss", False),
    POSITION_BASE: MetricSpec("loss", False),  # perplexity tasks: the loss by position
    "tokens": _COUNT,
    "windows": _COUNT,
    "sample_len": _COUNT,
    "attn_diff": MetricSpec("difference", False),  # shift stability: the smaller, the more shift-invariant
    "pe_dot_diff": MetricSpec("difference", False),
}


def metric_spec(metric: str) -> MetricSpec | None:
    """The registry entry of a metric's base (``ppl@512`` -> ``ppl``'s), None for an unknown one."""
    return METRICS.get(metric_base(metric))


def metric_kind(task: str, metric: str) -> str | None:
    """A metric's kind on ``task``: the registry's, except that a score of a SCROLLS task is a percent."""
    spec = metric_spec(metric)
    if spec is None:
        return None
    return "percent" if spec.kind == "score" and task.startswith(SCROLLS_PREFIX) else spec.kind


def higher_is_better(metric: str, lm_eval: bool | None = None) -> bool:
    """The direction of a metric: the registry's; else lm-eval's (``lm_eval``, from results.json); else higher.
    A count has none: True, as lm-eval reports it."""
    spec = metric_spec(metric)
    if spec is not None and spec.higher_is_better is not None:
        return spec.higher_is_better
    return True if lm_eval is None else bool(lm_eval)


def is_count(metric: str) -> bool:
    """A count (tokens, windows, sample length): no score, never a leaderboard column."""
    spec = metric_spec(metric)
    return spec is not None and spec.kind == "count"


def is_outcome(metric: str, task: str = "") -> bool:
    """A share of examples whose per-example value is the 0/1 ``samples.correct`` (acc, exact_match; on a
    SCROLLS task also em, a percent of examples: :func:`outcome_scale`)."""
    spec = METRICS.get(metric)
    return spec is not None and spec.outcome and metric_kind(task, metric) in ("fraction", "percent")


def outcome_scale(task: str, metric: str) -> float:
    """The task mean of an outcome metric per share of examples right: 100 for a percent (SCROLLS' em), else 1."""
    return 100.0 if metric_kind(task, metric) == "percent" else 1.0


#: the per-document parts of a corpus statistic (SCROLLS' Rgm: the geometric mean of the three corpus means) that
#: ingest keeps in samples.scores, for the paired bootstrap over documents (leaderboard/claims/paired.py)
DOC_SCORE_KEYS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL")

#: the keys of a sample (samples_<task>.jsonl) that hold its 0/1 outcome, in the order ingest reads them
OUTCOME_KEYS: tuple[str, ...] = tuple(m for m, spec in METRICS.items() if spec.outcome)


def headline_metrics(metrics: Iterable[str]) -> list[str]:
    """The plain (non-cell) headline metrics among ``metrics``, best-ranked first."""
    ranked = [(METRICS[m].headline, m) for m in set(metrics) if m in METRICS and METRICS[m].headline is not None]
    return [m for _, m in sorted(ranked)]


# ----------------------------------------------------------------------------- statistics
def seed_stderr(xs: Iterable[float]) -> float | None:
    """Standard error of the mean across repeats: sample stdev / sqrt(n); None for n < 2, NaN when
    a value is not finite (no spread can be measured; ``statistics.stdev`` would raise)."""
    xs = list(xs)
    if len(xs) < 2:
        return None
    if not all(math.isfinite(x) for x in xs):
        return math.nan
    return statistics.stdev(xs) / math.sqrt(len(xs))


def mean_stderr(xs: Iterable[float]) -> tuple[float, float | None]:
    """(mean, :func:`seed_stderr`) of a non-empty sequence."""
    xs = list(xs)
    if not xs:
        raise ValueError("mean_stderr of no values")
    return sum(xs) / len(xs), seed_stderr(xs)


def binomial_stderr(p: float, n: int) -> float:
    """Plus-four stderr of a proportion: never 0, so 0/n or n/n is not 'certain'."""
    pt = (p * n + 2.0) / (n + 4.0)
    return math.sqrt(pt * (1.0 - pt) / (n + 4.0))


@dataclass
class SeedEstimate:
    """One number over seeds: the mean, its standard error, the seeds and examples behind it."""

    value: float
    stderr: float | None
    n: int | None  # examples, all seeds together (None when a seed's n is unknown)
    seeds: int
    #: where ``stderr`` came from: 'seeds' | 'lm-eval stderr' | 'binomial' (pooled ones joined by '+'); None: none
    method: str | None = None


def seed_estimate(
    per_seed: list[tuple[float, float | None, int | None]], proportion: bool, kinds: list[str | None] | None = None
) -> SeedEstimate | None:
    """The mean ± stderr of one number over seeds, as the leaderboard and the claims both show it.

    ``per_seed``: (value, the run's own stderr, its examples) per seed; ``proportion``: a share of
    examples (a binomial stderr is known from n); ``kinds[i]``: where ``per_seed[i]``'s stderr came from
    (default 'lm-eval stderr'). The stderr is

    - >= 2 seeds: the sample standard deviation (n - 1) over seeds / sqrt(seeds), since the seeds are the
      repeats a reader wants to generalise over; when it is 0 (identical seeds) the runs' own standard errors
      pooled, sqrt(sum se²) / seeds (a spread of 0 is not certainty); None when a value is not finite;
    - one seed: the run's own stderr over examples (lm-eval's); for a proportion whose stderr is missing or 0,
      the binomial (plus-four) one from n, since 0/n and n/n are not certain either; else None."""
    if not per_seed:
        return None
    vals = [v for v, _, _ in per_seed]
    ns = [n for _, _, n in per_seed]
    n_tot = sum(ns) if all(n is not None for n in ns) else None
    k = len(vals)
    mean, across = mean_stderr(vals)  # across seeds: None for one seed
    kinds = list(kinds) if kinds is not None else ["lm-eval stderr"] * k

    def own(v, se, n, kind):
        """(stderr, its method) of one run."""
        if se is not None and se > 0:
            return se, kind or "lm-eval stderr"
        if proportion and n and math.isfinite(v):
            return binomial_stderr(min(max(v, 0.0), 1.0), int(n)), "binomial"
        return se, None if se is None else kind or "lm-eval stderr"

    if k >= 2:
        se, method = across, "seeds"
        if se is not None and not math.isfinite(se):
            se, method = None, None  # an infinite or NaN value: no spread can be measured
        elif se == 0.0:
            owns = [own(*x, kd) for x, kd in zip(per_seed, kinds, strict=True)]
            ok = all(s is not None for s, _ in owns)
            se = math.sqrt(sum(s * s for s, _ in owns)) / k if ok else None
            method = "+".join(sorted({m for _, m in owns if m})) if ok else None
    else:
        se, method = own(*per_seed[0], kinds[0])
    return SeedEstimate(mean, se, n_tot, k, method)


# ----------------------------------------------------------------------------- Student's t (one owner)
#: the standard normal (Student's t with df None or infinite)
_NORMAL = statistics.NormalDist()


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        delta = 1.0
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta: no convergence for a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc: x={x} outside [0, 1]")
    if x in (0.0, 1.0):
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast here; else use the symmetry
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float | None) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (None or ∞: the standard normal); the tail
    straight from the incomplete beta, P(T > |t|) = ½·I_{ν/(ν+t²)}(ν/2, ½), so small p-values keep their digits."""
    if df is None or math.isinf(df):
        return 1.0 - _NORMAL.cdf(t) if t < 0 else _NORMAL.cdf(-t)
    if df <= 0:
        raise ValueError(f"t_sf: df={df} must be > 0")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_cdf(t: float, df: float | None) -> float:
    """P(T <= t) of Student's t (df None or ∞: the normal)."""
    return 1.0 - t_sf(t, df)


def t_quantile(q: float, df: float | None) -> float:
    """The ``q`` quantile of Student's t (None or ∞: the standard normal), by bisection on :func:`t_sf`: the
    critical value of an interval, e.g. ``t_quantile(0.975, 2)`` = 4.303 (not the normal's 1.96)."""
    if not 0.0 < q < 1.0 or (df is not None and not df > 0):
        raise ValueError(f"t_quantile: needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    if df is None or math.isinf(df):
        return _NORMAL.inv_cdf(q)
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1.0 - q:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def welch_df(parts: list[tuple[float, float | None]]) -> float | None:
    """Welch–Satterthwaite ν of a sum of independent variance terms [(se_i, ν_i)]: (Σ se_i²)² / Σ se_i⁴/ν_i; a
    term with ν_i None (∞: a normal standard error over many examples) adds nothing to the denominator. None
    (∞) when every term is; a zero total variance gives None."""
    num = sum(se * se for se, _ in parts) ** 2
    den = sum(se**4 / nu for se, nu in parts if nu is not None)
    if num == 0.0 or den == 0.0:
        return None
    return num / den


@dataclass
class Difference:
    """``a - b`` of two :class:`SeedEstimate`s with its ``level`` interval [lo, hi]; ``df``: the Welch degrees
    of freedom (inf: both sides one run each, the runs' own standard errors over examples, a normal interval)."""

    value: float
    lo: float
    hi: float
    df: float
    level: float = 0.95


def welch_difference(a: SeedEstimate, b: SeedEstimate, level: float = 0.95) -> Difference | None:
    """The difference ``a - b`` and its Welch interval: ``t_quantile((1 + level) / 2, df)`` standard errors either
    side, df by Welch-Satterthwaite from each side's seeds - 1. Both sides one run: their own standard errors
    over examples and the normal quantile. None when an interval cannot be justified: a stderr missing or not
    finite, or one side one run and the other several (a run's spread over examples is not a spread over seeds)."""
    if a.stderr is None or b.stderr is None or not (math.isfinite(a.stderr) and math.isfinite(b.stderr)):
        return None
    if not (math.isfinite(a.value) and math.isfinite(b.value)):
        return None
    diff, se = a.value - b.value, math.hypot(a.stderr, b.stderr)
    if a.seeds == 1 and b.seeds == 1:
        df = math.inf
    elif a.seeds >= 2 and b.seeds >= 2:
        df = welch_df([(a.stderr, a.seeds - 1), (b.stderr, b.seeds - 1)]) or float(a.seeds + b.seeds - 2)
    else:
        return None
    half = t_quantile((1.0 + level) / 2.0, df) * se
    return Difference(diff, diff - half, diff + half, df, level)


# ----------------------------------------------------------------------------- number format
def fmt_number(v: Any, digits: int = 4) -> str:
    """A number as the site prints it: ``digits`` significant digits, scientific below 1e-3 or from
    1e6 on, ``nan`` / ``inf`` (the site's table sorter reads those), ``–`` for None."""
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        a = abs(v)
        return f"{v:.{digits - 1}e}" if a and (a >= 1e6 or a < 1e-3) else f"{v:.{digits}g}"
    return str(v)
