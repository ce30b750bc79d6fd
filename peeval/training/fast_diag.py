"""The fast diagnostics trainer (issue 64): what ``fit`` does for a diagnostic task, shaped for a GPU whose step
is bound by launches and host work, not by math. ``fit`` (eager) stays the reference; this path is opt-in
(``run_train(..., fast_step=True)``, params ``diagnostics.train.fast_step``; ``benchmarks/gpu_diag.py`` uses it).

- Fixed shapes: the training rows are encoded once (one padded length) and moved to the device as one tensor;
  each step's rows are taken by index on the device, in ``fit``'s order (``perm_cache``: the same rows at the
  same step). ``RowSource`` is the seam: any ``source(step) -> {input_ids, attention_mask, labels}`` on the
  device (e.g. one that draws rows from an on-device generator) replaces the pre-encoded tensor.
- ``torch.compile`` of the model + loss (``step_loss``; ``mode="reduce-overhead"``, CUDA graphs, on CUDA; the
  default mode on the CPU), fused AdamW on CUDA.
- No host sync inside the loop: losses are summed on the device and read every ``READ_EVERY`` steps (and at an
  evaluation or a save), when they are checked finite; evaluation scores every validation row on the device
  and reads its sums once.
One process, ``grad_accum`` 1 (anything else is refused: use ``fit``).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .data import Batches
from .loop import check_batch, check_finite, write_curve
from .schedule import lr_lambda, perm_cache
from .speed import RECOMPILE_LIMIT, summed_loss
from .state import STATE_FILE, NonFiniteLoss, check_same_run, jsonable, load_state, save_state, set_rng_state

#: the training loss is read (one host sync) every this many steps
READ_EVERY = 50
#: what a step's batch is: its rows on the device
RowSource = Callable[[int], dict[str, torch.Tensor]]


def step_loss(model, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The mean next-token loss over the batch's labelled positions, the count taken on the device (``fit``
    divides ``loss_and_correct``'s sum by a host count: the same number, without the sync)."""
    n = (labels[:, 1:] != -100).sum().clamp(min=1)
    return summed_loss(model, input_ids, labels, attention_mask) / n


def compiled_step_loss(device) -> Callable:
    """``step_loss`` compiled: CUDA graphs on CUDA (``reduce-overhead``), inductor's default mode on the CPU;
    one static graph (``dynamic=False``: every batch has one shape)."""
    torch._dynamo.reset()  # an earlier run's graphs in this process would count towards the recompile limit
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    mode = "reduce-overhead" if torch.device(device).type == "cuda" else None
    return torch.compile(step_loss, mode=mode, dynamic=False)


def indexed_source(train: dict[str, torch.Tensor], n_steps: int, batch_size: int, seed: int, device) -> RowSource:
    """The pre-encoded training rows on ``device`` and the order of every row of every step (``fit``'s:
    epoch ``e`` is ``perm_cache(n, seed)(e)``), both moved once; ``source(step)`` is a slice and a gather."""
    n = train["input_ids"].shape[0]
    perms = perm_cache(n, seed)
    order = torch.cat([perms(e) for e in range(math.ceil(n_steps * batch_size / n))])[: n_steps * batch_size]
    order = order.to(device)
    rows = {k: v.to(device) for k, v in train.items()}
    if "attention_mask" not in rows:
        rows["attention_mask"] = torch.ones_like(rows["input_ids"])
    if "labels" not in rows:
        rows["labels"] = rows["input_ids"]

    def source(step: int) -> dict[str, torch.Tensor]:
        idx = order[step * batch_size : (step + 1) * batch_size]
        return {k: v.index_select(0, idx) for k, v in rows.items()}

    return source


def autocast(device):
    """bf16 autocast on CUDA (``fit``'s accelerate mixed precision), nothing on the CPU."""
    kind = torch.device(device).type
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=kind == "cuda")


@torch.no_grad()
def evaluate_on_device(model, val: dict[str, torch.Tensor], batch_size: int, device) -> tuple[float, float]:
    """(mean validation token loss, exact-match rate) over every validation row, as ``loop.evaluate`` scores
    them: the rows on the device, the sums kept there and read once."""
    was = model.training
    model.eval()
    ids, labels = val["input_ids"].to(device), val.get("labels", val["input_ids"]).to(device)
    mask = val.get("attention_mask", torch.ones_like(val["input_ids"])).to(device)
    sums = torch.zeros(4, dtype=torch.float64, device=device)  # loss sum, tokens, right sequences, sequences
    for i in range(0, ids.shape[0], batch_size):
        b_ids, b_lab, b_mask = ids[i : i + batch_size], labels[i : i + batch_size], mask[i : i + batch_size]
        with autocast(device):
            logits = model(input_ids=b_ids, attention_mask=b_mask).logits[:, :-1].float()
        tgt = b_lab[:, 1:]
        lab = tgt != -100
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100, reduction="sum"
        )
        right = ((logits.argmax(-1) == tgt) | ~lab).all(-1)
        sums += torch.stack([loss.double(), lab.sum().double(), right.sum().double(), sums.new_tensor(len(tgt))])
    model.train(was)
    tot, n_tok, ok, n_seq = sums.tolist()
    return tot / max(1, n_tok), ok / max(1, n_seq)


