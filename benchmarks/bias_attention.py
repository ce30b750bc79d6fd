"""Distance-bias attention on a GPU: the fused kernel (peeval.kernels.bias_attention) vs sdpa.

Forward and forward+backward time (median of --reps with CUDA events, after warm-up) and peak
memory of forward+backward, at the gpu profile's attention shapes (H=8, d=64, bf16, causal):
B × N = 64 × 512 and 16 × 2,048. Methods, measured side by side in one run:
  rope       sdpa without a bias (the baseline of every ratio)
  sdpa_bias  sdpa with the N×N bias gathered from the per-distance vector w (H, N) in the timed
             call, gradient into w through the gather (t5 / kerple's CUDA training default)
  fused      the fused kernel: w read per tile, dw by per-tile diagonal sums
  fire_sdpa  sdpa with FIRE's N×N bias from its piecewise-linear pieces (32 segments), built in the call
  fire_fused the kernel with FIRE's pieces (segment search in the tile; dψ, dnorm, dA, dC in the kernel)
Every method's outputs and gradients are compared with its sdpa counterpart's (relative error printed).

    python benchmarks/bias_attention.py [--shapes 64x512,16x2048] [--reps 20] [--out FILE.json]
    TRITON_INTERPRET=1 python benchmarks/bias_attention.py --dry-run   # CPU, tiny shapes, no timings
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

from peeval.kernels.bias_attention import bias_attention, fire_attention, fire_dense_bias  # noqa: E402

H, D = 8, 64


def refuse(message: str):
    """One line naming the option and what is allowed, exit code 2, nothing written."""
    print(f"bias_attention.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    try:
        shapes = [tuple(int(x) for x in s.split("x")) for s in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 2 or min(s) < 1 for s in shapes):
        refuse(f"--shapes: comma-separated BxN with positive integers (e.g. 64x512,16x2048), got {text!r}")
    return shapes


def inputs(b: int, n: int, device, dtype):
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(b, H, n, D, generator=g).to(device, dtype).requires_grad_() for _ in range(3))
    w = (-0.1 * torch.rand(H, 1, generator=g) * torch.arange(n)).to(device).requires_grad_()
    return q, k, v, w


def methods():
    def rope(q, k, v, w):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def sdpa_bias(q, k, v, w):
        i = torch.arange(q.shape[2], device=q.device)
        dist = (i[:, None] - i[None, :]).clamp(min=0)
        bias = w[:, dist].to(q.dtype).masked_fill(i[None, :] > i[:, None], float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None])

    def fused(q, k, v, w):
        return bias_attention(q, k, v, w)

    def fire_sdpa(q, k, v, w):
        psi, norm, t, a, c = fire_pieces(q.shape[0], q.shape[2], w)
        i = torch.arange(q.shape[2], device=q.device)
        bias = fire_dense_bias(psi, norm, t, a, c).to(q.dtype).masked_fill(i[None, :] > i[:, None], float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    def fire_fused(q, k, v, w):
        return fire_attention(q, k, v, *fire_pieces(q.shape[0], q.shape[2], w))

    return {"rope": rope, "sdpa_bias": sdpa_bias, "fused": fused, "fire_sdpa": fire_sdpa, "fire_fused": fire_fused}


def fire_pieces(b, n, w, hidden=32):
    """FIRE's tensors (ψ, norm, t, A, C) at L = 512, c = 0.1, differentiable through w's first row (scaled)."""
    g = torch.Generator(device="cpu").manual_seed(2)
    dev = w.device
    psi = torch.log1p(0.1 * torch.arange(n, device=dev, dtype=torch.float32)) * (1 + w[0, :1])
    norm = torch.log1p(0.1 * torch.arange(n, device=dev, dtype=torch.float32).clamp(min=512.0)) + 1e-6
    t = torch.rand(hidden, generator=g).sort().values.to(dev)
    a, c = (torch.randn(hidden + 1, H, generator=g).to(dev) * (1 + w[0, 0]) for _ in range(2))
    return psi, norm.expand(b, n), t, a, c


def time_ms(fn, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def grads(fn, x, go):
    out = fn(*x)
    wanted = [t for t in x if t.requires_grad]
    return [out, *torch.autograd.grad(out, wanted, go, allow_unused=True)]


def rel(a, ref):
    if a is None or ref is None:
        return None
    return ((a.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def run_shape(b, n, reps, device, dtype, timed):
    x = inputs(b, n, device, dtype)
    go = torch.randn(b, H, n, D, generator=torch.Generator(device="cpu").manual_seed(1)).to(device, dtype)
    ms = methods()
    refs = {"sdpa_bias": grads(ms["sdpa_bias"], x, go), "fire_sdpa": grads(ms["fire_sdpa"], x, go)}
    rows = {}
    for name, fn in ms.items():
        got = grads(fn, x, go)
        ref = refs["fire_sdpa" if name.startswith("fire") else "sdpa_bias"]
        errs = {k: rel(a, r) for k, a, r in zip(("out", "dq", "dk", "dv", "dw"), got, ref)} if name != "rope" else {}
        row = {"errors": errs}
        if timed:
            with torch.no_grad():
                row["fwd_ms"] = time_ms(lambda fn=fn: fn(*x), reps)
            row["fwd_bwd_ms"] = time_ms(lambda fn=fn: grads(fn, x, go), reps)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            grads(fn, x, go)
            torch.cuda.synchronize()
            row["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        rows[name] = row
    if timed:
        for row in rows.values():
            row["fwd_bwd_vs_rope"] = row["fwd_bwd_ms"] / rows["rope"]["fwd_bwd_ms"]
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="64x512,16x2048", help="comma-separated BxN")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None, help="write the results as JSON here (refused if it exists)")
    ap.add_argument("--dry-run", action="store_true", help="CPU under TRITON_INTERPRET=1, tiny shapes, no timings")
    a = ap.parse_args(argv)
    shapes = parse_shapes(a.shapes)
    if a.reps < 1:
        refuse(f"--reps: a positive integer, got {a.reps}")
    if a.out and os.path.exists(a.out):
        refuse(f"--out: {a.out} exists; not overwriting it")
    if a.dry_run:
        if os.environ.get("TRITON_INTERPRET") != "1":
            refuse("--dry-run: run with TRITON_INTERPRET=1 (the kernel on CPU tensors)")
        device, dtype, timed, shapes = "cpu", torch.float32, False, [(2, 40)]
    else:
        if not torch.cuda.is_available():
            refuse("no CUDA device: run on a GPU, or --dry-run with TRITON_INTERPRET=1")
        device, dtype, timed = "cuda", torch.bfloat16, True
    result = {"H": H, "d": D, "dtype": str(dtype), "shapes": {}}
    for b, n in shapes:
        rows = run_shape(b, n, a.reps, device, dtype, timed)
        result["shapes"][f"{b}x{n}"] = rows
        for name, row in rows.items():
            t = ""
            if timed:
                t = f"fwd {row['fwd_ms']:.3f} ms  fwd+bwd {row['fwd_bwd_ms']:.3f} ms "
                t += f"({row['fwd_bwd_vs_rope']:.2f}x rope)  peak {row['peak_mib']:.0f} MiB  "
            errs = " ".join(f"{k}={v:.1e}" for k, v in row["errors"].items() if v is not None)
            print(f"{b}x{n} {name:10s} {t}{errs}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
