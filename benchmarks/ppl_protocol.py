"""What the perplexity protocols cost (issue 27 item 3): one checkpoint, one process, variants side by side.

    OMP_NUM_THREADS=1 python benchmarks/ppl_protocol.py checkpoints/pretrain/rope

Scores PG-19 (the mirror's Gutenberg books) at 256..4096 tokens with the old disjoint-window setting of the cpu
profile (2 documents x 2 windows) and with the fixed-target protocol (16,384 targets): one window per forward (as
shipped for CPUs), batched windows of one length (as shipped for GPUs) and logits at every position. Prints a
Markdown table: scored tokens, forwards, seconds, scored tokens per second.
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a peeval checkpoint folder (with its tokenizer)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    import torch
    from lm_eval.api.registry import get_model

    import peeval.harness.plugin as plugin
    from peeval.tasks.ppl.ppl import build_dataset

    torch.set_num_threads(a.threads)
    lm = get_model("peeval")(pretrained=a.checkpoint, device="cpu")
    lengths = [256, 512, 1024, 2048, 4096]

    def rows(**md):
        return [(d["text"], d) for d in build_dataset("deepmind/pg19", lengths=lengths, **md)["test"]]

    def run(name: str, rs: list, **patch) -> None:
        saved = {k: getattr(plugin.PeevalHFLMBase, k) for k in patch}
        for k, v in patch.items():
            setattr(plugin.PeevalHFLMBase, k, v)
        try:
            t = time.perf_counter()
            out = lm.score_rows(rs, disable_tqdm=True)
            dt = time.perf_counter() - t
        finally:
            for k, v in saved.items():
                setattr(plugin.PeevalHFLMBase, k, v)
        tok, fwd = sum(r["tokens"] for r in out), sum(r["windows"] for r in out)
        print(f"| {name} | {tok:,} | {fwd} | {dt:.1f} | {tok / dt:,.0f} |", flush=True)

    def all_logits(self, x, keep):
        return self.model(input_ids=x).logits[:, -keep:]

    print("| pg19, lengths 256..4096 | scored tokens | forwards | seconds | scored tokens / s |")
    print("|---|---:|---:|---:|---:|")
    old = rows(protocol="windows", max_docs=2, max_windows=2)
    run("windows protocol, 2 documents x 2 windows (the old cpu setting)", old)
    fixed = rows(targets=16384, skip=4096)
    run("fixed targets, one window per forward (as shipped for CPUs)", fixed)
    run("fixed targets, windows of one length batched (as shipped for GPUs)", fixed, PPL_BATCH_TOKENS_CPU=16384)
    run("fixed targets, logits at every position", fixed, _window_logits=all_logits)
    run("fixed targets, one window per forward (again: order and warm-up effects)", fixed)


if __name__ == "__main__":
    main()