def make_parts(model, prof: dict, device):
    """(optimizer, scheduler) as ``fit`` builds them (weight decay on matrices only), fused AdamW on CUDA."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 and "embed" not in n else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": prof["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    fused = {"fused": True} if torch.device(device).type == "cuda" else {}
    opt = torch.optim.AdamW(groups, lr=prof["lr"], betas=tuple(prof["betas"]), eps=1e-8, **fused)
    steps = int(prof["steps"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_lambda(s, prof["warmup_steps"], steps, prof["min_lr_ratio"])
    )
    return opt, sched


def train_step(model, opt, sched, loss_of: Callable, batch: dict, grad_clip, device) -> torch.Tensor:
    """One optimizer step; the loss stays on the device (detached)."""
    if torch.device(device).type == "cuda":
        torch.compiler.cudagraph_mark_step_begin()  # the previous step's graph outputs are no longer read
    opt.zero_grad(set_to_none=True)
    with autocast(device):
        loss = loss_of(model, batch["input_ids"], batch["labels"], batch["attention_mask"])
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # no sync: the norm stays a tensor
    opt.step()
    sched.step()
    return loss.detach().clone()


def fast_fit(
    model,
    batches: Batches,
    prof: dict,
    out_dir: Path,
    seed: int,
    save_model,
    *,
    identity: dict | None = None,
    state_path: Path | None = None,
    source: RowSource | None = None,
    device=None,
    at_step0=None,
) -> dict:
    """``fit``'s contract (resume state, ``train_curve.csv``, the summary's keys) on the fast path; the curve
    has one row per ``READ_EVERY`` steps (and at each evaluation and save), its loss the mean over them.
    ``at_step0``: as ``loop.fit``'s (the step-0 control, saved before the first update)."""
    if int(prof["grad_accum"]) != 1:
        raise ValueError(f"--set grad_accum={prof['grad_accum']}: the fast diagnostics step allows 1 (use fit)")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    check_batch(model, batches, prof, 1, device)
    steps, b = int(prof["steps"]), int(prof["batch_size"])
    model.to(device)
    opt, sched = make_parts(model, prof, device)
    state_path = Path(state_path) if state_path is not None else out_dir / STATE_FILE
    run = jsonable({**(identity or {}), "settings": prof, "seed": seed, "fast_step": True})
    start, rows, tokens, elapsed_before = 0, [], 0, 0.0
    if at_step0 is not None:  # the untrained control, as fit saves it (loop.fit's at_step0): the same evaluation
        from .loop import evaluate
        from .state import rng_state

        rng = rng_state()
        at_step0(model, lambda: evaluate(model, batches, prof, device), True, state_path.exists())
        set_rng_state(rng)
    if state_path.exists():
        st = load_state(state_path)
        check_same_run(state_path, st.get("run"), run)
        print(f"train: resuming from step {st['step']} of {state_path}", file=sys.stderr, flush=True)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        set_rng_state(st["rng"])
        start, rows, tokens, elapsed_before = st["step"], st["rows"], st["tokens"], st["elapsed_s"]
    source = source or indexed_source(batches.train, steps, b, seed, device)
    loss_of = compiled_step_loss(device)
    model.train()
    tok_step = b * batches.train["input_ids"].shape[1]
    loss_sum, since, last_val, lr = torch.zeros((), device=device), 0, None, prof["lr"]
    t0 = time.perf_counter()
    for step in range(start, steps):
        lr = opt.param_groups[0]["lr"]
        loss_sum += train_step(model, opt, sched, loss_of, source(step), prof["grad_clip"], device)
        tokens, since, done = tokens + tok_step, since + 1, step + 1
        evaluating = done % prof["eval_every"] == 0 or done == steps
        saving = done % prof["save_every"] == 0 and done < steps
        if not (done % READ_EVERY == 0 or evaluating or saving or done == steps):
            continue
        train_loss = loss_sum.item() / since  # the one host sync in READ_EVERY steps
        check_finite("training loss", train_loss, done, prof)
        loss_sum.zero_()
        since, val_loss = 0, None
        if evaluating:
            last_val = evaluate_on_device(model, batches.val, b, device)
            val_loss = last_val[0]
            check_finite("validation loss", val_loss, done, prof)
        elapsed = elapsed_before + time.perf_counter() - t0
        val = None if val_loss is None else f"{val_loss:.6f}"
        rows.append(dict(step=done, tokens=tokens, lr=f"{lr:.6g}", train_loss=f"{train_loss:.6f}", val_loss=val,
                         elapsed_s=f"{elapsed:.3f}",
                         val_exact_match=None if val is None else f"{last_val[1]:.6f}"))  # fmt: skip
        if saving:
            save_state(state_path, model, opt, sched, done, rows, tokens, elapsed, prof, seed, run)
            write_curve(out_dir / "train_curve.csv", rows, diagnostic=True)
    elapsed = elapsed_before + time.perf_counter() - t0
    if last_val is None:  # resumed at the end: evaluate once more
        last_val = evaluate_on_device(model, batches.val, b, device)
        check_finite("validation loss", last_val[0], steps, prof)
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise NonFiniteLoss(
            f"{len(bad)} weight tensor(s) are NaN or infinite after step {steps} (e.g. {bad[0]}): "
            f"training diverged (lr={prof['lr']:g}), nothing was saved; lower --set lr and train again"
        )
    save_model(model)
    write_curve(out_dir / "train_curve.csv", rows, diagnostic=True)
    return {
        "world_size": 1,
        "compiled": True,
        "fast_step": True,
        "is_main_process": True,
        "steps": steps,
        "tokens": tokens,
        "train_time_s": round(elapsed, 3),
        "tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 else None,
        "final_val_loss": last_val[0],
        "final_val_ppl": math.exp(last_val[0]) if last_val[0] < 700 else float("inf"),
        "final_val_exact_match": last_val[1],
    }
