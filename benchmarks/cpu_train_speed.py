"""Old path vs new path of ``peeval train``'s step on the CPU, side by side in one process (issue 43):

    OMP_NUM_THREADS=1 python benchmarks/cpu_train_speed.py --model cpu small --pe rope alibi tape --steps 30

For each model and encoding, two copies of one model (same seed, same initial weights) train on the
same batches: the eager path (``loss_and_correct`` + AdamW, what ``fit`` ran before issue 43) and the
compiled one (``peeval.training.speed``: ``torch.compile`` of the summed loss + fused AdamW). Their
steps alternate, so a busy machine slows both alike. Reported per row: tokens/s per thread (median of
the steps after the first two; and over all steps, compilation included), their ratio, the compiled
path's first-step seconds (compilation: a cold or a warm inductor cache, ``TORCHINDUCTOR_CACHE_DIR``),
and the largest absolute difference of the two loss curves. The data is a fixed random Markov chain
over the vocabulary (each token has 4 successors), so the loss falls from ln(vocab) towards ln 4 and
the curves say something. Run it alone on the machine: the load average is printed with the table.
"""

import argparse
import os
import statistics
import time

import torch

from peeval.bench.train import SHAPE_KEYS, profile_settings
from peeval.models import PeevalConfig, PeevalForCausalLM
from peeval.training.loop import loss_and_correct
from peeval.training.speed import compiled_loss, make_optimizer

#: the models timed: today's cpu profile, the cpu profile's model before issue 43 (bbccc2f: width 128, 4 heads,
#: 2,048 tokens; the "same model" of issue 43 item 2), and issue 43's example small one (width 64, 1,024 tokens)
MODELS = {
    "cpu": {},
    "cpu-bbccc2f": {"hidden_size": 128, "intermediate_size": 344, "vocab_size": 2048, "num_attention_heads": 4,
                    "num_key_value_heads": 4},
    "small": {"hidden_size": 64, "intermediate_size": 172, "vocab_size": 1024},
}  # fmt: skip
#: the sizing grid of docs/sizing.md (4 layers, head dimension 16, SwiGLU width ~8/3 of the model width)
for _w, _v in ((32, 512), (32, 1024), (48, 512), (48, 1024), (64, 512), (64, 1024), (96, 512), (96, 1024)):
    MODELS[f"d{_w}v{_v}"] = {"hidden_size": _w, "intermediate_size": -(-8 * _w // 3), "vocab_size": _v,
                             "num_attention_heads": _w // 16, "num_key_value_heads": _w // 16}  # fmt: skip


def markov_batches(vocab: int, steps: int, batch: int, seq: int, seed: int = 0) -> list[torch.Tensor]:
    """``steps`` batches of a fixed random chain: token t+1 is one of 4 successors of token t."""
    g = torch.Generator().manual_seed(seed)
    succ = torch.randint(0, vocab, (vocab, 4), generator=g)
    out = []
    for _ in range(steps):
        x = torch.empty(batch, seq, dtype=torch.long)
        x[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
        pick = torch.randint(0, 4, (batch, seq), generator=g)
        for t in range(1, seq):
            x[:, t] = succ[x[:, t - 1], pick[:, t]]
        out.append(x)
    return out


def path(prof: dict, pe: str, compiled: bool):
    """One model + optimizer + step function of the given path (the model built from seed 0)."""
    torch.manual_seed(0)
    cfg = PeevalConfig(**{k: prof[k] for k in SHAPE_KEYS}, max_position_embeddings=prof["seq_len"], pe=pe)
    model = PeevalForCausalLM(cfg).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    groups = [{"params": decay, "weight_decay": prof["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    opt = make_optimizer(groups, prof, compiled)
    loss_of = compiled_loss() if compiled else None

    def step(x: torch.Tensor) -> tuple[float, float]:
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if loss_of is not None:
            loss = loss_of(model, x, x)
        else:
            loss = loss_and_correct(model, {"input_ids": x}, reduction="sum")[0]
        n = x.shape[0] * (x.shape[1] - 1)
        (loss / n).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), prof["grad_clip"])
        opt.step()
        value = loss.item() / n
        return time.perf_counter() - t, value

    step.params = sum(p.numel() for p in model.parameters())  # a tied embedding once
    return step


def row(model: str, pe: str, steps: int, eager_only: bool = False) -> dict:
    prof = {**profile_settings("cpu"), **MODELS[model]}
    data = markov_batches(prof["vocab_size"], steps, prof["batch_size"], prof["seq_len"])
    old = path(prof, pe, False)
    new = old if eager_only else path(prof, pe, True)  # eager only: the "new" columns repeat the old path
    t_old, t_new, l_old, l_new = [], [], [], []
    for x in data:  # alternate: a load that comes and goes hits both paths
        for step, ts, ls in ((old, t_old, l_old),) + (() if eager_only else ((new, t_new, l_new),)):
            dt, loss = step(x)
            ts.append(dt)
            ls.append(loss)
    if eager_only:
        t_new, l_new = t_old, l_old
    tok, threads = data[0].numel(), torch.get_num_threads()
    steady = {k: statistics.median(v[2:] or v) for k, v in (("old", t_old), ("new", t_new))}
    return {"model": model, "pe": pe, "params": old.params, "steps": steps, "old_tps": tok / steady["old"] / threads,
            "new_tps": tok / steady["new"] / threads, "ratio": steady["old"] / steady["new"],
            "ratio_all": sum(t_old) / sum(t_new), "first_new_s": t_new[0], "first_old_s": t_old[0],
            "max_loss_diff": max(abs(a - b) for a, b in zip(l_old, l_new)), "loss_first": l_old[0],
            "loss_last": l_old[-1]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", nargs="+", default=["cpu", "small"], choices=sorted(MODELS))
    ap.add_argument("--pe", nargs="+", default=["rope", "alibi", "tape"])
    ap.add_argument("--steps", type=int, default=30, help="steps per path (>= 3; the first two are not steady)")
    ap.add_argument(
        "--eager-only",
        action="store_true",
        help="time only the eager path (what `--compile auto` runs below 1,000 steps): the sizing table",
    )
    a = ap.parse_args()
    if a.steps < 3:
        ap.error(f"--steps {a.steps}: allowed an integer >= 3")
    load = os.getloadavg()
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, cache "
        f"{os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'default')}, load average {load[0]:.2f} {load[1]:.2f}"
    )
    print(
        "| model | pe | params | tokens/s/thread old | new | new/old steady | new/old incl. compile | "
        "first step old s | new s (compile) | max abs loss diff | loss first -> last |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for model in a.model:
        for pe in a.pe:
            r = row(model, pe, a.steps, a.eager_only)
            print(
                f"| {model} | {pe} | {r['params']:,} | {r['old_tps']:.0f} | {r['new_tps']:.0f} | {r['ratio']:.2f} | "
                f"{r['ratio_all']:.2f} | {r['first_old_s']:.1f} | {r['first_new_s']:.1f} | "
                f"{r['max_loss_diff']:.2e} | {r['loss_first']:.3f} -> {r['loss_last']:.3f} |",
                flush=True,
            )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f}")


if __name__ == "__main__":
    main()
