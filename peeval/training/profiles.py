"""Training / adaptation profiles (the one meaning of "profile" in peeval; the pipeline's
params/<profile>.yaml are its *parameter files*, and the diagnostic generators' ``cpu``/``paper``
size sets are ``gen_profile``, ``peeval.records.GEN_PROFILES``): ``smoke`` (seconds, CI), ``cpu``
(minutes on 2 cores), ``gpu`` (one H100-class GPU, every stage minutes), ``paper``.

The values live in ``profiles.yaml`` beside this file (``cpu`` lists every setting, the other
profiles ``extends:`` one and name what they change; ``paper`` follows the TAPE paper's appendix
table 5, ``paper_pope`` PoPE's OpenWebText run); what each setting allows is declared here, once,
as the models :class:`TrainSettings`, :class:`DiagSettings` and :class:`AdaptSettings`
(peeval.settings). A profile is a flat dict of those settings; ``peeval train --set key=value``
(or ``run_train(**overrides)``) overrides any of them and is checked where it enters: one line
naming the setting, its value and what is allowed. Only ``pe`` / ``pe_options`` differ between the
encodings of one profile: data order, token budget and hyper-parameters are shared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, Field, model_validator

from peeval.records import GEN_PROFILES
from peeval.settings import (
    Allowed,
    At,
    Invalid,
    SetMap,
    SettingsError,
    Strict,
    choice,
    compose,
    did_you_mean,
    integer,
    number,
    validated,
)


def _tuple(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


Betas = Annotated[
    tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]],
    BeforeValidator(_tuple),
    Allowed("two numbers in [0, 1), e.g. [0.9, 0.95]"),
]


class _Common(Strict):
    """Settings of every kind."""

    batch_size: integer(1)
    grad_accum: integer(1)
    lr: number(0.0, lo_open=True)
    warmup_steps: integer(0)


class _Net(_Common):
    """A peeval model trained from scratch (pretraining and diagnostics)."""

    hidden_size: integer(1)
    intermediate_size: integer(1)
    num_hidden_layers: integer(1)
    num_attention_heads: integer(1)
    num_key_value_heads: integer(1)
    steps: integer(1)
    min_lr_ratio: number(0.0, 1.0)
    weight_decay: number(0.0)
    betas: Betas
    grad_clip: number(0.0, null=True)
    eval_every: integer(1)
    save_every: integer(1)
    rope_theta: number(0.0, lo_open=True)
    tie_word_embeddings: bool

    @model_validator(mode="after")
    def _heads(self):
        h, kv, d = self.num_attention_heads, self.num_key_value_heads, self.hidden_size
        if d % h:
            raise At("hidden_size", f"a multiple of num_attention_heads={h}", d)
        if h % kv:
            raise At("num_key_value_heads", f"a divisor of num_attention_heads={h}", kv)
        if self.warmup_steps > self.steps:  # the learning rate would never reach lr
            raise At("warmup_steps", f"an integer from 0 to steps={self.steps}", self.warmup_steps)
        return self


class _Text(Strict):
    """The text a run reads (pretraining, adaptation)."""

    eval_batches: integer(1)  # validation blocks scored (a diagnostic scores every validation row)
    seq_len: integer(2)
    corpus: str
    train_chars: integer(1, null=True)
    val_docs: integer(1)
    val_chars: integer(1, null=True)


#: a byte-level BPE holds the 256 bytes and the end-of-text token before any merge
MIN_BPE_VOCAB = 257


class TrainSettings(_Net, _Text):
    tokenizer: choice("bpe", "gpt2")
    vocab_size: integer(1)

    @model_validator(mode="after")
    def _vocab(self):
        if self.tokenizer == "bpe" and self.vocab_size < MIN_BPE_VOCAB:
            raise At("vocab_size", f"an integer >= {MIN_BPE_VOCAB} (a byte-level BPE: 256 bytes + end of text)",
                     self.vocab_size)  # fmt: skip
        return self


class DiagSettings(_Net):
    train_examples: integer(1)
    val_examples: integer(1)  # held-out rows of the training distribution, every one scored
    task_params: Annotated[SetMap, Allowed("a JSON object")]
    gen_profile: choice(*GEN_PROFILES)


class AdaptSettings(_Common, _Text):
    steps: integer(0)  # 0: a training-free rescaling (pi, yarn), only the validation loss
    factor: number(0.0, lo_open=True)
    theta: number(0.0, lo_open=True, null=True)
    tape_extra_trainable: str
    gguf_file: Annotated[str | None, Allowed("a string or null")]
    max_layers: integer(1, null=True)

    @model_validator(mode="after")
    def _warmup(self):
        if self.steps and self.warmup_steps > self.steps:  # steps=0: a training-free rescaling, no schedule
            raise At("warmup_steps", f"an integer from 0 to steps={self.steps}", self.warmup_steps)
        return self


#: per kind: the model its profiles are
MODELS: dict[str, type[Strict]] = {"train": TrainSettings, "diag": DiagSettings, "adapt": AdaptSettings}

_TABLE = yaml.safe_load((Path(__file__).with_name("profiles.yaml")).read_text(encoding="utf-8"))


def validate_profile(kind: str, prof: dict[str, Any]) -> dict[str, Any]:
    """Every setting in its allowed range (``steps=0`` would write an untrained checkpoint,
    ``eval_every=0`` divide by zero): ``prof`` with the checked values (``1e3`` -> 1000, betas a
    tuple), in its own key order; an error names the setting, its value and what is allowed."""
    try:
        checked = validated(MODELS[kind], prof)
    except Invalid as e:
        p = e.problem
        if p.kind == "unknown":
            raise SettingsError(f"{kind} profile: {p.text}") from None
        raise SettingsError(
            f"--set {p.key}={json.dumps(p.value, default=str)}: allowed {p.text} ({kind} setting)"
        ) from None
    return {k: getattr(checked, k) for k in prof}


def _profiles(kind: str) -> dict[str, dict[str, Any]]:
    return {name: validate_profile(kind, compose(_TABLE[kind], name, f"{kind} profile")) for name in _TABLE[kind]}


TRAIN_PROFILES: dict[str, dict[str, Any]] = _profiles("train")
DIAG_PROFILES: dict[str, dict[str, Any]] = _profiles("diag")
ADAPT_PROFILES: dict[str, dict[str, Any]] = _profiles("adapt")
PROFILES = {"train": TRAIN_PROFILES, "diag": DIAG_PROFILES, "adapt": ADAPT_PROFILES}

#: optimiser settings shared by every adaptation profile (fit() reads these names)
ADAPT_FIXED: dict[str, Any] = {k: _tuple(v) for k, v in _TABLE["adapt_fixed"].items()}


def get_profile(kind: str, name: str, overrides: dict | None = None) -> dict[str, Any]:
    """A copy of profile ``name`` of ``kind`` (train/diag/adapt) with ``overrides`` applied;
    an unknown profile or key is an error naming it."""
    table = PROFILES[kind]
    if name not in table:
        raise ValueError(f"unknown {kind} profile {name!r}: allowed {', '.join(table)}")
    prof = dict(table[name])
    for key, value in (overrides or {}).items():
        if key not in prof:
            raise ValueError(
                f"unknown {kind} setting {key!r} for --set{did_you_mean(key, prof)}: allowed {', '.join(sorted(prof))}"
            )
        prof[key] = value
    return validate_profile(kind, prof)


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` strings from ``--set``; values parsed as JSON when possible (``steps=10``,
    ``lr=1e-3``, ``corpus=local/x``)."""

    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected key=value")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
        except RecursionError:
            raise ValueError(f"--set {k.strip()}: the value is nested too deeply") from None
    return out
