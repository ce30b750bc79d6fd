"""``fit``: the one optimisation loop of ``peeval train``, ``peeval train --task`` and ``peeval adapt``.

AdamW, linear warmup + cosine decay to ``min_lr_ratio``, gradient clipping and accumulation, bf16
autocast on GPU (through ``accelerate``; several processes with ``torchrun`` / ``accelerate launch``:
they split each global batch and train what one process trains, docs/design.md),
periodic validation loss and exact match, ``train_curve.csv`` and the resume state every
``save_every`` steps.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import sys
import time
from pathlib import Path

import torch

from .._io import atomic_write_text
from ..records import CURVE_COLUMNS, CURVE_EXTRA_COLUMNS  # the train_curve.csv header ingest reads
from .data import Batches
from .schedule import lr_lambda, perm_cache
from .speed import compiled_loss, make_optimizer, use_compiled
from .state import (
    STATE_FILE,
    NonFiniteLoss,
    check_same_run,
    jsonable,
    load_state,
    rng_state,
    save_state,
    set_rng_state,
)


def check_finite(what: str, value: float, step: int, prof: dict) -> None:
    """A diverged run ends at once, before its weights are saved anywhere (checkpoint or resume state)."""
    if not math.isfinite(value):
        raise NonFiniteLoss(
            f"the {what} is {value} at step {step}: training diverged (lr={prof['lr']:g}), nothing was saved; "
            "lower --set lr (or raise warmup_steps / set grad_clip) and train again"
        )


def memory_bytes(device) -> int | None:
    """The memory one process can fill: its GPU's, else the machine's physical memory."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_batch(model, batches: Batches, prof: dict, world: int, device) -> None:
    """``batch_size`` within what the run can use: at most the training rows (a larger batch repeats rows
    inside one step), and one micro-batch's logits and activations (a coarse lower estimate) within this
    machine's memory, refused before step 0 rather than swapping or killed in it."""
    b, n = int(prof["batch_size"]), batches.n
    if b > n:
        raise ValueError(
            f"--set batch_size={b}: the training set has {n} rows (blocks or examples): allowed at most {n} "
            "(a larger batch repeats rows within one step)"
        )
    rows, seq = -(-b // world), batches.train["input_ids"].shape[1]
    cfg = getattr(model, "config", None)
    vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    width = int(getattr(cfg, "hidden_size", 0) or 0) * int(getattr(cfg, "num_hidden_layers", 0) or 0)
    need = rows * seq * (vocab * 4 * 3 + width * 4 * 16)  # fp32 logits, their softmax and gradient; activations
    have = memory_bytes(device)
    if have and need > have:
        fits = max(1, int(b * have / need))
        raise ValueError(
            f"--set batch_size={b}: one micro-batch needs at least {need / 2**30:.1f} GiB ({rows} rows x {seq} "
            f"tokens x {vocab} logits, and activations), more than the {have / 2**30:.1f} GiB of {device}: use "
            f"batch_size <= {fits} (and grad_accum for a larger batch)"
        )


def seed_all(seed: int) -> None:
    """Seed python, numpy and torch (before the model is built: its initial weights follow)."""
    from transformers import set_seed

    set_seed(seed)


def loss_and_correct(model, batch: dict, reduction: str = "mean") -> tuple[torch.Tensor, int, int, int]:
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
    validation rows of text, every validation row of a diagnostic (its profile has no eval_batches: a
    number read from a prefix of the rows would depend on their order); the same rows at every
    evaluation, whatever the number of processes: under ``acc`` each process scores its share of every
    batch and the sums are added up."""
    was = model.training
    model.eval()
    world, rank = (acc.num_processes, acc.process_index) if acc is not None else (1, 0)
    n_val = batches.val["input_ids"].shape[0]
    b = prof["batch_size"]
    sums = torch.zeros(4, dtype=torch.float64, device=device)  # loss sum, tokens, right, sequences
    n_batches = math.ceil(n_val / b)
    for i in range(min(prof.get("eval_batches", n_batches), n_batches)):
        idx = torch.arange(i * b, min(n_val, (i + 1) * b))[rank::world]
        if len(idx) == 0:
            continue
        batch = {k: v.to(device) for k, v in batches.get(idx, "val").items()}
        loss, nt, so, ns = loss_and_correct(model, batch, reduction="sum")
        sums[0] += loss.double()
        sums[1:] += torch.tensor([nt, so, ns], dtype=torch.float64, device=device)
    if world > 1:
        sums = acc.reduce(sums, reduction="sum")
    model.train(was)
    tot, n_tok, ok, n_seq = sums.tolist()
    return tot / max(1, n_tok), ok / max(1, n_seq)


def n_targets(batches: Batches, idx: torch.Tensor) -> int:
    """How many labelled next-token targets rows ``idx`` of the training set hold (as
    ``loss_and_correct`` counts them)."""
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


def write_curve(path: Path, rows: list[dict], diagnostic: bool = False) -> None:
    """``train_curve.csv``; a diagnostic's adds its in-distribution exact match at each validation (issue 67)."""
    cols = CURVE_COLUMNS + (CURVE_EXTRA_COLUMNS if diagnostic else ())
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in cols})
    atomic_write_text(path, buf.getvalue())


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
    compile: str = "off",
    text: bool = True,
    at_step0=None,
) -> dict:
    """The shared optimisation loop; returns {steps, tokens, train_time_s, final_val_loss, ...}.

    Resumes from ``state_path`` (default ``out_dir/train_state.pt``) when it exists and was
    written by the same run (``identity``: everything that defines it; a difference raises
    ResumeMismatch naming the keys; a compiled run, ``compile`` and ``text`` resolved by
    ``speed.use_compiled``, records it there too). The state is left in place: the caller deletes it once its
    own outputs are written. ``at_step0(model, validate, is_main, resuming)``: called with the initial weights,
    before the first update and before any resume state is loaded (``validate()`` scores them, on every
    process): ``peeval train`` saves its step-0 control there; the RNG state is restored after it, so the run
    trains exactly as it would without. ``stop_after`` (tests: simulate an interruption) ends the run after
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
    check_batch(model, batches, prof, world, acc.device)
    steps = int(prof["steps"])
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 and "embed" not in n else no_decay).append(p)
    compiled = use_compiled(compile, acc.device, steps, text)
    groups = [{"params": decay, "weight_decay": prof["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    opt = make_optimizer(groups, prof, compiled)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_lambda(s, prof["warmup_steps"], steps, prof["min_lr_ratio"])
    )
    # The scheduler is NOT prepared: accelerate's AcceleratedScheduler steps it num_processes times
    # per optimizer step (it assumes each process adds a full batch), but here the processes split
    # one global batch, so one optimizer step is one schedule step (issue 19's 2-process drift).
    model, opt = acc.prepare(model, opt)
    state_path = Path(state_path) if state_path is not None else out_dir / STATE_FILE
    run = jsonable({**(identity or {}), "settings": prof, "seed": seed, **({"compiled": True} if compiled else {})})
    start, rows, tokens, elapsed_before = 0, [], 0, 0.0
    if at_step0 is not None:  # the untrained control: the same seed's weights before the first update
        rng = rng_state()
        m0 = acc.unwrap_model(model)
        at_step0(m0, lambda: evaluate(m0, batches, prof, acc.device, acc), acc.is_main_process, state_path.exists())
        set_rng_state(rng)
        acc.wait_for_everyone()
    if state_path.exists():
        st = load_state(state_path)
        check_same_run(state_path, st.get("run"), run)
        print(f"{desc}: resuming from step {st['step']} of {state_path}", file=sys.stderr, flush=True)
        acc.unwrap_model(model).load_state_dict(st["model"])
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        set_rng_state(st["rng"])
        start, rows, tokens, elapsed_before = st["step"], st["rows"], st["tokens"], st["elapsed_s"]
    model.train()
    train_loss_of = compiled_loss() if compiled else None
    perms = perm_cache(batches.n, seed)
    b, n_micro = prof["batch_size"], prof["grad_accum"]
    t0 = time.perf_counter()
    bar = tqdm(total=steps, initial=start, desc=desc, disable=not acc.is_main_process, dynamic_ncols=True)
    last_val = None
    try:
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
            n_target = max(1, sum(n_targets(batches, idx) for idx in micro_idx))
            tok_step = sum(len(idx) * batches.train["input_ids"].shape[1] for idx in micro_idx)
            for micro, idx in enumerate(micro_idx):
                idx = idx[rank::world]  # each process takes its share of the same global batch
                batch = {k: v.to(acc.device) for k, v in batches.get(idx).items()}
                # gradients are all-reduced once per optimizer step, after the last micro-batch
                sync = contextlib.nullcontext() if micro == n_micro - 1 else acc.no_sync(model)
                with sync:
                    with acc.autocast():
                        if train_loss_of is not None:
                            labels = batch.get("labels", batch["input_ids"])
                            loss = train_loss_of(model, batch["input_ids"], labels, batch.get("attention_mask"))
                        else:
                            loss, _, _, _ = loss_and_correct(model, batch, reduction="sum")
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
            check_finite("training loss", train_loss, done, prof)
            val_loss = None
            if done % prof["eval_every"] == 0 or done == steps:
                val_loss, val_acc = evaluate(acc.unwrap_model(model), batches, prof, acc.device, acc)
                check_finite("validation loss", val_loss, done, prof)
                last_val = (val_loss, val_acc)
            elapsed = elapsed_before + time.perf_counter() - t0
            rows.append(
                dict(
                    step=done,
                    tokens=tokens,
                    lr=f"{lr:.6g}",
                    train_loss=f"{train_loss:.6f}",
                    val_loss=None if val_loss is None else f"{val_loss:.6f}",
                    **({} if text or val_loss is None else {"val_exact_match": f"{val_acc:.6f}"}),
                    elapsed_s=f"{elapsed:.3f}",
                )
            )
            bar.set_postfix(loss=f"{train_loss:.3f}", **({"val": f"{val_loss:.3f}"} if val_loss is not None else {}))
            bar.update(1)
            if acc.is_main_process and (done % prof["save_every"] == 0 and done < steps):
                save_state(
                    state_path, acc.unwrap_model(model), opt, sched, done, rows, tokens, elapsed, prof, seed, run
                )
                write_curve(out_dir / "train_curve.csv", rows, diagnostic=not text)
            if stop_after is not None and done >= stop_after and done < steps:
                bar.close()
                return {"interrupted_at": done}
    except BaseException:  # the error line starts a line of its own, not the bar's
        bar.close()
        raise
    bar.close()
    elapsed = elapsed_before + time.perf_counter() - t0
    if last_val is None:  # resumed at the end: evaluate once more
        last_val = evaluate(acc.unwrap_model(model), batches, prof, acc.device, acc)
        check_finite("validation loss", last_val[0], steps, prof)
    bad = [n for n, p in acc.unwrap_model(model).named_parameters() if not torch.isfinite(p).all()]
    if bad:  # never saved: a checkpoint that only a later evaluation would find broken
        raise NonFiniteLoss(
            f"{len(bad)} weight tensor(s) are NaN or infinite after step {steps} (e.g. {bad[0]}): "
            f"training diverged (lr={prof['lr']:g}), nothing was saved; lower --set lr and train again"
        )
    if acc.is_main_process:
        save_model(acc.unwrap_model(model))
        write_curve(out_dir / "train_curve.csv", rows, diagnostic=not text)
        if world > 1:
            print(f"peeval: checkpoint written to {out_dir} by process {rank} of {world}", file=sys.stderr)
    acc.wait_for_everyone()  # no process returns before the checkpoint is complete
    return {
        "world_size": world,
        "compiled": compiled,
        "is_main_process": acc.is_main_process,
        "steps": steps,
        "tokens": tokens,
        "train_time_s": round(elapsed, 3),
        "tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 else None,
        "final_val_loss": last_val[0],
        "final_val_ppl": math.exp(last_val[0]) if last_val[0] < 700 else float("inf"),
        "final_val_exact_match": last_val[1],
    }
