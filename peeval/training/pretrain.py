"""``peeval train``: pretrain one PeevalForCausalLM per encoding (text, or a diagnostic task).

Every encoding of a profile sees the same tokens in the same order with the same
hyper-parameters: the batch of optimizer step ``s`` is a pure function of (seed, s), so
a resumed run reads exactly what an uninterrupted one would (``schedule``). The loop is ``loop.fit``;
``train_state.pt`` (``state``) is written atomically every ``save_every`` steps and resumed from
automatically, only by the same run (everything that defines it is recorded in the state and compared).

Outputs in ``out_dir``: the HF model (config.json, model.safetensors), the tokenizer,
``train_curve.csv`` (step,tokens,lr,train_loss,val_loss,elapsed_s) and ``train_summary.json``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .._io import atomic_write_text, dumps_json, save_dir_atomically
from .._io.outputs import check_output_dir
from ..install.versions import cpu_identity
from .data import (
    Batches,
    load_corpus,
    load_tokenizer,
    pack,
    pack_cached,
    profile_tokenizer,
    tokenizer_fingerprint,
    unigram_ppl,
)
from .loop import check_launch, fit, seed_all
from .profiles import get_profile
from .speed import check_compile
from .state import (
    STATE_FILE,
    check_out_dir,
    check_seed,
    cleaned_on_failure,
    drop_state,
    is_run_dir,
    jsonable,
    overwriting,
)

#: the files that mark a finished ``peeval train`` checkpoint
FINISHED_FILES = ("model.safetensors", "train_summary.json")
#: what ``overwrite=True`` moves aside while training (deleted when the new run finishes, moved back if it
#: fails; config and tokenizer files are replaced at the end)
OVERWRITTEN_FILES = ("model*.safetensors", "model.safetensors.index.json", "train_summary.json", "train_curve.csv")


def model_config(prof: dict, pe: str, pe_options: dict | None, vocab_size: int, max_len: int, tok):
    from ..models import PeevalConfig

    return PeevalConfig(
        vocab_size=vocab_size,
        hidden_size=prof["hidden_size"],
        intermediate_size=prof["intermediate_size"],
        num_hidden_layers=prof["num_hidden_layers"],
        num_attention_heads=prof["num_attention_heads"],
        num_key_value_heads=prof["num_key_value_heads"],
        max_position_embeddings=max_len,
        rope_theta=prof["rope_theta"],
        tie_word_embeddings=prof["tie_word_embeddings"],
        pe=pe,
        pe_options=dict(pe_options or {}),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )


def count_params(model) -> dict:
    total = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight.numel()
    return {"total": total, "non_embedding": total - emb}


def flops_per_token(cfg, n_params_non_embedding: int, seq_len: int) -> int:
    """Training FLOPs per token, Kaplan et al.'s 6N + 6·n_layer·n_ctx·d_attn (forward + backward)."""
    d_attn = cfg.num_attention_heads * cfg.head_dim
    return int(6 * n_params_non_embedding + 6 * cfg.num_hidden_layers * seq_len * d_attn)


