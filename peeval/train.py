"""``peeval train`` / ``peeval tokenizer``: pretrain one PeevalForCausalLM per encoding.

Every encoding of a profile sees the same tokens in the same order with the same
hyper-parameters: the batch of optimizer step ``s`` is a pure function of (seed, s), so
a resumed run reads exactly what an uninterrupted one would. AdamW, linear warmup +
cosine decay to ``min_lr_ratio``, gradient clipping and accumulation, bf16 autocast on
GPU (through ``accelerate``; several processes with ``torchrun`` / ``accelerate launch``: they
split each global batch and train what one process trains, README "Beyond one machine"),
periodic validation loss, ``train_state.pt`` (model, optimizer, scheduler, RNG, curve)
written atomically every ``save_every`` steps and resumed from automatically, only by the same run
(everything that defines it is recorded in the state and compared).

Outputs in ``out_dir``: the HF model (config.json, model.safetensors), the tokenizer,
``train_curve.csv`` (step,tokens,lr,train_loss,val_loss,elapsed_s) and ``train_summary.json``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from .profiles import get_profile

EOS = "<|endoftext|>"
CURVE_COLUMNS = ("step", "tokens", "lr", "train_loss", "val_loss", "elapsed_s")
STATE_FILE = "train_state.pt"
#: the files that mark a finished ``peeval train`` checkpoint
FINISHED_FILES = ("model.safetensors", "train_summary.json")
#: what ``overwrite=True`` deletes before training (config and tokenizer files are replaced at the end)
OVERWRITTEN_FILES = ("model*.safetensors", "model.safetensors.index.json", "train_summary.json", "train_curve.csv")
MAX_SEED = 2**32 - 1  # numpy's seed range (transformers.set_seed seeds numpy too)


class ResumeMismatch(ValueError):
    """The resume state was written by a different run (encoding, settings, seed, tokenizer...)."""


# -- small file helpers ---------------------------------------------------------------
def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def atomic_torch_save(obj: Any, path: Path) -> None:
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save_dir_atomically(out_dir: Path, write) -> None:
    """``write(tmp_dir)`` into a fresh folder beside ``out_dir``, then move its files in by rename,
    so a reader never sees a half-written model or tokenizer."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".save-", dir=out_dir))
    try:
        write(tmp)
        for f in sorted(tmp.iterdir()):
            os.replace(f, out_dir / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- corpus and tokenizer ---------------------------------------------------------------
def load_corpus(corpus: str, train_chars: int | None, val_docs: int, val_chars: int | None) -> tuple[list, list]:
    """(train texts, validation texts) of a text dataset with a ``text`` column.

    The last ``val_docs`` documents (in the dataset's order) are held out for validation;
    the training texts are the others, truncated to ``train_chars`` characters in total
    (documents taken in order, so the budget is the same for every encoding).
    """
    from .data import load_dataset

    if os.path.isdir(corpus) and not (Path(corpus) / "README.md").exists():
        texts = [p.read_text(encoding="utf-8") for p in sorted(Path(corpus).glob("*.txt"))]
    else:
        ds = load_dataset(corpus, split="train")
        if "text" not in ds.column_names:
            raise ValueError(f"corpus {corpus!r} has no 'text' column (columns: {ds.column_names})")
        texts = list(ds["text"])
    if len(texts) <= val_docs:
        raise ValueError(f"corpus {corpus!r} has {len(texts)} documents: need more than val_docs={val_docs}")
    train, val = texts[: len(texts) - val_docs], texts[len(texts) - val_docs :]
    return _truncate(train, train_chars), _truncate(val, val_chars)


def _truncate(texts: list[str], n_chars: int | None) -> list[str]:
    if n_chars is None:
        return texts
    out, left = [], int(n_chars)
    for t in texts:
        if left <= 0:
            break
        out.append(t[:left])
        left -= len(out[-1])
    return out


def gpt2_tokenizer():
    """The mirror's GPT-2 BPE (transformers 5 wants ``vocab=``/``merges=`` paths, see the mirror README)."""
    from transformers import GPT2TokenizerFast

    from .data import mirror_root

    root = mirror_root()
    d = root / "tokenizers" / "gpt2" if root else None
    if d is None or not (d / "vocab.json").exists():
        raise FileNotFoundError(f"GPT-2 tokenizer files not found in the data mirror ({d}); set PEEVAL_DATA_MIRROR")
    tok = GPT2TokenizerFast(vocab=str(d / "vocab.json"), merges=str(d / "merges.txt"))
    tok.pad_token = tok.eos_token
    return tok


def train_bpe(texts: list[str], vocab_size: int):
    """A byte-level BPE trained on ``texts`` with the ``tokenizers`` library (deterministic:
    same texts and vocabulary size -> the same vocabulary and merges)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=EOS, eos_token=EOS, unk_token=EOS, pad_token=EOS)


def build_tokenizer(out_dir: str | os.PathLike, profile: str = "cpu", **overrides):
    """Build the profile's tokenizer (``bpe``: trained on the profile's training text; ``gpt2``:
    the mirror's files) and save it in ``out_dir``. Returns the tokenizer."""
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise ValueError(f"--out {out_dir}: is a file, allowed a folder")
    prof = get_profile("train", profile, overrides)
    if prof["tokenizer"] == "gpt2":
        tok = gpt2_tokenizer()
    elif prof["tokenizer"] == "bpe":
        train, _ = load_corpus(prof["corpus"], prof["train_chars"], prof["val_docs"], prof["val_chars"])
        tok = train_bpe(train, prof["vocab_size"])
    else:
        raise ValueError(f"tokenizer={prof['tokenizer']!r}: allowed 'bpe' or 'gpt2'")
    save_dir_atomically(Path(out_dir), tok.save_pretrained)
    return tok


def load_tokenizer(path: str | os.PathLike):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load the tokenizer in {str(path)!r}: {e}") from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def pack(texts: list[str], tok, seq_len: int) -> torch.Tensor:
    """Tokenise, join documents with EOS, cut into (n_blocks, seq_len) blocks (tail dropped)."""
    ids: list[int] = []
    for t in texts:
        ids.extend(tok(t, add_special_tokens=False)["input_ids"])
        ids.append(tok.eos_token_id)
    n = len(ids) // seq_len
    if n == 0:
        raise ValueError(f"the corpus gives {len(ids)} tokens: fewer than one block of seq_len={seq_len}")
    return torch.tensor(ids[: n * seq_len], dtype=torch.long).view(n, seq_len)


def unigram_ppl(train_blocks: torch.Tensor, val_blocks: torch.Tensor, vocab_size: int) -> float:
    """Validation perplexity of the add-one-smoothed unigram distribution of the training
    tokens: the baseline a trained model must beat by far."""
    counts = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double() + 1.0
    logp = (counts / counts.sum()).log()
    # the model predicts tokens 1..N-1 of each block: score the same tokens
    return math.exp(-logp[val_blocks[:, 1:].flatten()].mean().item())


# -- the schedule -----------------------------------------------------------------------
def lr_lambda(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup to 1, then cosine decay to ``min_ratio`` at ``total`` steps."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    prog = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * prog))


def _perm_cache(n_blocks: int, seed: int):
    cache: dict[int, torch.Tensor] = {}

    def get(epoch: int) -> torch.Tensor:
        if epoch not in cache:
            cache[epoch] = torch.randperm(n_blocks, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
        return cache[epoch]

    return get


# -- the model ---------------------------------------------------------------------------
def model_config(prof: dict, pe: str, pe_options: dict | None, vocab_size: int, max_len: int, tok):
    from .models import PeevalConfig

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


# -- the training loop (text LM and diagnostics share it) -------------------------------
class Batches:
    """Where the micro-batches come from: packed text blocks, or padded diagnostic examples."""

    def __init__(self, train: dict[str, torch.Tensor], val: dict[str, torch.Tensor]):
        self.train, self.val = train, val
        self.n = train["input_ids"].shape[0]

    def get(self, idx: torch.Tensor, split: str = "train") -> dict[str, torch.Tensor]:
        src = self.train if split == "train" else self.val
        return {k: v[idx] for k, v in src.items()}


def _loss_and_correct(model, batch: dict, reduction: str = "mean") -> tuple[torch.Tensor, int, int, int]:
    """Token loss over labelled positions (mean, or sum), and exact-match counts per sequence
    (teacher forcing: every answer token is the argmax <=> greedy decoding reproduces the answer)."""
    labels = batch.get("labels", batch["input_ids"])
    out = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"))
    logits = out.logits[:, :-1].float()
    tgt = labels[:, 1:]
    mask = tgt != -100
    loss = torch.nn.functional.cross_entropy(logits[mask], tgt[mask], reduction=reduction)
    right = (logits.argmax(-1) == tgt) | ~mask
    seq_ok = int(right.all(-1).sum())
    return loss, int(mask.sum()), seq_ok, tgt.shape[0]


@torch.no_grad()
def evaluate(model, batches: Batches, prof: dict, device, acc=None) -> tuple[float, float]:
    """(mean validation token loss, exact-match rate) over the first eval_batches x batch_size
    validation rows (the same rows at every evaluation, whatever the number of processes:
    under ``acc`` each process scores its share of every batch and the sums are added up)."""
    was = model.training
    model.eval()
    world, rank = (acc.num_processes, acc.process_index) if acc is not None else (1, 0)
    n_val = batches.val["input_ids"].shape[0]
    b = prof["batch_size"]
    sums = torch.zeros(4, dtype=torch.float64, device=device)  # loss sum, tokens, right, sequences
    for i in range(min(prof["eval_batches"], math.ceil(n_val / b))):
        idx = torch.arange(i * b, min(n_val, (i + 1) * b))[rank::world]
        if len(idx) == 0:
            continue
        batch = {k: v.to(device) for k, v in batches.get(idx, "val").items()}
        loss, nt, so, ns = _loss_and_correct(model, batch, reduction="sum")
        sums[0] += loss.double()
        sums[1:] += torch.tensor([nt, so, ns], dtype=torch.float64, device=device)
    if world > 1:
        sums = acc.reduce(sums, reduction="sum")
    model.train(was)
    tot, n_tok, ok, n_seq = sums.tolist()
    return tot / max(1, n_tok), ok / max(1, n_seq)


def _n_targets(batches: Batches, idx: torch.Tensor) -> int:
    """How many labelled next-token targets rows ``idx`` of the training set hold (as
    ``_loss_and_correct`` counts them)."""
    labels = batches.train.get("labels", batches.train["input_ids"])[idx]
    return int((labels[:, 1:] != -100).sum())


#: environment variables by which a launcher tells its processes the world size
_WORLD_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def make_accelerator():
    """The ``Accelerator`` of a training run: bf16 on GPU, gloo on CPU under ``torchrun`` /
    ``accelerate launch --multi_gpu`` (both start one process per rank and set WORLD_SIZE)."""
    from accelerate import Accelerator

    check_launch()
    cuda = torch.cuda.is_available()
    return Accelerator(mixed_precision="bf16" if cuda else "no", cpu=not cuda)


def check_launch() -> None:
    """``accelerate launch --num_processes N`` (N > 1) with ``--cpu``, or without ``--multi_gpu`` on a
    machine with fewer than N GPUs, starts ONE process (accelerate's multi-CPU path is MPI,
    ``--mpirun_hostfile``) and the run would silently train on one process: that launch (the
    accelerate launcher's environment, MASTER_ADDR set for N > 1, no world size) is refused."""
    if (
        "ACCELERATE_USE_CPU" in os.environ  # set by accelerate launch's one-process launcher
        and "MASTER_ADDR" in os.environ  # which sets this only for num_processes > 1
        and not any(k in os.environ for k in _WORLD_ENV)
    ):
        raise ValueError(
            "accelerate launch --num_processes N started a single process (with --cpu, or without --multi_gpu "
            "on fewer than N GPUs): launch N processes with `torchrun --nproc_per_node N -m peeval.cli ...` "
            "or `accelerate launch --multi_gpu --num_processes N -m peeval.cli ...` (gloo on a CPU machine)"
        )


def _write_curve(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CURVE_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in CURVE_COLUMNS})
    atomic_write_text(path, buf.getvalue())


def _rng_state() -> dict:
    import random

    import numpy as np

    st = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def _set_rng_state(st: dict) -> None:
    import random

    import numpy as np

    torch.set_rng_state(st["torch"])
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def fit(
    model,
    batches: Batches,
    prof: dict,
    out_dir: Path,
    seed: int,
    save_model,
    *,
    stop_after: int | None = None,
    desc: str = "train",
    identity: dict | None = None,
    state_path: Path | None = None,
) -> dict:
    """The shared optimisation loop; returns {steps, tokens, train_time_s, final_val_loss, ...}.

    Resumes from ``state_path`` (default ``out_dir/train_state.pt``) when it exists and was
    written by the same run (``identity``: everything that defines it; a difference raises
    ResumeMismatch naming the keys). The state is left in place: the caller deletes it once its
    own outputs are written. ``stop_after`` (tests: simulate an interruption) ends the run after
    that many steps without finishing it.
    """
    from tqdm import tqdm

    acc = make_accelerator()
    world, rank = acc.num_processes, acc.process_index
    if prof["batch_size"] < world:
        raise ValueError(
            f"batch_size={prof['batch_size']} is split across {world} processes: use batch_size >= {world} "
            "(it is the global batch per micro-step, whatever the number of processes)"
        )
    steps = int(prof["steps"])
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 and "embed" not in n else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": prof["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=prof["lr"],
        betas=tuple(prof["betas"]),
        eps=1e-8,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_lambda(s, prof["warmup_steps"], steps, prof["min_lr_ratio"])
    )
    # The scheduler is NOT prepared: accelerate's AcceleratedScheduler steps it num_processes times
    # per optimizer step (it assumes each process adds a full batch), but here the processes split
    # one global batch, so one optimizer step is one schedule step (issue 19's 2-process drift).
    model, opt = acc.prepare(model, opt)
    state_path = Path(state_path) if state_path is not None else out_dir / STATE_FILE
    run = _jsonable({**(identity or {}), "settings": prof, "seed": seed})
    start, rows, tokens, elapsed_before = 0, [], 0, 0.0
    if state_path.exists():
        st = load_state(state_path)
        check_same_run(state_path, st.get("run"), run)
        print(f"{desc}: resuming from step {st['step']} of {state_path}", file=sys.stderr, flush=True)
        acc.unwrap_model(model).load_state_dict(st["model"])
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        _set_rng_state(st["rng"])
        start, rows, tokens, elapsed_before = st["step"], st["rows"], st["tokens"], st["elapsed_s"]
    model.train()
    perms = _perm_cache(batches.n, seed)
    b, n_micro = prof["batch_size"], prof["grad_accum"]
    t0 = time.perf_counter()
    bar = tqdm(total=steps, initial=start, desc=desc, disable=not acc.is_main_process, dynamic_ncols=True)
    last_val = None
    for step in range(start, steps):
        opt.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=acc.device)
        # the global batch of this step (all micro-batches, all processes): a function of (seed, step)
        micro_idx = []
        for micro in range(n_micro):
            pos = torch.arange((step * n_micro + micro) * b, (step * n_micro + micro + 1) * b)
            micro_idx.append(torch.stack([perms(int(p) // batches.n)[int(p) % batches.n] for p in pos]))
        # the loss is the mean over every labelled token of the global batch: each process sums its
        # share and divides by the global count (known to all without communication); DDP averages
        # the gradients over processes, hence the factor world
        n_target = max(1, sum(_n_targets(batches, idx) for idx in micro_idx))
        tok_step = sum(len(idx) * batches.train["input_ids"].shape[1] for idx in micro_idx)
        for micro, idx in enumerate(micro_idx):
            idx = idx[rank::world]  # each process takes its share of the same global batch
            batch = {k: v.to(acc.device) for k, v in batches.get(idx).items()}
            # gradients are all-reduced once per optimizer step, after the last micro-batch
            sync = contextlib.nullcontext() if micro == n_micro - 1 else acc.no_sync(model)
            with sync:
                with acc.autocast():
                    loss, _, _, _ = _loss_and_correct(model, batch, reduction="sum")
                acc.backward(loss * (world / n_target))
            loss_sum += loss.detach()
        if prof["grad_clip"]:
            acc.clip_grad_norm_(model.parameters(), prof["grad_clip"])
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        tokens += tok_step
        done = step + 1
        train_loss = acc.reduce(loss_sum, reduction="sum").item() / n_target
        val_loss = None
        if done % prof["eval_every"] == 0 or done == steps:
            val_loss, val_acc = evaluate(acc.unwrap_model(model), batches, prof, acc.device, acc)
            last_val = (val_loss, val_acc)
        elapsed = elapsed_before + time.perf_counter() - t0
        rows.append(
            dict(
                step=done,
                tokens=tokens,
                lr=f"{lr:.6g}",
                train_loss=f"{train_loss:.6f}",
                val_loss=None if val_loss is None else f"{val_loss:.6f}",
                elapsed_s=f"{elapsed:.3f}",
            )
        )
        bar.set_postfix(loss=f"{train_loss:.3f}", **({"val": f"{val_loss:.3f}"} if val_loss is not None else {}))
        bar.update(1)
        if acc.is_main_process and (done % prof["save_every"] == 0 and done < steps):
            _save_state(state_path, acc.unwrap_model(model), opt, sched, done, rows, tokens, elapsed, prof, seed, run)
            _write_curve(out_dir / "train_curve.csv", rows)
        if stop_after is not None and done >= stop_after and done < steps:
            bar.close()
            return {"interrupted_at": done}
    bar.close()
    elapsed = elapsed_before + time.perf_counter() - t0
    if last_val is None:  # resumed at the end: evaluate once more
        last_val = evaluate(acc.unwrap_model(model), batches, prof, acc.device, acc)
    if acc.is_main_process:
        save_model(acc.unwrap_model(model))
        _write_curve(out_dir / "train_curve.csv", rows)
        if world > 1:
            print(f"peeval: checkpoint written to {out_dir} by process {rank} of {world}", file=sys.stderr)
    acc.wait_for_everyone()  # no process returns before the checkpoint is complete
    return {
        "world_size": world,
        "is_main_process": acc.is_main_process,
        "steps": steps,
        "tokens": tokens,
        "train_time_s": round(elapsed, 3),
        "tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 else None,
        "final_val_loss": last_val[0],
        "final_val_ppl": math.exp(last_val[0]) if last_val[0] < 700 else float("inf"),
        "final_val_exact_match": last_val[1],
    }


def _jsonable(prof: dict) -> dict:
    return json.loads(json.dumps(prof, default=str))


def _save_state(path, model, opt, sched, step, rows, tokens, elapsed, prof, seed, run) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_torch_save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "rng": _rng_state(),
            "step": step,
            "rows": rows,
            "tokens": tokens,
            "elapsed_s": elapsed,
            "prof": _jsonable(prof),
            "seed": seed,
            "run": run,
        },
        path,
    )


def load_state(path: Path) -> dict:
    """``train_state.pt`` as a dict; a truncated or foreign file is one error naming it."""
    try:
        st = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as e:  # torch raises RuntimeError / EOFError / UnpicklingError for a damaged file
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0]
        raise ValueError(
            f"{path}: cannot read the resume state, truncated or corrupt ({first}): delete it, or start anew "
            "with --overwrite"
        ) from e
    need = ("model", "optimizer", "scheduler", "rng", "step", "rows", "tokens", "elapsed_s")
    if not isinstance(st, dict) or any(k not in st for k in need):
        raise ValueError(f"{path}: not a peeval resume state (no {', '.join(need)}): delete it, or use --overwrite")
    return st


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_same_run(path: Path, old: dict | None, new: dict) -> None:
    """Refuse to resume a state whose run differs from this one, naming every differing key."""
    if old is None:
        raise ResumeMismatch(
            f"{path} was written by an older peeval that did not record the run's settings: delete it, or start "
            "anew with --overwrite"
        )
    a, b = _flatten(old), _flatten(new)
    missing = object()
    # what the user names (pe, task, seed, tokenizer...) first, then settings, then derived model fields
    rank = {"settings": 1, "model_config": 2}
    diff = sorted(
        (k for k in a.keys() | b.keys() if a.get(k, missing) != b.get(k, missing)),
        key=lambda k: (rank.get(k.split(".")[0], 0), k),
    )
    if diff:
        shown = "; ".join(f"{k}: {a.get(k, '<absent>')!r} there, {b.get(k, '<absent>')!r} now" for k in diff[:6])
        more = f"; and {len(diff) - 6} more" if len(diff) > 6 else ""
        raise ResumeMismatch(
            f"{path} belongs to a different run ({shown}{more}): rerun with the same settings to resume, or "
            "start anew with --overwrite"
        )


def drop_state(state_path: Path, keep_dir: Path) -> None:
    """Delete a finished run's resume state (and its folder when it is a separate, now empty one)."""
    state_path = Path(state_path)
    state_path.unlink(missing_ok=True)
    Path(str(state_path) + ".tmp").unlink(missing_ok=True)
    d = state_path.parent
    if d.resolve() != Path(keep_dir).resolve() and d.is_dir() and not any(d.iterdir()):
        d.rmdir()


def tokenizer_fingerprint(tok) -> str:
    """A short hash of the tokenizer's vocabulary and rules (a resumed run must tokenise alike)."""
    import hashlib

    backend = getattr(tok, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tok.get_vocab().items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_out_dir(out: Path, finished_files: tuple[str, ...], state_path: Path, overwrite: bool, flag: str) -> None:
    """Refuse an ``--out`` that is a file, or that holds a finished run, unless ``overwrite``."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, allowed a folder (new or holding a checkpoint to resume)")
    done = [f for f in finished_files if (out / f).exists()]
    if done and not overwrite and not state_path.exists():
        raise ValueError(
            f"--out {out} already holds a finished run ({', '.join(done)}): pass {flag} to replace it, or "
            "choose another folder"
        )


def clear_for_overwrite(out: Path, state_path: Path, patterns: tuple[str, ...]) -> None:
    """``--overwrite``: delete the previous run's resume state and finished outputs before training."""
    Path(state_path).unlink(missing_ok=True)
    for pat in patterns:
        for f in out.glob(pat):
            if f.is_file():
                f.unlink()


def _seed_all(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


# -- public entry point ------------------------------------------------------------------
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
    """
    from .models.encodings import ENCODINGS, get_encoding_class
    from .models.encodings.base import resolve_options

    overrides = {**(settings or {}), **overrides}
    if pe not in ENCODINGS:
        raise ValueError(f"unknown pe {pe!r}: allowed {', '.join(sorted(ENCODINGS))}")
    check_launch()  # before anything is written
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed {seed!r}: allowed an integer from 0 to {MAX_SEED}")
    out = Path(out_dir)
    state_path = Path(resume_dir if resume_dir is not None else out) / STATE_FILE
    check_out_dir(out, FINISHED_FILES, state_path, overwrite, "--overwrite")
    if task is not None and tokenizer:
        raise ValueError(f"--tokenizer {tokenizer}: allowed only for text pretraining (--task {task} has its own)")
    if task is not None:
        from .train_diagnostics import prepare_diagnostic

        prof = get_profile("diag", profile, overrides)
        tok, batches, max_len = prepare_diagnostic(task, prof, seed)
        unigram = None
    else:
        prof = get_profile("train", profile, overrides)
        tok = load_tokenizer(tokenizer) if tokenizer else _profile_tokenizer(prof)
        train_txt, val_txt = load_corpus(prof["corpus"], prof["train_chars"], prof["val_docs"], prof["val_chars"])
        train_blocks, val_blocks = pack(train_txt, tok, prof["seq_len"]), pack(val_txt, tok, prof["seq_len"])
        batches = Batches({"input_ids": train_blocks}, {"input_ids": val_blocks})
        max_len = prof["seq_len"]
        unigram = unigram_ppl(train_blocks, val_blocks, len(tok))
    vocab = len(tok)
    if task is None and prof["tokenizer"] == "gpt2":
        vocab = max(vocab, prof["vocab_size"])  # GPT-2: pad to a multiple of 64 (50304) as nanoGPT
    _seed_all(seed)
    from .models import PeevalForCausalLM

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
            m.save_pretrained(tmp)
            tok.save_pretrained(tmp)

        save_dir_atomically(out, write)

    if overwrite:
        clear_for_overwrite(out, state_path, OVERWRITTEN_FILES)
    out.mkdir(parents=True, exist_ok=True)
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
        "settings": _jsonable(prof),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "world_size": res["world_size"],  # processes that shared each global batch
        "torch_threads": torch.get_num_threads(),  # per process
    }
    if task is not None:
        summary["final_val_exact_match"] = res["final_val_exact_match"]
    if res["is_main_process"]:  # written once, not by every process of a launch
        atomic_write_text(out / "train_summary.json", json.dumps(summary, indent=1))
        drop_state(state_path, out)
    return summary


def _profile_tokenizer(prof: dict):
    if prof["tokenizer"] == "gpt2":
        return gpt2_tokenizer()
    train, _ = load_corpus(prof["corpus"], prof["train_chars"], prof["val_docs"], prof["val_chars"])
    return train_bpe(train, prof["vocab_size"])
