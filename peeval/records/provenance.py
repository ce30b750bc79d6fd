"""The provenance record of ``peeval eval`` and the shift measurement (``results["peeval"]``).

Changes when what a run records about itself changes (a new field), never with a task's names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

PROVENANCE_KEY = "peeval"


@dataclass
class Provenance:
    """What produced a results.json (``results["peeval"]``): code, checkpoint, encoding, protocol,
    machine. Written by ``peeval eval`` and ``python -m peeval.evaluation.shift_stability``; read by ingest.
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
    #: the CPU and torch's CPU kernel path (peeval.install.versions.cpu_identity): what a bit-for-bit rerun needs
    cpu: dict | None = None
    #: what made the model (leaderboard.store.RunKind: pretrain, diagnostic, adapt, external), recorded where the
    #: run is made so ingest reads it rather than guessing it from the model's name; None: an older writer
    run_kind: str | None = None
    #: the tokenizer the run scored with (peeval.training.data.tokenizer_fingerprint), beside checkpoint_sha256: the
    #: same weights read with another tokenizer are other numbers; checked against train_summary.json before scoring
    tokenizer_hash: str | None = None
    #: the model's size and its tokenizer (name as loaded, vocabulary), recorded for any checkpoint: a Hugging Face
    #: one has no train_summary.json to say them, and the board shows them beside a run of yours
    model_params: int | None = None
    tokenizer: dict | None = None
    extra: dict = field(default_factory=dict)  # keys of a newer writer, kept on a round trip

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**d, **self.extra}

    @classmethod
    def from_json(cls, d: dict) -> Provenance:
        """From a ``results["peeval"]`` dict; missing fields are None (older writers), unknown keys kept."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "extra"]
        return cls(**{n: d.get(n) for n in names}, extra={k: v for k, v in d.items() if k not in names})


__all__ = ["PROVENANCE_KEY", "Provenance"]
