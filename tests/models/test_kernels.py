"""Fused Triton kernels (peeval.kernels) against their pure-torch references.

Triton decides between compiled and interpreted kernels when ``@triton.jit`` runs, from
``TRITON_INTERPRET``. So that this never leaks into other test modules of the session, the
kernel tests run in a **subprocess** (``TRITON_INTERPRET=1``, CPU tensors): the outer
session sees one test that runs this same file with ``PEEVAL_KERNEL_TESTS_INNER=1``.

On a GPU machine run the inner tests directly on compiled kernels:
    PEEVAL_KERNEL_TESTS_INNER=1 PEEVAL_KERNEL_TESTS_DEVICE=cuda python -m pytest tests/models/test_kernels.py

Tolerances: relative Frobenius error ‖x − ref‖/‖ref‖ against a float64 reference
(same inputs upcast): fp32 1e-4, fp16 5e-3, bf16 3e-2 (bf16 operands; measured ~0.5-1.7e-2
on dq/dk, ~5e-3 on outputs).
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys

import pytest
import torch

INNER = os.environ.get("PEEVAL_KERNEL_TESTS_INNER") == "1"
DEVICE = os.environ.get("PEEVAL_KERNEL_TESTS_DEVICE", "cpu")
HAVE_TRITON = importlib.util.find_spec("triton") is not None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}


if not INNER:

    @pytest.mark.skipif(not HAVE_TRITON, reason="triton is not installed (pip install -e .[dev])")
    def test_kernels_under_triton_interpreter():
        env = dict(os.environ, TRITON_INTERPRET="1", PEEVAL_KERNEL_TESTS_INNER="1", OMP_NUM_THREADS="1")
        env.pop("PEEVAL_KERNEL_TESTS_DEVICE", None)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.abspath(__file__)]
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"inner kernel tests failed:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}"

    def test_dispatch_falls_back_to_reference_on_cpu(monkeypatch, caplog):
        """Without CUDA (and without the interpreter) the dispatchers use the references + log once."""
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        from peeval import _log
        from peeval.kernels.pope_attention import pope_attention, pope_attention_reference
        from peeval.kernels.tape_attention import tape_attention, tape_attention_reference

        monkeypatch.setattr(_log, "_said", set())
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 2, 9, 16, generator=g) for _ in range(3))
        e = torch.randn(1, 2, 9, 32, generator=g)
        with caplog.at_level("WARNING", logger="peeval"):
            out, e_out = tape_attention(q, k, v, e)
            tape_attention(q, k, v, e)
        ref, e_ref = tape_attention_reference(q, k, v, e)
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(e_out, e_ref)
        assert sum("tape_attention" in r.getMessage() for r in caplog.records) == 1
        pos = torch.arange(9)
        theta = 100.0 ** (-torch.arange(16) / 16)
        delta = -torch.rand(2, 16, generator=g)
        with caplog.at_level("WARNING", logger="peeval"):
            out = pope_attention(q, k, v, pos, pos, theta, delta)
        torch.testing.assert_close(out, pope_attention_reference(q, k, v, pos, pos, theta, delta))
        assert sum("pope_attention" in r.getMessage() for r in caplog.records) == 1

else:
    if DEVICE == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason="triton is not installed")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytestmark = pytest.mark.skip(reason="PEEVAL_KERNEL_TESTS_DEVICE=cuda but no CUDA device")

    def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
        a, ref = a.double(), ref.double()
        assert torch.isfinite(a).all()
        return ((a - ref).norm() / ref.norm().clamp_min(1e-30)).item()

    def leaf(gen, b, h, n, d, dtype):
        """A (B, N, H, d) leaf and its (B, H, N, d) view: the model's non-contiguous q/k/v layout."""
        x = torch.randn(b, n, h, d, generator=gen, dtype=torch.float32).to(dtype).to(DEVICE).requires_grad_()
        return x, x.transpose(1, 2)

    # (B, H, Hk, N, d, dv, X, dtype): N ragged w.r.t. the 16-wide interpreter blocks; GQA; d not a power of 2
    TAPE_CASES = [
        (2, 2, 2, 37, 32, 32, 64, torch.float32),
        (1, 4, 2, 50, 48, 48, 96, torch.float32),
        (1, 2, 2, 33, 64, 64, 128, torch.bfloat16),
        (1, 2, 2, 40, 32, 32, 64, torch.float16),
    ]
    if DEVICE == "cuda":
        TAPE_CASES += [
            (2, 3, 3, 1000, 64, 64, 128, torch.bfloat16),
            (1, 2, 2, 517, 128, 128, 256, torch.bfloat16),
            (1, 4, 2, 300, 96, 96, 192, torch.float16),
            (1, 2, 2, 260, 128, 128, 256, torch.float32),
        ]

    def _tape_inputs(case, seed=0):
        b, h, hk, n, d, dv, x, dtype = case
        g = torch.Generator().manual_seed(seed)
        ql, q = leaf(g, b, h, n, d, dtype)
        kl, k = leaf(g, b, hk, n, d, dtype)
        vl, v = leaf(g, b, hk, n, dv, dtype)
        el, e = leaf(g, b, h, n, x, dtype)
        # the heads share keys in GQA only through the kernel's indexing: k is per kv head
        return (ql, kl, vl, el), (q, k, v, e), g

    @pytest.mark.parametrize("case", TAPE_CASES, ids=lambda c: "-".join(map(str, c)).replace("torch.", ""))
    def test_tape_forward_backward_match_reference(case):
        from peeval.kernels.tape_attention import tape_attention, tape_attention_reference

        leaves, (q, k, v, e), g = _tape_inputs(case)
        out, e_out = tape_attention(q, k, v, e)
        go = torch.randn(out.shape, generator=g).to(DEVICE)
        geo = torch.randn(e_out.shape, generator=g).to(DEVICE)
        grads = torch.autograd.grad((out.float() * go).sum() + (e_out.float() * geo).sum(), leaves)
        ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
        rq, rk, rv, re = (t.transpose(1, 2) for t in ref_leaves)
        ro, reo = tape_attention_reference(rq, rk, rv, re)
        rgrads = torch.autograd.grad((ro * go.double()).sum() + (reo * geo.double()).sum(), ref_leaves)
        tol = TOL[case[-1]]
        assert out.dtype == v.dtype and e_out.dtype == e.dtype
        errs = {"out": rel(out, ro), "e_out": rel(e_out, reo)}
        errs.update({f"d{name}": rel(a, r) for name, a, r in zip("qkve", grads, rgrads)})
        assert max(errs.values()) < tol, errs

    def test_tape_dq_dk_include_position_stream_terms():
        """Fails if the kernel drops the e-stream share of dP (what the TAPE repository's kernel does)."""
        from peeval.kernels.tape_attention import tape_attention, tape_attention_reference

        case = (1, 2, 2, 45, 32, 32, 64, torch.float32)
        leaves, (q, k, v, e), g = _tape_inputs(case, seed=3)
        out, e_out = tape_attention(q, k, v, e)
        go = torch.randn(out.shape, generator=g).to(DEVICE)
        geo = torch.randn(e_out.shape, generator=g).to(DEVICE)
        dq, dk = torch.autograd.grad((out * go).sum() + (e_out * geo).sum(), leaves[:2])

        def ref_grads(detach_streams: bool):
            rl = [t.detach().double().requires_grad_() for t in leaves]
            rq, rk, rv, re = (t.transpose(1, 2) for t in rl)
            ro, _ = tape_attention_reference(rq, rk, rv, re)
            sq, sk = (rq.detach(), rk.detach()) if detach_streams else (rq, rk)
            _, reo = tape_attention_reference(sq, sk, rv, re)
            return torch.autograd.grad((ro * go.double()).sum() + (reo * geo.double()).sum(), rl[:2])

        full, dropped = ref_grads(False), ref_grads(True)
        for name, a, f, dr in zip("qk", (dq, dk), full, dropped):
            assert rel(a, f) < 1e-4, name
            assert rel(a, dr) > 0.05, f"d{name} lacks the position streams' contribution"

    def test_tape_causal_and_ragged_tail():
        """Changing future keys/values/streams leaves earlier outputs bit-identical; all rows written."""
        from peeval.kernels.tape_attention import tape_attention

        case = (1, 2, 2, 41, 32, 32, 64, torch.float32)
        _, (q, k, v, e), g = _tape_inputs(case, seed=5)
        with torch.no_grad():
            out, e_out = tape_attention(q, k, v, e)
            cut = 23
            k2, v2, e2 = k.clone(), v.clone(), e.clone()
            for t in (k2, v2, e2):
                t[:, :, cut:] = torch.randn(t[:, :, cut:].shape, generator=g).to(DEVICE)
            out2, e_out2 = tape_attention(q, k2, v2, e2)
        assert torch.equal(out[:, :, :cut], out2[:, :, :cut]) and torch.equal(e_out[:, :, :cut], e_out2[:, :, :cut])
        assert not torch.allclose(out[:, :, cut:], out2[:, :, cut:])
        # the first token attends to itself only; the last row (ragged tail block) is written
        torch.testing.assert_close(out[:, :, 0], v[:, :, 0])
        torch.testing.assert_close(e_out[:, :, 0], e[:, :, 0])
        assert torch.isfinite(out).all() and torch.isfinite(e_out).all()

    # (B, H, Hk, N, d, dv, dtype, softplus, delta, position offset)
    POPE_CASES = [
        (2, 2, 2, 37, 32, 32, torch.float32, True, True, 0),
        (1, 4, 2, 50, 48, 48, torch.float32, False, True, 5),
        (1, 2, 2, 40, 32, 32, torch.float32, True, False, 300),
        (1, 2, 2, 33, 64, 64, torch.bfloat16, True, True, 0),
        (1, 2, 2, 35, 32, 32, torch.float16, True, True, 0),
    ]
    if DEVICE == "cuda":
        POPE_CASES += [
            (2, 3, 3, 1000, 64, 64, torch.bfloat16, True, True, 0),
            (1, 2, 2, 517, 128, 128, torch.bfloat16, True, True, 7),
            (1, 4, 2, 300, 96, 96, torch.float16, False, True, 0),
            (1, 2, 2, 260, 128, 128, torch.float32, True, True, 0),
        ]

    def _pope_inputs(case, seed=0):
        b, h, hk, n, d, dv, dtype, softplus, has_delta, off = case
        g = torch.Generator().manual_seed(seed)
        ql, q = leaf(g, b, h, n, d, dtype)
        kl, k = leaf(g, b, hk, n, d, dtype)
        vl, v = leaf(g, b, hk, n, dv, dtype)
        theta = (500.0 ** (-torch.arange(d, dtype=torch.float32) / d)).to(DEVICE)
        leaves = [ql, kl, vl]
        delta = None
        if has_delta:
            delta = (-2 * math.pi * torch.rand(h, d, generator=g)).to(DEVICE).requires_grad_()
            leaves.append(delta)
        # per-row positions (batch rows shifted differently), as with left padding / offsets
        pos = (torch.arange(n)[None] + off + 3 * torch.arange(b)[:, None]).to(DEVICE)
        return leaves, (q, k, v, pos, theta, delta, softplus), g

    @pytest.mark.parametrize("case", POPE_CASES, ids=lambda c: "-".join(map(str, c)).replace("torch.", ""))
    def test_pope_forward_backward_match_reference(case):
        from peeval.kernels.pope_attention import pope_attention, pope_attention_reference

        leaves, (q, k, v, pos, theta, delta, softplus), g = _pope_inputs(case)
        out = pope_attention(q, k, v, pos, pos, theta, delta, softplus=softplus)
        go = torch.randn(out.shape, generator=g).to(DEVICE)
        grads = torch.autograd.grad((out.float() * go).sum(), leaves)
        rl = [t.detach().double().requires_grad_() for t in leaves]
        rq, rk, rv = (t.transpose(1, 2) for t in rl[:3])
        rdelta = rl[3] if delta is not None else None
        ro = pope_attention_reference(rq, rk, rv, pos, pos, theta, rdelta, softplus=softplus)
        rgrads = torch.autograd.grad((ro * go.double()).sum(), rl)
        errs = {"out": rel(out, ro)}
        errs.update({f"d{name}": rel(a, r) for name, a, r in zip(["q", "k", "v", "delta"], grads, rgrads)})
        assert out.dtype == v.dtype
        assert max(errs.values()) < TOL[case[6]], errs

    def test_pope_causal_and_relative():
        """Future keys do not leak; a common shift of all positions leaves the output unchanged."""
        from peeval.kernels.pope_attention import pope_attention

        case = (1, 2, 2, 41, 32, 32, torch.float32, True, True, 0)
        _, (q, k, v, pos, theta, delta, sp), g = _pope_inputs(case, seed=7)
        with torch.no_grad():
            out = pope_attention(q, k, v, pos, pos, theta, delta)
            cut = 19
            k2, v2 = k.clone(), v.clone()
            for t in (k2, v2):
                t[:, :, cut:] = torch.randn(t[:, :, cut:].shape, generator=g).to(DEVICE)
            out2 = pope_attention(q, k2, v2, pos, pos, theta, delta)
            shifted = pope_attention(q, k, v, pos + 64, pos + 64, theta, delta)
        assert torch.equal(out[:, :, :cut], out2[:, :, :cut])
        assert not torch.allclose(out[:, :, cut:], out2[:, :, cut:])
        torch.testing.assert_close(out[:, :, 0], v[:, :, 0])
        assert rel(shifted, out) < 1e-5

    @pytest.mark.parametrize("pe", ["tape", "pope"])
    def test_model_trains_with_triton_backend_like_sdpa(pe):
        """The model's ``triton`` back-end (fused kernels) follows the same loss curve as sdpa."""
        from peeval.models import PeevalConfig, PeevalForCausalLM

        cfg = dict(vocab_size=61, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=64, rope_theta=100.0, pe=pe)  # fmt: skip
        if pe == "pope":
            cfg["pe_options"] = {"delta_init": "uniform"}
        losses = {}
        for backend in ("sdpa", "triton"):
            torch.manual_seed(0)
            m = PeevalForCausalLM(PeevalConfig(**cfg, attn_backend=backend)).to(DEVICE)
            if pe == "tape":  # leave TAPE's zero init so the position streams matter from step 0
                with torch.no_grad():
                    m.model.pe.w_a.normal_(0, 0.1)
                    m.model.pe.w1.normal_(0, 0.1)
            opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
            g = torch.Generator().manual_seed(1)
            x = torch.randint(0, 61, (2, 37), generator=g).to(DEVICE)
            losses[backend] = []
            for _ in range(3):
                loss = m(x, labels=x).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses[backend].append(loss.item())
        torch.testing.assert_close(losses["triton"], losses["sdpa"], atol=2e-4, rtol=2e-4)
        assert losses["sdpa"][-1] < losses["sdpa"][0]
