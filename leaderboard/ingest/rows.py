"""The rows each parser returns, one type per table (the columns of schema.sql, checked by a test).

They stay plain dicts at run time: ``store.insert_rows`` takes a table's columns from each, so what the store
gets is what the parsers build; a runs row also carries ``_content`` and ``_identity`` (never stored: what the
writer's duplicate check compares).
"""

from __future__ import annotations

import datetime as dt
from typing import NotRequired, TypedDict


class RunRow(TypedDict):
    run_id: str
    name: str
    kind: str
    checkpoint: str | None
    pe: str | None
    pe_options: str
    params: str
    seed: int | None
    git_commit: str | None
    peeval_version: str | None
    lm_eval_version: str | None
    torch_version: str | None
    transformers_version: str | None
    date: dt.datetime
    max_length: int | None
    training_length: int | None
    protocol: str | None
    dtype: str | None
    results_path: str | None
    diag_task: str | None
    source: str
    machine: NotRequired[str]  # a published run's (SOURCE.json); a local run's is the schema's default
    size: str | None  # a pretrained model's shape off its profile's (``4x32``), else None
    task_setting: str | None  # a diagnostic model's generator parameters off its task's defaults, else None
    _content: NotRequired[str]  # sha256 of the results, re-serialised: a copy re-indented is the same run
    _identity: NotRequired[tuple | None]  # identity.run_identity
    _training: NotRequired[tuple | None]  # identity.training_identity
    _protocol: NotRequired[str | None]  # identity.eval_protocol


class MetricRow(TypedDict):
    run_id: str
    task: str
    metric: str
    filter: str
    value: float | None
    stderr: float | None
    n: int | None


class SampleRow(TypedDict):
    run_id: str
    task: str
    doc_id: int | None
    prompt: str | None
    target: str | None
    response: str | None
    correct: bool | None
    scores: str | None
    items: str | None


class PplBlockRow(TypedDict):
    run_id: str
    task: str
    doc_id: int | None
    length: int | None
    ll: float | None
    tokens: int | None
    bytes: int | None
    protocol: str
    target_start: int | None
    target_end: int | None


class TaskDataRow(TypedDict):
    run_id: str
    task: str
    source: str
    location: str
    config: str | None
    split: str | None
    revision: str | None
    documents: int | None
    documents_sha256: str | None
    params: str | None


class CurveRow(TypedDict):
    checkpoint: str | None
    step: int
    tokens: int | None
    lr: float | None
    train_loss: float | None
    val_loss: float | None
    elapsed_s: float | None
    val_exact_match: float | None


class EfficiencyRow(TypedDict):
    checkpoint: str | None
    pe: str | None
    params: int | None
    flops_per_token: float | None
    tokens_per_s: float | None
    train_time_s: float | None
    task: str | None
    steps: int | None
    tokens: int | None
    final_val_loss: float | None
    final_val_ppl: float | None
    total_params: int | None
    summary: str
    pe_options: str | None
    method: str | None


class RunRows(TypedDict):
    """What one results folder (or lm-eval results file) contributes: store.RUN_TABLES."""

    runs: list[RunRow]
    metrics: list[MetricRow]
    samples: list[SampleRow]
    ppl_blocks: list[PplBlockRow]
    task_data: list[TaskDataRow]


class CheckpointRows(TypedDict):
    """What one training or adaptation folder contributes: store.CHECKPOINT_TABLES."""

    training_curves: list[CurveRow]
    efficiency: list[EfficiencyRow]


#: each written table's row type (tests check them against schema.sql's columns)
ROW_TYPES: dict[str, type] = {"runs": RunRow, "metrics": MetricRow, "samples": SampleRow, "ppl_blocks": PplBlockRow,
                              "task_data": TaskDataRow, "training_curves": CurveRow,
                              "efficiency": EfficiencyRow}  # fmt: skip
