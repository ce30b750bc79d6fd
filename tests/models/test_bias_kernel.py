"""The fused distance-bias kernel (peeval.kernels.bias_attention) against float64 references.

Like tests/models/test_kernels.py the kernel runs in a subprocess under ``TRITON_INTERPRET=1``
(CPU tensors); on a GPU machine run the inner tests on compiled kernels:
    PEEVAL_KERNEL_TESTS_INNER=1 PEEVAL_KERNEL_TESTS_DEVICE=cuda python -m pytest tests/models/test_bias_kernel.py

Every gradient is checked: q, k, v and the bias's parameters (a free per-distance vector; t5's
bucket embedding; kerple's r1, r2; alibi's output with fixed slopes), padded and unpadded,
lengths that are not multiples of the 16-wide interpreter blocks, GQA.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

INNER = os.environ.get("PEEVAL_KERNEL_TESTS_INNER") == "1"
DEVICE = os.environ.get("PEEVAL_KERNEL_TESTS_DEVICE", "cpu")
HAVE_TRITON = importlib.util.find_spec("triton") is not None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if not INNER:

    @pytest.mark.skipif(not HAVE_TRITON, reason="triton is not installed (pip install -e .[dev])")
    def test_bias_kernel_under_triton_interpreter():
        env = dict(os.environ, TRITON_INTERPRET="1", PEEVAL_KERNEL_TESTS_INNER="1", OMP_NUM_THREADS="1")
        env.pop("PEEVAL_KERNEL_TESTS_DEVICE", None)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.abspath(__file__)]
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"inner bias-kernel tests failed:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}"

else:
    if DEVICE == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason="triton is not installed")
    TOL = 1e-4  # fp32 against float64, relative Frobenius

    def rel(a, ref):
        a, ref = a.double(), ref.double()
        assert torch.isfinite(a).all()
        return ((a - ref).norm() / ref.norm().clamp_min(1e-30)).item()

    def param_err(a, ref):
        """rel, except for a gradient that is exactly zero in exact arithmetic (FIRE's b1 when every unit
        is active over the range of x: a per-row constant, which the softmax ignores): the float64 one
        is round-off (< 1e-12), and the kernel's must be round-off too (< 1e-6 absolute)."""
        if ref.double().norm() < 1e-12:
            return a.double().norm().item() * 1e2  # 1e-6 absolute maps to TOL
        return rel(a, ref)

    def leaf(g, b, h, n, d):
        """A (B, N, H, d) leaf and its (B, H, N, d) view (the model's non-contiguous layout)."""
        x = torch.randn(b, n, h, d, generator=g).to(DEVICE).requires_grad_()
        return x, x.transpose(1, 2)

    def key_valid(b, n, g):
        """Left padding in row 0 (5 pads), right padding in row 1 (7 pads), the rest whole."""
        m = torch.ones(b, n, dtype=torch.bool)
        m[0, :5] = False
        if b > 1:
            m[1, n - 7 :] = False
        return m.to(DEVICE)

    def check(case, table_fn, params, padded, seed=0):
        """Loss sum(out·go) through the kernel vs the float64 reference: out and the gradients of
        q, k, v and ``params`` (the leaves ``table_fn`` builds the (H, N) vector from)."""
        from peeval.kernels.bias_attention import bias_attention, bias_attention_reference

        b, h, hk, n, d = case
        g = torch.Generator().manual_seed(seed)
        (ql, q), (kl, k), (vl, v) = leaf(g, b, h, n, d), leaf(g, b, hk, n, d), leaf(g, b, hk, n, d)
        kv = key_valid(b, n, g) if padded else None
        out = bias_attention(q, k, v, table_fn(params, torch.float32), kv)
        go = torch.randn(out.shape, generator=g).to(DEVICE)
        leaves = [ql, kl, vl, *params]
        grads = torch.autograd.grad((out * go).sum(), leaves)
        r = [t.detach().double().requires_grad_() for t in leaves]
        rq, rk, rv = (t.transpose(1, 2) for t in r[:3])
        ro = bias_attention_reference(rq, rk, rv, table_fn(r[3:], torch.float64), kv)
        rgrads = torch.autograd.grad((ro * go.double()).sum(), r)
        names = ["dq", "dk", "dv"] + [f"dparam{i}" for i in range(len(params))]
        errs = {"out": rel(out, ro), **{nm: rel(a, x) for nm, a, x in zip(names, grads, rgrads)}}
        assert max(errs.values()) < TOL, errs
        return errs

    # (B, H, Hk, N, d): N ragged w.r.t. the 16-wide blocks, one shorter than a block, GQA, d not 2^k
    CASES = [(2, 2, 2, 37, 32), (2, 4, 2, 50, 48), (1, 2, 1, 13, 16)]
    IDS = ["-".join(map(str, c)) for c in CASES]

    @pytest.mark.parametrize("padded", [False, True], ids=["whole", "padded"])
    @pytest.mark.parametrize("case", CASES, ids=IDS)
    def test_free_distance_vector(case, padded):
        g = torch.Generator().manual_seed(1)
        w = torch.randn(case[1], case[3], generator=g).to(DEVICE).requires_grad_()
        check(case, lambda p, dt: p[0].to(dt), [w], padded)

    @pytest.mark.parametrize("padded", [False, True], ids=["whole", "padded"])
    def test_t5_bucket_embedding(padded):
        """t5: the (buckets, H) embedding gathered to a per-distance vector outside the kernel;
        its gradient scatters back through the gather (torch)."""
        from peeval.models.encodings.t5 import causal_buckets

        case = (2, 4, 4, 45, 32)
        g = torch.Generator().manual_seed(2)
        emb = torch.randn(8, case[1], generator=g).to(DEVICE).requires_grad_()
        buckets = causal_buckets(torch.arange(case[3], device=DEVICE), 8, 16)
        check(case, lambda p, dt: p[0].to(dt)[buckets].t(), [emb], padded)

    @pytest.mark.parametrize("variant", ["log", "power"])
    def test_kerple_parameters(variant):
        case = (2, 2, 2, 40, 32)
        g = torch.Generator().manual_seed(3)
        r1 = (torch.rand(case[1], generator=g) + 0.5).to(DEVICE).requires_grad_()
        r2 = (torch.rand(case[1], generator=g) + 0.5).to(DEVICE).requires_grad_()

        def table(p, dt):
            a, c = (x.to(dt)[:, None] for x in p)
            dist = torch.arange(case[3], device=DEVICE, dtype=dt)
            return -a * torch.log1p(c * dist) if variant == "log" else -a * dist.pow(c)

        check(case, table, [r1, r2], padded=True)

    def test_alibi_fixed_slopes():
        from peeval.models.encodings.alibi import alibi_slopes

        case = (1, 4, 4, 33, 32)
        slopes = alibi_slopes(case[1]).to(DEVICE)
        dist = torch.arange(case[3], device=DEVICE)
        check(case, lambda p, dt: -slopes.to(dt)[:, None] * dist.to(dt), [], padded=False)

    def test_bias_gradient_is_not_the_bias_free_one():
        """The test can fail: a kernel that dropped w from the scores would differ from the reference
        by far more than the tolerance (here: the reference with w, the kernel with w = 0)."""
        from peeval.kernels.bias_attention import bias_attention, bias_attention_reference

        g = torch.Generator().manual_seed(4)
        q, k, v = (torch.randn(1, 2, 20, 16, generator=g).to(DEVICE) for _ in range(3))
        w = torch.randn(2, 20, generator=g).to(DEVICE)
        with_w = bias_attention_reference(q.double(), k.double(), v.double(), w.double())
        assert rel(bias_attention(q, k, v, w), with_w) < TOL
        assert rel(bias_attention(q, k, v, torch.zeros_like(w)), with_w) > 100 * TOL

    @pytest.mark.parametrize(
        "pe,opts",
        [("alibi", {}), ("t5", {"num_buckets": 8, "max_distance": 16}), ("kerple", {"variant": "power"}),
         ("fire", {"init_L": 8, "hidden": 6})],
    )  # fmt: skip
    def test_model_triton_backend_matches_float64_eager(pe, opts, monkeypatch):
        """``attn_backend="triton"`` runs the fused kernel in every layer (GQA: 4 query, 2 kv heads) and
        gives the float64 eager model's loss and every parameter's gradient (the encoding's included)."""
        import peeval.kernels.bias_attention as ba
        from peeval.models import PeevalConfig, PeevalForCausalLM

        calls = []
        name = "fire_attention" if pe == "fire" else "bias_attention"
        real = getattr(ba, name)
        monkeypatch.setattr(ba, name, lambda *a, **kw: calls.append(1) or real(*a, **kw))
        cfg = dict(vocab_size=61, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4)
        cfg.update(num_key_value_heads=2, max_position_embeddings=64, rope_theta=100.0, pe=pe, pe_options=opts)
        torch.manual_seed(0)
        m = PeevalForCausalLM(PeevalConfig(**cfg, attn_backend="triton")).to(DEVICE)
        with torch.no_grad():  # off their init values: every gradient matters
            for p in m.model.pe.parameters():
                p.add_(0.3 * torch.randn_like(p)).abs_()
        ref = PeevalForCausalLM(PeevalConfig(**cfg, attn_backend="eager")).double().to(DEVICE)
        ref.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
        x = torch.randint(0, 61, (2, 37), generator=torch.Generator().manual_seed(1)).to(DEVICE)
        out, rout = m(x, labels=x), ref(x, labels=x)
        out.loss.backward()
        rout.loss.backward()
        assert len(calls) == cfg["num_hidden_layers"]
        assert abs(out.loss.item() - rout.loss.item()) < 1e-5
        grads = {n: p.grad for n, p in m.named_parameters() if p.grad is not None}
        rgrads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
        assert set(grads) == set(rgrads)
        errs = {n: param_err(grads[n], rgrads[n]) for n in grads}
        assert max(errs.values()) < TOL, errs
        assert any(n.startswith("model.pe.") for n in grads) or pe == "alibi"

    @pytest.mark.parametrize(
        "pe,opts", [("t5", {"num_buckets": 8, "max_distance": 16}), ("kerple", {}), ("fire", {"init_L": 8})]
    )
    def test_model_triton_backend_padded_matches_float64_eager(pe, opts, monkeypatch):
        """Left padding (row 0) and right padding (row 1): the kernel masks the padded keys; the loss
        over the real tokens and every gradient equal the float64 eager model's."""
        import peeval.kernels.bias_attention as ba
        from peeval.models import PeevalConfig, PeevalForCausalLM

        seen = []
        name, at = ("fire_attention", 8) if pe == "fire" else ("bias_attention", 4)  # key_valid's argument
        real = getattr(ba, name)
        monkeypatch.setattr(ba, name, lambda *a, **kw: seen.append(a[at] is not None) or real(*a, **kw))
        cfg = dict(vocab_size=61, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4)
        cfg.update(num_key_value_heads=2, max_position_embeddings=64, rope_theta=100.0, pe=pe, pe_options=opts)
        torch.manual_seed(0)
        m = PeevalForCausalLM(PeevalConfig(**cfg, attn_backend="triton")).to(DEVICE)
        with torch.no_grad():
            for p in m.model.pe.parameters():
                p.add_(0.3 * torch.randn_like(p)).abs_()
        ref = PeevalForCausalLM(PeevalConfig(**cfg, attn_backend="eager")).double().to(DEVICE)
        ref.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
        x = torch.randint(0, 61, (2, 35), generator=torch.Generator().manual_seed(1)).to(DEVICE)
        mask = torch.ones_like(x)
        mask[0, :6] = 0
        mask[1, 28:] = 0
        labels = x.masked_fill(mask == 0, -100)
        out, rout = m(x, attention_mask=mask, labels=labels), ref(x, attention_mask=mask, labels=labels)
        out.loss.backward()
        rout.loss.backward()
        assert seen == [True] * cfg["num_hidden_layers"]
        assert abs(out.loss.item() - rout.loss.item()) < 1e-5
        grads = {n: p.grad for n, p in m.named_parameters() if p.grad is not None}
        rgrads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
        assert set(grads) == set(rgrads)
        errs = {n: param_err(grads[n], rgrads[n]) for n in grads}
        assert max(errs.values()) < TOL, errs

    def _fire_inputs(b, h, n, nt, seed):
        g = torch.Generator().manual_seed(seed)
        psi = torch.log1p(0.3 * torch.arange(n + 3, dtype=torch.float32))  # ψ(d), more entries than N
        norm = torch.log1p(0.3 * torch.arange(n, dtype=torch.float32).clamp(min=9.0)).repeat(b, 1) + 1e-6
        x_max = (psi[:n] / norm[0]).max().item()
        t = (torch.rand(nt, generator=g) * x_max * 1.1).sort().values  # breakpoints inside the range of x
        slopes, icpt = (torch.randn(nt + 1, h, generator=g) for _ in range(2))
        return [p.to(DEVICE).requires_grad_() for p in (psi, norm, slopes, icpt)], t.to(DEVICE)

    @pytest.mark.parametrize("padded", [False, True], ids=["whole", "padded"])
    @pytest.mark.parametrize("case", [(2, 2, 2, 37, 32), (2, 4, 2, 50, 16)], ids=["37", "50-gqa"])
    def test_fire_piecewise_linear(case, padded):
        """FIRE: dq, dk, dv and the gradients of ψ (diagonal sums), the row normaliser, the slopes and the
        intercepts (per-segment sums) against the float64 dense bias; 5 segments crossed inside each row."""
        from peeval.kernels.bias_attention import bias_attention_reference, fire_attention, fire_dense_bias

        b, h, hk, n, d = case
        params, t = _fire_inputs(b, h, n, 5, seed=5)
        g = torch.Generator().manual_seed(6)
        (ql, q), (kl, k), (vl, v) = leaf(g, b, h, n, d), leaf(g, b, hk, n, d), leaf(g, b, hk, n, d)
        kv = key_valid(b, n, g) if padded else None
        psi, norm, slopes, icpt = params
        out = fire_attention(q, k, v, psi, norm, t, slopes, icpt, kv)
        go = torch.randn(out.shape, generator=g).to(DEVICE)
        leaves = [ql, kl, vl, *params]
        grads = torch.autograd.grad((out * go).sum(), leaves)
        r = [x.detach().double().requires_grad_() for x in leaves]
        rq, rk, rv = (x.transpose(1, 2) for x in r[:3])
        rb = fire_dense_bias(r[3], r[4], t.double(), r[5], r[6])
        ro = bias_attention_reference(rq, rk, rv, rb, kv)
        rgrads = torch.autograd.grad((ro * go.double()).sum(), r)
        names = ["dq", "dk", "dv", "dpsi", "dnorm", "dslopes", "dicpt"]
        errs = {"out": rel(out, ro), **{nm: rel(a, x) for nm, a, x in zip(names, grads, rgrads)}}
        assert max(errs.values()) < TOL, errs
