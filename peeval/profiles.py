"""Training / adaptation profiles: ``smoke`` (seconds, CI), ``cpu`` (minutes on 2 cores), ``gpu`` (one
H100-class GPU, every stage minutes), ``paper``.

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
from typing import Any

#: model shape + optimisation + data, per profile (text pretraining)
TRAIN_PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        seq_len=64,
        batch_size=4,
        grad_accum=1,
        steps=6,
        lr=3e-3,
        warmup_steps=2,
        min_lr_ratio=0.1,
        weight_decay=0.1,
        betas=(0.9, 0.95),
        grad_clip=1.0,
        eval_every=3,
        eval_batches=1,
        save_every=3,
        tokenizer="bpe",
        vocab_size=384,
        corpus="local/gutenberg-train",
        train_chars=60_000,
        val_docs=1,
        val_chars=20_000,
        rope_theta=10000.0,
        tie_word_embeddings=True,
    ),
    "cpu": dict(
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
    ),
    "paper": dict(  # TAPE table 5 (pretraining column)
        hidden_size=768,
        intermediate_size=3072,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=12,
        seq_len=1024,
        batch_size=32,
        grad_accum=16,  # 32 x 16 = 512 sequences per optimizer step
        steps=10_000,
        lr=1e-4,
        warmup_steps=500,
        min_lr_ratio=0.1,
        weight_decay=0.1,
        betas=(0.9, 0.95),
        grad_clip=1.0,
        eval_every=500,
        eval_batches=20,
        save_every=500,
        tokenizer="gpt2",
        vocab_size=50304,
        corpus="local/gutenberg-train",  # the paper: C4; set corpus=allenai/c4 online
        train_chars=None,  # the whole corpus
        val_docs=2,
        val_chars=2_000_000,
        rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
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

#: diagnostic tasks: the papers' small architectures scaled down for CPU
DIAG_PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        batch_size=8,
        grad_accum=1,
        steps=6,
        lr=3e-3,
        warmup_steps=2,
        min_lr_ratio=0.1,
        weight_decay=0.0,
        betas=(0.9, 0.98),
        grad_clip=1.0,
        eval_every=3,
        eval_batches=1,
        save_every=3,
        train_examples=64,
        val_examples=16,
        task_params={},
        gen_profile="cpu",
        rope_theta=10000.0,
        tie_word_embeddings=True,
    ),
    "cpu": dict(
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
    ),
    "paper": dict(  # TAPE 5.1 addition (McLeish et al.): 16 layers, 1024 hidden, 16 heads
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        batch_size=64,
        grad_accum=1,
        steps=20_000,
        lr=1e-4,
        warmup_steps=1000,
        min_lr_ratio=0.1,
        weight_decay=0.0,
        betas=(0.9, 0.99),
        grad_clip=1.0,
        eval_every=1000,
        eval_batches=8,
        save_every=1000,
        train_examples=1_280_000,
        val_examples=512,
        task_params={},
        gen_profile="paper",
        rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
}

#: context extension of a pretrained Llama (TAPE table 2 / appendix table 5, fine-tuning column)
ADAPT_PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        seq_len=64,
        batch_size=1,
        grad_accum=1,
        steps=2,
        lr=1e-3,
        warmup_steps=0,
        factor=2.0,
        theta=None,
        tape_pi=True,
        tape_extra_trainable="",
        gguf_file=None,
        max_layers=2,
        corpus="local/gutenberg-train",
        train_chars=20_000,
        val_docs=1,
        val_chars=5_000,
        eval_batches=1,
    ),
    "cpu": dict(
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
    ),
    "paper": dict(  # TAPE appendix table 5, fine-tuning column (LongLoRA recipe: 1k steps, batch 64)
        seq_len=8192,
        batch_size=1,
        grad_accum=64,
        steps=1000,
        lr=2e-5,
        warmup_steps=20,
        factor=2.0,
        theta=None,
        tape_pi=True,
        tape_extra_trainable="embed,norm",
        gguf_file=None,
        max_layers=None,
        corpus="local/gutenberg-train",  # the paper: RedPajama; set corpus= online
        train_chars=None,
        val_docs=1,
        val_chars=400_000,
        eval_batches=4,
    ),
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
    return prof


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` strings from ``--set``; values parsed as JSON when possible (``steps=10``,
    ``lr=1e-3``, ``corpus=local/x``)."""
    import json

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
