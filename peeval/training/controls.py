"""A finished run's step-0 control rebuilt from its record (issue 67): for runs trained before ``peeval train``
saved ``<out>/step0`` (the published boards), whose initial weights are a function of their seed and settings only
(``seed_all(seed)`` after the data, then ``PeevalForCausalLM(cfg)``, as ``pretrain.run_train`` does).

    python -m peeval.training.controls RUN_DIR OUT_DIR

``RUN_DIR`` holds the run's ``train_summary.json`` (a diagnostic run; a text run also needs its tokenizer files
there). ``OUT_DIR`` (new) receives what ``peeval train`` would have saved in ``RUN_DIR/step0``; the number of
parameters is checked against the run's record, so a different configuration is an error, never a wrong control.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .._io import atomic_write_text, dumps_json


def rebuild_step0(run_dir: str | Path, out_dir: str | Path) -> dict:
    """Write the step-0 control of the run in ``run_dir`` into ``out_dir``; returns its summary. ValueError (one
    line naming the path) on a run that cannot be rebuilt."""
    from ..models import PeevalForCausalLM
    from .data import load_tokenizer
    from .loop import evaluate, seed_all
    from .pretrain import STEP0_CONTROL, control_summary, model_config, save_model_dir

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    f = run_dir / "train_summary.json"
    if not f.is_file():
        raise ValueError(f"RUN_DIR {run_dir}: no train_summary.json (allowed: a peeval train output folder)")
    if out_dir.exists():
        raise ValueError(f"OUT_DIR {out_dir}: exists (allowed: a new folder; nothing is written over)")
    s = json.loads(f.read_text(encoding="utf-8"))
    if s.get("control") == STEP0_CONTROL:
        raise ValueError(f"RUN_DIR {run_dir}: is a step-0 control itself (allowed: a trained run)")
    prof = dict(s["settings"])
    val = None
    if s.get("task") is not None:
        from .diagnostics import prepare_diagnostic

        tok, batches, max_len = prepare_diagnostic(s["task"], prof, int(s["seed"]))
        vocab = len(tok)
    else:
        if not any(run_dir.glob("tokenizer*")):
            raise ValueError(f"RUN_DIR {run_dir}: a text run needs its tokenizer files there (not found)")
        tok, batches, max_len = load_tokenizer(run_dir), None, int(s["training_length"])
        vocab = len(tok)
        if prof.get("tokenizer") == "gpt2":
            vocab = max(vocab, int(prof["vocab_size"]))
    seed_all(int(s["seed"]))
    model = PeevalForCausalLM(model_config(prof, s["pe"], s.get("pe_options"), vocab, max_len, tok))
    n = sum(p.numel() for p in model.parameters())
    if n != s.get("params"):
        raise ValueError(f"RUN_DIR {run_dir}: the rebuilt model has {n} parameters, the run recorded "
                         f"{s.get('params')}: not the run's configuration, nothing written")  # fmt: skip
    if batches is not None:
        val = evaluate(model, batches, prof, "cpu")
    record = {k: s.get(k) for k in ("pe", "pe_options", "task", "profile", "seed", "params", "params_non_embedding",
                                    "flops_per_token", "training_length", "unigram_val_ppl", "tokenizer_hash",
                                    "settings")}  # fmt: skip
    summary = control_summary(record, *(val or (0.0, None)))
    if val is None:  # a text run: its validation text is not rebuilt here
        summary.update(final_val_loss=None, final_val_ppl=None)
    summary["rebuilt_from"] = str(run_dir)
    save_model_dir(out_dir, model, tok)
    atomic_write_text(out_dir / "train_summary.json", dumps_json(summary, indent=1))
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m peeval.training.controls", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a finished run's folder (its train_summary.json)")
    ap.add_argument("out_dir", help="a new folder for its step-0 control (put it at RUN_DIR/step0 to be ingested)")
    args = ap.parse_args(argv)
    try:
        rebuild_step0(args.run_dir, args.out_dir)
    except ValueError as e:
        print(f"controls: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
