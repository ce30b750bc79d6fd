"""Train FIRE with ``attn_backend=flex`` for N steps on synthetic tokens (issue 46): where the compiled
FlexAttention (its backward) fails, peeval falls back with one log line and training goes on.

    python benchmarks/fire_fallback_train.py --profile gpu --steps 50 --json out.json
    python benchmarks/fire_fallback_train.py --profile smoke --device cpu --steps 5

Reports the back-ends that ran, the peeval log lines, the loss at the first and last steps and the
step times. Synthetic data: a repeated random pattern of 64 tokens, so the loss must fall.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

import torch

import peeval.models.attention as attn
from peeval.bench.train import build, profile_settings


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="gpu")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--pe", default="fire@flex", help="pe@attn_backend")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch_size", type=int, default=None)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    lines = Lines()
    logging.getLogger("peeval").addHandler(lines)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    prof = profile_settings(a.profile)
    batch, n = a.batch_size or prof["batch_size"], prof["seq_len"]
    model = build(a.pe, prof, n, a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    pattern = torch.randint(0, prof["vocab_size"], (64,), generator=g)
    starts = torch.randint(0, 64, (batch,), generator=g)
    x = torch.stack([pattern.roll(-int(s)).repeat(n // 64 + 1)[:n] for s in starts]).to(a.device)
    cuda = a.device.startswith("cuda")
    ran: set[str] = set()
    attend = attn.attend
    attn.attend = lambda how, call: ran.add(how) or attend(how, call)
    losses, times = [], []
    try:
        for step in range(a.steps):
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cuda):
                loss = model(x, labels=x, use_cache=False).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            times.append(time.perf_counter() - t)
            if step in (0, 1) or (step + 1) % 10 == 0:
                print(f"step {step + 1}: loss {losses[-1]:.4f}, {times[-1]:.3f} s, back-ends {sorted(ran)}", flush=True)
    finally:
        attn.attend = attend
    out = {"pe": a.pe, "profile": a.profile, "device": torch.cuda.get_device_name() if cuda else "cpu",
           "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1], "backends": sorted(ran),
           "peeval_log": lines.lines, "first_step_s": times[0],
           "median_step_s": statistics.median(times[1:] or times),
           "broken": sorted(map(list, attn.BROKEN))}  # fmt: skip
    ok = out["last_loss"] < out["first_loss"] and all(map(lambda v: v == v, losses))
    out["ok"] = ok
    print(json.dumps(out, indent=1), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    if not ok:
        raise SystemExit("FAILED: the loss did not fall")
    return out


if __name__ == "__main__":
    main()
