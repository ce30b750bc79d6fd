"""The two paths of a training step (issue 43): ``eager`` (the reference, bit for bit what every
checkpoint before issue 43 was trained with) and ``compiled`` (``torch.compile``'s inductor back-end
on the step's loss, and the single-kernel AdamW, ``fused=True``).

``peeval train --compile auto|on|off`` picks one; ``auto`` is ``on`` for every run on CUDA (issue 57: rope's
gpu-profile step 74.3 -> 32.3 ms on an H200, 26.5 -> 14.8 GiB; no encoding's forward has a graph break
there, tests/models/test_compiled_default.py), and for text pretraining on CPU of at least
``AUTO_MIN_STEPS`` optimizer steps, where it pays: the compiled step measured about 1.2x the
eager one's tokens/s (1.04-1.35x; cpu profile and issue 43's width-64 model, one thread, a loaded
machine), and compiling costs up to a minute on one core the first time (seconds from inductor's
graph cache), so a run breaks even after a few hundred steps. Elsewhere ``auto`` is ``off``: the
smoke profile (6 steps) and the cpu profile (250 steps) keep the eager path and their bits;
diagnostics (padded batches, whose masks split the compiled graph) were not measured.
``benchmarks/cpu_train_speed.py`` times both paths side by side in one process.

Inductor's graph cache (``TORCHINDUCTOR_CACHE_DIR``) is shared by every run that names the same
folder: the pipeline names ``.cache/inductor`` in the repository (``pipelines/common.py``), so the
seeds and encodings of one pipeline run, and later runs, compile each distinct graph once.
"""

from __future__ import annotations

import torch

#: the values ``--compile`` allows
COMPILE_CHOICES = ("auto", "on", "off")
#: ``auto`` compiles a CPU run of at least this many optimizer steps
AUTO_MIN_STEPS = 1000
#: compilations of one frame before dynamo gives up on it: above one per layer of the largest profile (12)
RECOMPILE_LIMIT = 64


def check_compile(value: str) -> str:
    """``value`` when allowed; else a ValueError naming the option and what it allows (one line)."""
    if value not in COMPILE_CHOICES:
        raise ValueError(f"--compile {value!r}: allowed {', '.join(COMPILE_CHOICES)}")
    return value


def use_compiled(value: str, device, steps: int, text: bool = True) -> bool:
    """Whether a run of ``steps`` optimizer steps on ``device`` takes the compiled path (``text``:
    pretraining on text, not a diagnostic task)."""
    check_compile(value)
    if value != "auto":
        return value == "on"
    kind = torch.device(device).type
    return kind == "cuda" or (text and kind == "cpu" and steps >= AUTO_MIN_STEPS)


def make_optimizer(groups: list[dict], prof: dict, compiled: bool) -> torch.optim.Optimizer:
    """AdamW as ``fit`` has always built it; on the compiled path its fused kernel (one pass over each
    tensor instead of a dozen: about 5 % of a cpu-profile step)."""
    return torch.optim.AdamW(
        groups, lr=prof["lr"], betas=tuple(prof["betas"]), eps=1e-8, **({"fused": True} if compiled else {})
    )


def summed_loss(model, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask=None) -> torch.Tensor:
    """The summed next-token loss over labelled positions (``-100`` ignored): ``loss_and_correct``'s
    training loss, without its exact-match counts (unused while training) and without indexing by a
    mask (a shape that depends on data, which would split the compiled graph). With ``config.linear_loss``
    other than ``logits`` the model computes it without holding the logits (issue 65)."""
    config = getattr(getattr(model, "module", model), "config", None)  # a DDP-wrapped model: its module's
    if getattr(config, "linear_loss", "logits") != "logits":
        return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, num_items_in_batch=1).loss
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum"
    )


def compiled_loss():
    """``summed_loss`` compiled by inductor, one graph per shape (``dynamic=False``: a run's micro-batches share
    one shape, so one compilation; a second shape gets its own static graph, not a slower dynamic one).

    Dynamo's in-process cache is emptied first: the graphs of an earlier run in this process (tests, the
    benchmark) would count towards its recompile limit, past which a frame silently runs eagerly; and the
    limit is raised above the one compilation per layer that an encoding with a graph break inside its
    layers needs (on the CPU: the blocked back-end's backward of alibi, t5, kerple, fire)."""
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(summed_loss, dynamic=False)
