"""``peeval train``: pretrain one PeevalForCausalLM per encoding (text, or a diagnostic task).

Every encoding of a profile sees the same tokens in the same order with the same
hyper-parameters: the batch of optimizer step ``s`` is a pure function of (seed, s), so
a resumed run reads exactly what an uninterrupted one would (``schedule``). The loop is ``loop.fit``;
``train_state.pt`` (``state``) is written atomically every ``save_every`` steps and resumed from
automatically, only by the same run (everything that defines it is recorded in the state and compared).

Outputs in ``out_dir``: the HF model (config.json, model.safetensors), the tokenizer,
``train_curve.csv`` (step,tokens,lr,train_loss,val_loss,elapsed_s) and ``train_summary.json``; and in
``out_dir/step0/`` the run's untrained control (issue 67): the same seed's weights before the first update, with
the tokenizer and a ``train_summary.json`` that says ``"control": "step0"`` of the run in ``..`` (0 steps, 0
tokens, its validation loss at step 0). It is evaluated by the same tasks and judged by the same rule as the
run (``leaderboard.claims.controls``), never counted as a seed of its encoding.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .._io import atomic_write_text, dumps_json, save_dir_atomically
from .._io.outputs import MANIFEST, check_output_dir, finish_manifest
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

#: the writer named in a training run's manifest (``_io.outputs``): only its own folder is ever written over
WRITER = "peeval train"
#: the files that mark a finished ``peeval train`` checkpoint
FINISHED_FILES = ("model.safetensors", "train_summary.json")
#: what ``overwrite=True`` moves aside while training (deleted when the new run finishes, moved back if it
#: fails; config and tokenizer files are replaced at the end)
#: the folder inside ``out_dir`` that holds the run's step-0 control (``control_summary``)
STEP0_DIR = "step0"
OVERWRITTEN_FILES = ("model*.safetensors", "model.safetensors.index.json", "train_summary.json", "train_curve.csv",
                     STEP0_DIR)  # fmt: skip
#: the value of a control's ``control`` key, and the path of its trained run relative to its own folder
STEP0_CONTROL, CONTROL_OF = "step0", ".."


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


def control_summary(base: dict, val_loss: float, val_exact_match: float | None) -> dict:
    """The step-0 control's ``train_summary.json``: the run's own record (encoding, seed, settings, size,
    tokenizer) with 0 steps and 0 tokens, its validation numbers at step 0, and the link to its trained run."""
    import math

    out = {**base, "steps": 0, "tokens": 0, "train_time_s": 0.0, "tokens_per_s": None,
           "final_val_loss": val_loss, "final_val_ppl": math.exp(val_loss) if val_loss < 700 else float("inf"),
           "control": STEP0_CONTROL, "control_of": CONTROL_OF}  # fmt: skip
    if val_exact_match is not None:
        out["final_val_exact_match"] = val_exact_match
    return out


def check_finite_control(loss: float) -> None:
    """A step-0 validation loss that is not finite is a broken model, never a control."""
    import math

    if not math.isfinite(loss):
        raise ValueError(f"the untrained model's validation loss is {loss}: its initialisation is broken")


def save_model_dir(folder: Path, m, tok) -> None:
    """The HF model and tokenizer into ``folder`` (atomically, ``save_dir_atomically``); a full disk is the
    OSError it is."""

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

    save_dir_atomically(folder, write)


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

    def check_out() -> None:  # never over another tokenizer, model or export, never into the --tokenizer it reads
        check_out_dir(out, FINISHED_FILES, state_path, overwrite, "--overwrite")
        check_output_dir(out, "--out", lambda d: is_run_dir(d, state_path, WRITER, OVERWRITTEN_FILES),
                         f"a training run's folder (no {MANIFEST} of {WRITER})",
                         inputs=[tokenizer] if tokenizer else [], whole=False)  # fmt: skip

    check_out()
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
        save_model_dir(out, m, tok)

    record = {
        "pe": pe,
        "pe_options": cfg.pe_options,
        "task": task,
        "profile": profile,
        "seed": seed,
        "params": params["total"],
        "params_non_embedding": params["non_embedding"],
        "flops_per_token": flops_per_token(cfg, params["non_embedding"], max_len),
        "training_length": max_len,
        "unigram_val_ppl": unigram,
        "tokenizer_hash": tokenizer_fingerprint(tok),  # peeval eval checks the checkpoint's tokenizer against it
        "settings": jsonable(prof),
    }

    def save_step0(m, validate, is_main: bool, resuming: bool) -> None:
        """The untrained control (``STEP0_DIR``): written on a fresh start, and on a resume that lacks it."""
        step0 = out / STEP0_DIR
        if resuming and (step0 / "train_summary.json").is_file():
            return
        loss, em = validate()
        if is_main:
            check_finite_control(loss)
            save_model_dir(step0, m, tok)
            summary0 = control_summary(record, loss, em if task is not None else None)
            summary0.update(device="cuda" if torch.cuda.is_available() else "cpu", cpu=cpu_identity())
            atomic_write_text(step0 / "train_summary.json", dumps_json(summary0, indent=1))

    # one run at a time in --out; a failed overwrite keeps the old run; a failed run leaves no empty --out, a
    # diverged one no state
    with (
        writing_run(out, WRITER, check_out, extras=(STEP0_DIR,)),
        overwriting(out, state_path, OVERWRITTEN_FILES, overwrite),
        cleaned_on_failure(out, state_path, extras=(STEP0_DIR,)),
    ):
        out.mkdir(parents=True, exist_ok=True)
        if fast_step:
            from .fast_diag import fast_fit

            res = fast_fit(
                model,
                batches,
                prof,
                out,
                seed,
                save_model,
                identity=identity,
                state_path=state_path,
                at_step0=save_step0,
            )
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
                at_step0=save_step0,
            )
        if "interrupted_at" in res:
            return res
        summary = {
            **record,  # what the run is (its step-0 control's summary copies it too)
            **{k: res[k] for k in ("steps", "tokens", "train_time_s", "tokens_per_s")},
            "final_val_loss": res["final_val_loss"],
            "final_val_ppl": res["final_val_ppl"],
            "device": "cuda" if torch.cuda.is_available() else "cpu",
            "world_size": res["world_size"],  # processes that shared each global batch
            **({"compiled": True} if res["compiled"] else {}),  # the step's path (speed.py); absent: eager
            **({"fast_step": True} if res.get("fast_step") else {}),  # fast_diag's compiled on-device step
            "torch_threads": torch.get_num_threads(),  # per process
            "cpu": cpu_identity(),  # CPU model and torch's kernel path: the last bits of the weights depend on it
        }
        if task is not None:
            summary["final_val_exact_match"] = res["final_val_exact_match"]
        if res["is_main_process"]:  # written once, not by every process of a launch
            atomic_write_text(out / "train_summary.json", dumps_json(summary, indent=1))
            drop_state(state_path, out)
            finish_manifest(out, WRITER, (*OVERWRITTEN_FILES, *RUN_FILES))
        return summary