def run_train(
    out_dir: str | os.PathLike,
    pe: str,
    pe_options: dict | None = None,
    task: str | None = None,
    profile: str = "cpu",
    seed: int = 0,
    tokenizer: str | os.PathLike | None = None,
    *,
    overwrite: bool = False,
    resume_dir: str | os.PathLike | None = None,
    settings: dict | None = None,
    stop_after: int | None = None,
    compile: str = "auto",
    fast_step: bool = False,
    **overrides,
) -> dict:
    """Train a checkpoint for encoding ``pe`` into ``out_dir``; returns train_summary.json's dict.

    ``task=None``: text pretraining on the profile's corpus (tokenizer from ``tokenizer`` DIR,
    else built as ``build_tokenizer`` does and saved with the checkpoint). ``task=<diagnostic>``:
    a diagnostic of ``peeval.tasks.diagnostics.generators`` with its own word-level tokenizer.
    ``settings`` and ``overrides`` replace profile settings (``steps=20``, ``lr=1e-3``...);
    ``settings`` can also hold the profile's own ``tokenizer`` (bpe/gpt2), which as a keyword
    would name the tokenizer folder.

    An ``out_dir`` holding a finished checkpoint is refused unless ``overwrite`` (which also
    discards any resume state: training starts from step 0). The resume state
    (``train_state.pt``) lives in ``resume_dir`` (default ``out_dir``): the DVC stages keep it
    outside their declared outputs, which DVC deletes before rerunning a stage. Every bad input
    raises ValueError before anything is written.

    ``compile`` (auto|on|off): the training step's path, ``speed.use_compiled``; a compiled run says so in
    its summary (``"compiled": true``). ``fast_step`` (a diagnostic task only): ``fast_diag.fast_fit``, the
    compiled on-device step (``compile`` does not apply; the summary says ``"fast_step": true``).
    """
    from ..models.encodings import ENCODINGS, get_encoding_class
    from ..models.encodings.base import resolve_options

    overrides = {**(settings or {}), **overrides}
    if pe not in ENCODINGS:
        raise ValueError(f"unknown pe {pe!r}: allowed {', '.join(sorted(ENCODINGS))}")
    check_launch()  # before anything is written
    check_seed(seed)
    check_compile(compile)
    if fast_step and task is None:
        raise ValueError("fast_step: allowed only for a diagnostic task (--task); text pretraining uses --compile")
    if fast_step and stop_after is not None:
        raise ValueError("stop_after: not a fast_step run's option (fast_diag resumes from its saves only)")
    out = Path(out_dir)
    state_path = Path(resume_dir if resume_dir is not None else out) / STATE_FILE
    check_out_dir(out, FINISHED_FILES, state_path, overwrite, "--overwrite")
    # never over another tokenizer or model, never into the --tokenizer it reads
    check_output_dir(out, "--out", lambda d: is_run_dir(d, state_path), "a training run's folder",
                     inputs=[tokenizer] if tokenizer else [], whole=False)  # fmt: skip
    if task is not None and tokenizer:
        raise ValueError(f"--tokenizer {tokenizer}: allowed only for text pretraining (--task {task} has its own)")
    if task is not None:
        from .diagnostics import prepare_diagnostic

        prof = get_profile("diag", profile, overrides)
        tok, batches, max_len = prepare_diagnostic(task, prof, seed)
        unigram = None
    else:
        prof = get_profile("train", profile, overrides)
        tok = load_tokenizer(tokenizer) if tokenizer else profile_tokenizer(prof)
        train_txt, val_txt = load_corpus(prof["corpus"], prof["train_chars"], prof["val_docs"], prof["val_chars"])
        train_blocks, val_blocks = pack_cached(train_txt, tok, prof["seq_len"]), pack(val_txt, tok, prof["seq_len"])
        batches = Batches({"input_ids": train_blocks}, {"input_ids": val_blocks})
        max_len = prof["seq_len"]
        unigram = unigram_ppl(train_blocks, val_blocks, len(tok))
    vocab = len(tok)
    if task is None and "vocab_size" in overrides and prof["vocab_size"] < vocab:  # the setting would be ignored
        raise ValueError(
            f"--set vocab_size={prof['vocab_size']}: the tokenizer has {vocab} tokens, allowed >= {vocab} "
            "(every token needs an embedding row)"
        )
    if task is None and prof["tokenizer"] == "gpt2":
        vocab = max(vocab, prof["vocab_size"])  # GPT-2: pad to a multiple of 64 (50304) as nanoGPT
    seed_all(seed)
    from ..models import PeevalForCausalLM

    cfg = model_config(prof, pe, pe_options, vocab, max_len, tok)
    model = PeevalForCausalLM(cfg)
    params = count_params(model)
    skip = {"pe", "pe_options", "transformers_version", *prof}  # recorded once, below or in the settings
    identity = {
        "pe": pe,
        "pe_options": resolve_options(get_encoding_class(pe), cfg.pe_options, pe),
        "task": task,
        "profile": profile,
        "tokenizer": tokenizer_fingerprint(tok),
        "model_config": {k: v for k, v in cfg.to_dict().items() if k not in skip},
    }

    def save_model(m) -> None:
        def write(tmp: Path) -> None:
            try:
                m.save_pretrained(tmp)
            except Exception as e:  # safetensors on a full disk: "SafetensorError: ... I/O error: No space left on
                # device (os error 28)", measured on a full tmpfs: a traceback, now the OSError it reports
                import re

                code = re.search(r"\(os error (\d+)\)", str(e))
                if code is None:
                    raise
                raise OSError(int(code[1]), os.strerror(int(code[1])), str(tmp / "model.safetensors")) from e
            tok.save_pretrained(tmp)

        save_dir_atomically(out, write)

    # a failed overwrite keeps the old run; a failed run leaves no empty --out, a diverged one no state
    with overwriting(out, state_path, OVERWRITTEN_FILES, overwrite), cleaned_on_failure(out, state_path):
        out.mkdir(parents=True, exist_ok=True)
        if fast_step:
            from .fast_diag import fast_fit

            res = fast_fit(model, batches, prof, out, seed, save_model, identity=identity, state_path=state_path)
        else:
            res = fit(
                model,
                batches,
                prof,
                out,
                seed,
                save_model,
                stop_after=stop_after,
                desc=f"train {pe}",
                identity=identity,
                state_path=state_path,
                compile=compile,
                text=task is None,
            )
        if "interrupted_at" in res:
            return res
        summary = {
            "pe": pe,
            "pe_options": cfg.pe_options,
            "task": task,
            "profile": profile,
            "seed": seed,
            "params": params["total"],
            "params_non_embedding": params["non_embedding"],
            **{k: res[k] for k in ("steps", "tokens", "train_time_s", "tokens_per_s")},
            "flops_per_token": flops_per_token(cfg, params["non_embedding"], max_len),
            "final_val_loss": res["final_val_loss"],
            "final_val_ppl": res["final_val_ppl"],
            "training_length": max_len,
            "unigram_val_ppl": unigram,
            "tokenizer_hash": tokenizer_fingerprint(tok),  # peeval eval checks the checkpoint's tokenizer against it
            "settings": jsonable(prof),
            "device": "cuda" if torch.cuda.is_available() else "cpu",
            "world_size": res["world_size"],  # processes that shared each global batch
            **({"compiled": True} if res["compiled"] else {}),
            **(
                {"fast_step": True} if res.get("fast_step") else {}
            ),  # fast_diag's compiled on-device step  # the step's path (speed.py); absent: eager
            "torch_threads": torch.get_num_threads(),  # per process
            "cpu": cpu_identity(),  # CPU model and torch's kernel path: the last bits of the weights depend on it
        }
        if task is not None:
            summary["final_val_exact_match"] = res["final_val_exact_match"]
        if res["is_main_process"]:  # written once, not by every process of a launch
            atomic_write_text(out / "train_summary.json", dumps_json(summary, indent=1))
            drop_state(state_path, out)
        return summary
