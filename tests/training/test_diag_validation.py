"""Diagnostic training's validation and objective (issue 28): validation rows are the training
distribution (addition: every in-distribution cell, >= 10 examples each), at least 256 of them on the
cpu profile, every one scored; flip-flop trains on every read (Liu et al.), not the final one only."""

from collections import Counter

import pytest
import torch

from peeval.tasks.diagnostics import generators as gen
from peeval.training import loop
from peeval.training.diagnostics import encode_examples, prepare_diagnostic
from peeval.training.profiles import get_profile


def _rows(tok, batch) -> list[list[str]]:
    """The validation rows as symbols (padding dropped)."""
    out = []
    for ids, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist(), strict=True):
        out.append(tok.convert_ids_to_tokens([i for i, m in zip(ids, mask, strict=True) if m]))
    return out


class _Model:
    """Stands in for a model: ``evaluate`` only switches it between eval and train mode."""

    training = True

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode


def _scored_rows(monkeypatch, batches, prof) -> int:
    seen = []

    def fake(model, batch, reduction="mean"):
        seen.append(batch["input_ids"].shape[0])
        return torch.tensor(0.0), 1, batch["input_ids"].shape[0], batch["input_ids"].shape[0]

    monkeypatch.setattr(loop, "loss_and_correct", fake)
    loop.evaluate(_Model(), batches, prof, "cpu")
    return sum(seen)


@pytest.mark.parametrize("task", gen.TASKS)
def test_validation_rows_are_in_distribution_and_all_scored(task, monkeypatch):
    prof = get_profile("diag", "cpu", {"train_examples": 8})
    tok, batches, _ = prepare_diagnostic(task, prof, seed=0)
    n_val = batches.val["input_ids"].shape[0]
    assert n_val >= 256
    assert _scored_rows(monkeypatch, batches, prof) == n_val  # every row, not the first batches
    if task == "addition":  # the operand lengths of every row are training lengths, each cell >= 10 times
        n_max = gen.params("addition")["n_max"]
        cells = Counter()
        for toks in _rows(tok, batches.val):
            prompt = toks[: toks.index("=")]
            plus = prompt.index("+")
            cells[plus, len(prompt) - plus - 1] += 1
        assert set(cells) == {(a, b) for a in range(1, n_max + 1) for b in range(1, n_max + 1)}
        assert min(cells.values()) >= 10


def test_validation_split_is_the_training_distribution():
    """The meta a split's distribution is defined by: ``val`` has the training values."""
    keys = {"flip_flop": "p_i", "selective_copy": "n_blank", "counting": "w_pass", "indirect_indexing": "length"}
    for task, key in keys.items():
        train = {r["meta"][key] for r in gen.generate(task, "train", 300, seed=1)}
        val = {r["meta"][key] for r in gen.generate(task, gen.VAL_SPLIT, 300, seed=1)}
        assert val <= train, task
    assert gen.VAL_SPLIT not in gen.splits("addition")  # no lm-eval task of that name
    n_max = gen.params("addition", "paper")["n_max"]
    rows = gen.generate("addition", gen.VAL_SPLIT, 5, profile="paper")
    assert len(rows) == 10 * n_max * n_max and max(r["meta"]["len_a"] for r in rows) == n_max


def test_flip_flop_trains_on_every_read():
    """Liu et al.: the loss is on every read's bit (the sequence's deterministic tokens), the final one too."""
    tok = gen.tokenizer("flip_flop")
    row = {"prompt": "w 1 i 0 r 1 w 0 i 1 r 0 r", "answer": "0", "meta": {}}
    b = encode_examples([row], tok, "flip_flop")
    labelled = [i for i, lab in enumerate(b["labels"][0].tolist()) if lab != -100]
    assert labelled == [5, 11, 13, 14]  # the bits after the two inner reads, the answer, EOS
    assert [b["input_ids"][0, i].item() for i in labelled] == tok.convert_tokens_to_ids(["1", "0", "0", "<eos>"])
    assert encode_examples([row], tok)["labels"][0].tolist()[:13] == [-100] * 13  # without the task: the answer only
    # every task trains the bits lm-eval scores as read_acc (diag.read_positions)
    from peeval.tasks.diagnostics.diag import read_positions

    assert read_positions(row["prompt"]) == [("w 1 i 0 r", "1"), ("w 1 i 0 r 1 w 0 i 1 r", "0")]
    assert gen.deterministic_positions("addition", "1 + 2 =") == []
