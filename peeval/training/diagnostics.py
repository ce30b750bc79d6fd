"""Diagnostic-task data for ``peeval train --task``: token ids with the loss on the answer only.

Examples come from ``peeval.tasks.diagnostics.generators`` (seeded); each row is
``prompt answer <eos>`` with no BOS, exactly the token sequence lm-eval scores
(``peeval_diag_*``: prompt, then " " + answer, no special tokens). Labels are -100 on the prompt
and the padding, so the loss (and the exact-match rate) counts the answer tokens (+ EOS) only, and
the prompt's deterministic tokens where the task has them (``generators.deterministic_positions``:
flip-flop's every read, Liu et al.'s objective). Validation rows are the task's ``val`` split: the
training distribution, held out (the ``test`` split of addition is mostly lengths never trained on),
and every one of them is scored (``loop.evaluate``).
"""

from __future__ import annotations

import torch

from .data import Batches


def encode_examples(rows: list[dict], tok, task: str | None = None) -> dict[str, torch.Tensor]:
    """Right-padded (input_ids, attention_mask, labels) for ``rows`` (prompt/answer dicts); with ``task``,
    its deterministic prompt tokens are labelled too (one token per whitespace-separated symbol)."""
    from ..tasks.diagnostics.generators import deterministic_positions

    seqs, labs = [], []
    for r in rows:
        p = tok(r["prompt"], add_special_tokens=False)["input_ids"]
        a = tok(r["answer"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        if tok.unk_token_id in p + a:
            raise ValueError(f"diagnostic example has symbols outside the task vocabulary: {r['prompt'][:80]!r}")
        lab = [-100] * len(p)
        for i in deterministic_positions(task, r["prompt"]) if task else []:
            lab[i] = p[i]
        seqs.append(p + a)
        labs.append(lab + a)
    n = max(map(len, seqs))
    ids = torch.full((len(seqs), n), tok.pad_token_id, dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, (s, lab) in enumerate(zip(seqs, labs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, : len(s)] = torch.tensor(lab)
        mask[i, : len(s)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def prepare_diagnostic(task: str, prof: dict, seed: int):
    """(tokenizer, Batches, max_len) for diagnostic ``task`` under the diag profile ``prof``."""
    from ..tasks.diagnostics import generators as gen

    gp = prof["gen_profile"]
    train = gen.generate(task, "train", prof["train_examples"], seed=seed, profile=gp, **prof["task_params"])
    val = gen.generate(task, gen.VAL_SPLIT, prof["val_examples"], seed=seed, profile=gp, **prof["task_params"])
    tok = gen.tokenizer(task)
    tr, va = encode_examples(train, tok, task), encode_examples(val, tok, task)
    max_len = max(tr["input_ids"].shape[1], va["input_ids"].shape[1])
    return tok, Batches(tr, va), max_len
