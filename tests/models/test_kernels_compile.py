"""The fused kernels compile for a GPU without one: each kernel is lowered to TTGIR for sm_90.

The interpreter (tests/models/test_kernels.py) checks what the kernels compute, but it accepts
code the compiler rejects (a branch on a non-constexpr that returns different types, a helper
that does not inline). Lowering needs no device, so this catches those on a CPU-only machine.
It runs in a subprocess: whether ``@triton.jit`` compiles or interprets is fixed at import time.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import REPO

LOWER = r"""
import sys
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from peeval.kernels import bias_attention as BA, pope_attention as P, tape_attention as T

F32 = {"LSE", "DELTA", "QP", "KP", "TH", "DL", "DDL"}  # fp32 whatever the input dtype
F32 |= {"W", "SCR", "PART", "NORM", "TB", "SA", "SC", "DN", "SEGP"}  # bias_attention's tables and sums
PTRS = {"Q", "K", "V", "E", "Out", "EO", "DO", "DEO", "DK", "DV_", "DE_", "DQ"} | F32
target = GPUTarget("cuda", 90, 32)
backend = make_backend(target)
tape = dict(D=64, DV=64, DE=128, BD=64, BDV=64, BDE=128, PREC="tf32", BM=64, BN=32)
pope = dict(D=64, DV=64, BD=64, BDV=64, PREC="ieee", BM=64, BN=32, SOFTPLUS=True, HAS_DELTA=True, FAST=True)
jobs = [(T._tape_fwd, tape, "bf16"), (T._tape_bwd_kv, tape, "bf16"), (T._tape_bwd_q, tape, "bf16"),
        (T._tape_bwd_pre, dict(DV=64, DE=128, BDV=64, BDE=128, BM=64), "bf16"),
        (P._pope_fwd, pope, "fp32"), (P._pope_bwd_kv, pope, "fp32"), (P._pope_bwd_q, pope, "fp32"),
        (P._pope_fwd, dict(pope, PREC="tf32", SOFTPLUS=False, HAS_DELTA=False), "bf16"),
        (P._pope_bwd_pre, dict(DV=64, BDV=64, BM=64), "fp32")]
bias = dict(D=64, DV=64, BD=64, BDV=64, PREC="tf32", BM=64, BN=64, HAS_PAD=True, FIRE=False, BR=128, KP=64)
jobs += [(BA._bias_fwd, bias, "bf16"), (BA._bias_bwd_kv, bias, "bf16"), (BA._bias_bwd_q, bias, "bf16"),
         (BA._bias_bwd_q, dict(bias, PREC="ieee", HAS_PAD=False), "fp32"),
         (BA._bias_bwd_pre, dict(DV=64, BDV=64, BM=64), "bf16"),
         (BA._bias_fwd, dict(bias, FIRE=True), "bf16"), (BA._bias_bwd_kv, dict(bias, FIRE=True), "bf16"),
         (BA._bias_bwd_q, dict(bias, FIRE=True), "bf16")]
for fn, consts, dt in jobs:
    consts = {k: v for k, v in consts.items() if k in fn.arg_names}
    sig = {n: "constexpr" if n in consts else "*i8" if n == "KV" else "*fp32" if n in F32 else "*" + dt if n in PTRS
           else "fp32" if "scale" in n else "i32" for n in fn.arg_names}
    src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()})
    opts = backend.parse_options(dict(num_warps=4, num_stages=2))
    stages = {}
    backend.add_stages(stages, opts, src.language)
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    mod = src.make_ir(target, opts, backend.get_codegen_implementation(opts), backend.get_module_map(), ctx)
    meta = {"hash": "test", "target": target, **opts.__dict__}
    text = str(stages["ttgir"](stages["ttir"](mod, meta), meta))
    assert "tt.call" not in text, f"{fn.__name__}: a helper was not inlined"
    assert "tt.store" in text, fn.__name__
    print(fn.__name__, "ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_every_kernel_lowers_for_sm90_without_a_gpu():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO, env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", LOWER], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    assert r.stdout.count(" ok") == 17, r.stdout
