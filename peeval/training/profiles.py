"""Training / adaptation profiles (the one meaning of "profile" in peeval; the pipeline's
params/<profile>.yaml are its *parameter files*, and the diagnostic generators' ``cpu``/``paper``
size sets are ``gen_profile``, ``peeval.records.GEN_PROFILES``): ``smoke`` (seconds, CI), ``cpu``
(minutes on 2 cores), ``gpu`` (one H100-class GPU, every stage minutes), ``paper``.

A profile is a flat dict of documented parameters; ``peeval train --set key=value`` (or
``run_train(**overrides)``) overrides any of them. Only ``pe`` / ``pe_options`` differ between
the encodings of one profile: data order, token budget and hyper-parameters are shared.

``paper`` follows the TAPE paper's appendix table 5 (pretraining: 12 layers, hidden 768,
12 heads, context 1024, batch 512 sequences, lr 1e-4, 10k steps, AdamW, warmup + cosine)
on the GPT-2 tokenizer. PoPE's OpenWebText 124M run (seeds/pope.txt table 6/7) uses the same
GPT-2-small shape with nanoGPT's optimisation (lr 6e-4, ~0.5M tokens per step): ``paper_pope``.
``cpu``: 250 steps x 16 x 256 tokens (~1M tokens) of a 1M-parameter model; on this machine
(1 thread) rope reaches validation ppl ~140-180 against the unigram baseline's ~605.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from peeval.records import GEN_PROFILES

#: model shape + optimisation + data, per profile (text pretraining); ``cpu`` lists every setting,
#: the other profiles name only what they change (so the key order is the same in all of them)
_TRAIN_CPU = dict(
    hidden_size=128,
    intermediate_size=344,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    seq_len=256,
    batch_size=16,
    grad_accum=1,
    steps=250,
    lr=3e-3,
    warmup_steps=20,
    min_lr_ratio=0.1,
    weight_decay=0.1,
    betas=(0.9, 0.95),
    grad_clip=1.0,
    eval_every=50,
    eval_batches=4,
    save_every=50,
    tokenizer="bpe",
    vocab_size=2048,
    corpus="local/gutenberg-train",
    train_chars=3_000_000,
    val_docs=2,
    val_chars=300_000,
    rope_theta=10000.0,
    tie_word_embeddings=True,
)
TRAIN_PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {
        **_TRAIN_CPU,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "seq_len": 64,
        "batch_size": 4,
        "steps": 6,
        "warmup_steps": 2,
        "eval_every": 3,
        "eval_batches": 1,
        "save_every": 3,
        "vocab_size": 384,
        "train_chars": 60_000,
        "val_docs": 1,
        "val_chars": 20_000,
    },
    "cpu": _TRAIN_CPU,
    "paper": {  # TAPE table 5 (pretraining column)
        **_TRAIN_CPU,
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 12,
        "seq_len": 1024,
        "batch_size": 32,
        "grad_accum": 16,  # 32 x 16 = 512 sequences per optimizer step
        "steps": 10_000,
        "lr": 1e-4,
        "warmup_steps": 500,
        "eval_every": 500,
        "eval_batches": 20,
        "save_every": 500,
        "tokenizer": "gpt2",
        "vocab_size": 50304,
        # corpus: the paper used C4; set corpus=allenai/c4 online
        "train_chars": None,  # the whole corpus
        "val_chars": 2_000_000,
        "tie_word_embeddings": False,
    },
}

#: PoPE table 6/7: GPT-2 small on OpenWebText (nanoGPT settings), as a documented variant
TRAIN_PROFILES["paper_pope"] = {
    **TRAIN_PROFILES["paper"],
    "lr": 6e-4,
    "batch_size": 12,
    "grad_accum": 40,  # 480 sequences x 1024 tokens per step (nanoGPT's ~0.5M tokens)
    "warmup_steps": 2000,
    "steps": 600_000,
    "corpus": "Skylion007/openwebtext",
}

#: diagnostic tasks: the papers' small architectures scaled down for CPU (``cpu`` lists every setting)
_DIAG_CPU = dict(
    hidden_size=64,
    intermediate_size=172,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    batch_size=32,
    grad_accum=1,
    steps=200,
    lr=2e-3,
    warmup_steps=20,
    min_lr_ratio=0.1,
    weight_decay=0.0,
    betas=(0.9, 0.98),
    grad_clip=1.0,
    eval_every=100,
    eval_batches=2,
    save_every=100,
    train_examples=9600,
    val_examples=64,
    task_params={},
    gen_profile="cpu",
    rope_theta=10000.0,
    tie_word_embeddings=True,
)
DIAG_PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {
        **_DIAG_CPU,
        "hidden_size": 32,
        "intermediate_size": 64,
        "batch_size": 8,
        "steps": 6,
        "lr": 3e-3,
        "warmup_steps": 2,
        "eval_every": 3,
        "eval_batches": 1,
        "save_every": 3,
        "train_examples": 64,
        "val_examples": 16,
    },
    "cpu": _DIAG_CPU,
    "paper": {  # TAPE 5.1 addition (McLeish et al.): 16 layers, 1024 hidden, 16 heads
        **_DIAG_CPU,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "batch_size": 64,
        "steps": 20_000,
        "lr": 1e-4,
        "warmup_steps": 1000,
        "betas": (0.9, 0.99),
        "eval_every": 1000,
        "eval_batches": 8,
        "save_every": 1000,
        "train_examples": 1_280_000,
        "val_examples": 512,
        "gen_profile": "paper",
        "tie_word_embeddings": False,
    },
}

#: context extension of a pretrained Llama (TAPE table 2 / appendix table 5, fine-tuning column);
#: ``cpu`` lists every setting
_ADAPT_CPU = dict(
    seq_len=512,
    batch_size=1,
    grad_accum=1,
    steps=5,
    lr=1e-3,
    warmup_steps=1,
    factor=2.0,
    theta=None,
    tape_pi=True,
    tape_extra_trainable="",
    gguf_file=None,
    max_layers=None,
    corpus="local/gutenberg-train",
    train_chars=200_000,
    val_docs=1,
    val_chars=40_000,
    eval_batches=1,
)
ADAPT_PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {
        **_ADAPT_CPU,
        "seq_len": 64,
        "steps": 2,
        "warmup_steps": 0,
        "max_layers": 2,
        "train_chars": 20_000,
        "val_chars": 5_000,
    },
    "cpu": _ADAPT_CPU,
    "paper": {  # TAPE appendix table 5, fine-tuning column (LongLoRA recipe: 1k steps, batch 64)
        **_ADAPT_CPU,
        "seq_len": 8192,
        "grad_accum": 64,
        "steps": 1000,
        "lr": 2e-5,
        "warmup_steps": 20,
        "tape_extra_trainable": "embed,norm",
        # corpus: the paper used RedPajama; set corpus= online
        "train_chars": None,
        "val_chars": 400_000,
        "eval_batches": 4,
    },
}

#: ``gpu``: one H100-class GPU (params/gpu.yaml; sizing in README "Beyond one machine"). Pretraining:
#: 8 x 512 (51M parameters, 25M without the embedding) on the GPT-2 tokenizer, 600 steps x 64 x 512
#: tokens (19.7M tokens, ~2 epochs of gutenberg-train); diagnostics: CoPE's 4 x 256 model (per-task
#: sizes in params/gpu.yaml), 1000 steps x 64 of 32k examples; adaptation: SmolLM2-135M at 16k tokens,
#: linear factor 4 (8192 -> 32768).
TRAIN_PROFILES["gpu"] = {
    **TRAIN_PROFILES["paper"],
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "seq_len": 512,
    "batch_size": 64,
    "grad_accum": 1,
    "steps": 600,
    "lr": 1e-3,
    "warmup_steps": 60,
    "eval_every": 100,
    "eval_batches": 8,
    "save_every": 100,
    "tie_word_embeddings": True,
}
DIAG_PROFILES["gpu"] = {
    **DIAG_PROFILES["cpu"],
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "batch_size": 64,
    "steps": 1000,
    "lr": 5e-4,
    "warmup_steps": 100,
    "eval_every": 250,
    "eval_batches": 4,
    "save_every": 250,
    "train_examples": 32_000,  # 2 epochs: generating and tokenising is CPU time in every stage
    "val_examples": 256,
}
ADAPT_PROFILES["gpu"] = {
    **ADAPT_PROFILES["paper"],
    "seq_len": 16384,
    "grad_accum": 4,
    "steps": 60,
    "warmup_steps": 5,
    "factor": 4.0,
    "eval_batches": 2,
}

#: optimiser settings shared by every adaptation profile (fit() reads these names)
ADAPT_FIXED = dict(weight_decay=0.0, betas=(0.9, 0.999), min_lr_ratio=1.0, grad_clip=1.0)

PROFILES = {"train": TRAIN_PROFILES, "diag": DIAG_PROFILES, "adapt": ADAPT_PROFILES}


def get_profile(kind: str, name: str, overrides: dict | None = None) -> dict[str, Any]:
    """A copy of profile ``name`` of ``kind`` (train/diag/adapt) with ``overrides`` applied;
    an unknown profile or key is an error naming it."""
    table = PROFILES[kind]
    if name not in table:
        raise ValueError(f"unknown {kind} profile {name!r}: allowed {', '.join(table)}")
    prof = copy.deepcopy(table[name])
    for key, value in (overrides or {}).items():
        if key not in prof:
            raise ValueError(f"unknown {kind} setting {key!r} for --set: allowed {', '.join(sorted(prof))}")
        prof[key] = value
    return validate_profile(kind, prof)


# -- what each setting allows (checked where settings enter: profile + overrides) ------------------
def _int(lo: int, none: bool = False):
    return ("int", lo, none)


def _num(lo: float, hi: float | None = None, lo_open: bool = False, none: bool = False):
    return ("num", lo, hi, lo_open, none)


_COMMON = dict(
    batch_size=_int(1),
    grad_accum=_int(1),
    lr=_num(0.0, lo_open=True),
    warmup_steps=_int(0),
    eval_batches=_int(1),
)
_MODEL = dict(
    hidden_size=_int(1),
    intermediate_size=_int(1),
    num_hidden_layers=_int(1),
    num_attention_heads=_int(1),
    num_key_value_heads=_int(1),
    steps=_int(1),
    min_lr_ratio=_num(0.0, 1.0),
    weight_decay=_num(0.0),
    betas=("betas",),
    grad_clip=_num(0.0, none=True),
    eval_every=_int(1),
    save_every=_int(1),
    rope_theta=_num(0.0, lo_open=True),
    tie_word_embeddings=("bool",),
)
#: per kind: setting -> rule (settings without a rule are strings or free-form)
RULES: dict[str, dict[str, tuple]] = {
    "train": {
        **_COMMON,
        **_MODEL,
        "seq_len": _int(2),
        "tokenizer": ("choice", "bpe", "gpt2"),
        "vocab_size": _int(1),
        "corpus": ("str",),
        "train_chars": _int(1, none=True),
        "val_docs": _int(1),
        "val_chars": _int(1, none=True),
    },
    "diag": {
        **_COMMON,
        **_MODEL,
        "train_examples": _int(1),
        "val_examples": _int(1),
        "task_params": ("dict",),
        "gen_profile": ("choice", *GEN_PROFILES),
    },
    "adapt": {
        **_COMMON,
        "seq_len": _int(2),
        "steps": _int(0),  # 0: a training-free rescaling (pi, yarn), only the validation loss
        "factor": _num(0.0, lo_open=True),
        "theta": _num(0.0, lo_open=True, none=True),
        "tape_pi": ("bool",),
        "tape_extra_trainable": ("str",),
        "gguf_file": ("str", True),
        "max_layers": _int(1, none=True),
        "corpus": ("str",),
        "train_chars": _int(1, none=True),
        "val_docs": _int(1),
        "val_chars": _int(1, none=True),
    },
}


def _describe(rule: tuple) -> str:
    kind = rule[0]
    if kind == "int":
        return f"an integer >= {rule[1]}" + (" or null" if rule[2] else "")
    if kind == "num":
        _, lo, hi, lo_open, none = rule
        rng = f"a number {'>' if lo_open else '>='} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
        return rng + (" or null" if none else "")
    if kind == "choice":
        return " or ".join(repr(c) for c in rule[1:])
    if kind == "betas":
        return "two numbers in [0, 1), e.g. [0.9, 0.95]"
    return {"bool": "true or false", "dict": "a JSON object", "str": "a string"}[kind] + (
        " or null" if len(rule) > 1 and rule[1] is True else ""
    )


def _check(rule: tuple, v: Any) -> tuple[bool, Any]:
    """(valid?, the value to use): integral floats (``1e3``) become ints, tuples stay tuples."""
    import math

    kind = rule[0]
    if v is None:
        return (kind == "int" and rule[2]) or (kind == "num" and rule[4]) or (kind == "str" and len(rule) > 1), v
    if kind == "int":
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return isinstance(v, int) and not isinstance(v, bool) and v >= rule[1], v
    if kind == "num":
        _, lo, hi, lo_open, _ = rule
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False, v
        return (v > lo if lo_open else v >= lo) and (hi is None or v <= hi), v
    if kind == "choice":
        return v in rule[1:], v
    if kind == "betas":
        ok = isinstance(v, (list, tuple)) and len(v) == 2
        ok = ok and all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1 for b in v)
        return ok, tuple(v) if ok else v
    return isinstance(v, {"bool": bool, "dict": dict, "str": str}[kind]), v


def validate_profile(kind: str, prof: dict[str, Any]) -> dict[str, Any]:
    """Every setting in its allowed range (``steps=0`` would write an untrained checkpoint,
    ``eval_every=0`` divide by zero): an error names the setting, its value and what is allowed."""
    for key, rule in RULES[kind].items():
        if key in prof:
            ok, value = _check(rule, prof[key])
            if not ok:
                shown = json.dumps(prof[key], default=str)
                raise ValueError(f"--set {key}={shown}: allowed {_describe(rule)} ({kind} setting)")
            prof[key] = value
    if "num_attention_heads" in prof:
        h, kv, d = prof["num_attention_heads"], prof["num_key_value_heads"], prof["hidden_size"]
        if d % h:
            raise ValueError(f"--set hidden_size={d}: allowed a multiple of num_attention_heads={h} ({kind} setting)")
        if h % kv:
            raise ValueError(
                f"--set num_key_value_heads={kv}: allowed a divisor of num_attention_heads={h} ({kind} setting)"
            )
    return prof


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
    return out
