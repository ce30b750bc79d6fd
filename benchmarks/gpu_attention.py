"""GPU attention benchmark: rope (sdpa) vs TAPE and PoPE, unfused references vs fused Triton kernels.

Times forward and forward+backward (median of several reps with CUDA events, after warm-up)
and the peak memory of forward+backward above the inputs, at B=1, H=12, d=64, bf16, causal,
N = 1k..32k. Ratios are to rope measured in the same run. The attention core only: q/k are
given already position-transformed for rope and TAPE (the rotation is O(N·d) and the same
for both); PoPE's fused kernel takes raw q/k and does softplus + phases inside.

    python benchmarks/gpu_attention.py [--sizes 1024,2048,...] [--sweep] [--reps 10]

flash-attn is not installable here (a source distribution that compiles CUDA): "rope" is
torch sdpa, which dispatches to its own FlashAttention-2 kernel for this shape.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

B, H, D = 1, 12, 64


def make_inputs(n: int, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(n)

    def r(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g).requires_grad_()

    q, k, v = r(B, H, n, D), r(B, H, n, D), r(B, H, n, D)
    e = r(B, H, n, 2 * D)
    pos = torch.arange(n, device="cuda")
    theta = 10000.0 ** (-torch.arange(D, device="cuda", dtype=torch.float32) / D)
    delta = (-2 * math.pi * torch.rand(H, D, device="cuda", generator=g)).requires_grad_()
    return dict(q=q, k=k, v=v, e=e, pos=pos, theta=theta, delta=delta)


def methods():
    from peeval.kernels.pope_attention import pope_attention_reference, pope_attention_triton
    from peeval.kernels.tape_attention import tape_attention_reference, tape_attention_triton

    def rope(x):
        return (F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=True),)

    def tape_ref(x):
        return tape_attention_reference(x["q"], x["k"], x["v"], x["e"])

    def tape_fused(x):
        return tape_attention_triton(x["q"], x["k"], x["v"], x["e"])

    def pope_ref(x):
        return (pope_attention_reference(x["q"], x["k"], x["v"], x["pos"], x["pos"], x["theta"], x["delta"]),)

    def pope_fused(x):
        return (pope_attention_triton(x["q"], x["k"], x["v"], x["pos"], x["pos"], x["theta"], x["delta"]),)

    return {
        "rope": rope,
        "tape_ref": tape_ref,
        "tape_fused": tape_fused,
        "pope_ref": pope_ref,
        "pope_fused": pope_fused,
    }


def grads_of(name, x):
    keys = ["q", "k", "v"] + (["e"] if name.startswith("tape") else []) + (["delta"] if name.startswith("pope") else [])
    return [x[k] for k in keys]


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


def measure(name, fn, x, reps):
    inputs = grads_of(name, x)

    def fwd():
        with torch.no_grad():
            fn(x)

    def fwd_bwd():
        outs = fn(x)
        torch.autograd.grad(outs, inputs, [torch.ones_like(o) for o in outs])

    try:
        t_f = time_ms(fwd, reps)
        t_fb = time_ms(fwd_bwd, reps)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fwd_bwd()
        torch.cuda.synchronize()
        mem = (torch.cuda.max_memory_allocated() - base) / 2**20
        return t_f, t_fb, mem
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None


def sweep(n: int = 8192):
    """Pick block sizes for the fused kernels at one length (fwd, then bwd_kv, then bwd_q)."""
    from peeval.kernels import pope_attention as pk
    from peeval.kernels import tape_attention as tk

    # larger query blocks (fwd, bwd_q) / key blocks (bwd_kv) amortise the per-tile work on the other side
    # (PoPE: softplus + phases of every streamed tile), at the cost of registers
    fwd = [(128, 64, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (128, 32, 4, 3), (256, 64, 8, 2), (256, 32, 8, 2)]
    bkv = [(32, 64, 4, 2), (64, 64, 4, 2), (32, 128, 8, 2), (64, 128, 8, 2)]
    bq = [(64, 32, 4, 2), (64, 64, 4, 2), (128, 32, 8, 2), (128, 64, 8, 2)]
    x = make_inputs(n)
    ms = methods()
    for mod, name in ((tk, "tape_fused"), (pk, "pope_fused")):
        fn = ms[name]
        for kind, cands in (("fwd", fwd), ("bwd_kv", bkv), ("bwd_q", bq)):
            best = None
            for bm, bn, w, s in cands:
                if kind == "fwd" and bm % bn or kind == "bwd_kv" and bn % bm:
                    continue
                mod.CONFIG[kind] = dict(BM=bm, BN=bn, num_warps=w, num_stages=s)
                try:
                    r = measure(name, fn, x, reps=5)
                except Exception as ex:  # out of shared memory / registers for this config
                    print(f"  sweep {name} {kind} {(bm, bn, w, s)}: failed ({type(ex).__name__})")
                    continue
                t = r[0] if kind == "fwd" else r[1]
                print(f"  sweep {name} {kind} BM={bm} BN={bn} warps={w} stages={s}: {t:.3f} ms")
                if best is None or t < best[0]:
                    best = (t, dict(mod.CONFIG[kind]))
            mod.CONFIG[kind] = best[1]
        print(f"  chosen {name}: {mod.CONFIG}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,2048,4096,8192,16384,32768")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sweep", action="store_true", help="pick the fused kernels' block sizes at N=8192 first")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark")
        return 0
    import triton

    try:
        import flash_attn  # noqa: F401

        fa = "importable (not used: the comparison is sdpa)"
    except ImportError:
        fa = "NOT installed (cannot be built here); rope = torch sdpa (its own FlashAttention-2 kernel)"
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"flash-attn: {fa}")
    print(f"shape B={B} H={H} d={D} bf16 causal; TAPE streams X=2d={2 * D}; times are medians of {args.reps} reps")
    if args.sweep:
        sweep()
    ms = methods()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        x = make_inputs(n)
        reps = args.reps if n <= 8192 else max(3, args.reps // 2)
        res = {name: measure(name, fn, x, reps) for name, fn in ms.items()}
        rows.append((n, res))
        print(
            f"N={n}: "
            + ", ".join(
                f"{k}={'OOM' if v is None else f'{v[0]:.2f}/{v[1]:.2f}ms {v[2]:.0f}MiB'}" for k, v in res.items()
            )
        )
        del x
        torch.cuda.empty_cache()

    def cell(v, r, i):
        if v is None:
            return "OOM"
        return f"{v[i]:.2f} ({v[i] / r[i]:.2f}x)" if i < 2 else f"{v[i]:.0f} ({v[i] / max(r[i], 1e-9):.1f}x)"

    names = list(ms)
    for i, what in enumerate(["forward ms (ratio to rope)", "forward+backward ms (ratio to rope)", "peak MiB fwd+bwd"]):
        print(f"\n{what}")
        print("| N | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for n, res in rows:
            r = res["rope"]
            print(f"| {n} | " + " | ".join(cell(res[k], r, i) for k in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
