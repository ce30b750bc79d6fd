"""What ``peeval train`` / ``peeval adapt`` print when they finish: the summary's headline keys as
one JSON line, then where the result is (the training itself is replaced by a stub)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize(
    "cmd, module, func, extra, keys, where",
    [
        ("train", "peeval.training.pretrain", "run_train", ["--pe", "rope"],
         ["pe", "task", "params", "steps", "train_time_s", "final_val_ppl"], "checkpoint in"),
        ("adapt", "peeval.training.adapt", "run_adapt", ["--method", "pi"],
         ["method", "trainable_params", "total_params", "steps", "train_time_s", "final_val_ppl"], "adapter in"),
    ],
)  # fmt: skip
def test_finished_command_prints_headline_and_place(
    cmd, module, func, extra, keys, where, tmp_path, capsys, monkeypatch
):
    import importlib

    from peeval.cli import main

    summary = {k: i for i, k in enumerate(keys)} | {"not_shown": 1.5}
    del summary[keys[1]]  # a key the summary lacks is printed as null
    monkeypatch.setattr(importlib.import_module(module), func, lambda *a, **kw: summary)
    assert main([cmd, *extra, "--out", str(tmp_path / "o"), "--profile", "smoke"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    head = json.loads(lines[-2])
    assert list(head) == keys and head[keys[1]] is None and head[keys[0]] == 0 and head[keys[-1]] == len(keys) - 1
    assert lines[-1] == f"peeval {cmd}: {where} {tmp_path / 'o'}"
