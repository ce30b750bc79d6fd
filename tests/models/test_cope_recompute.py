"""CoPE's hand-written backward (``attn_backend='recompute'``, issue 65 item 2) against the paper's formula
written out element by element in float64 (seeds/cope.txt eqs. 3–9, p clamped to npos_max − 1): the output
and the gradients of q, k, v, the gate keys, the gate / position queries and e; causal, padded and unpadded,
GQA, several query blocks, a KV-cache history; and the model under the back-end against the default one."""

import pytest
import torch
from conftest import randomize_, tiny_model

from peeval.models import attention as attn
from peeval.models.encodings import cope as cope_mod

try:  # absent before issue 65: every test then fails on its first assertion, not at collection
    from peeval.models.encodings import cope_grad
except ImportError:
    cope_grad = None

F64 = torch.float64


def cope_attention_recompute(*args, **kw):
    assert cope_grad is not None, "peeval.models.encodings.cope_grad is missing"
    return cope_grad.cope_attention_recompute(*args, **kw)


def paper_cope(q, k, v, gk, e, npos_max, scale, allowed, q_gate, q_pos):
    """Row by row, key by key: g_ij = σ(q_gate,i·gk_j·scale) (j ≤ i), p_ij = min(Σ_{t=j..i} g_it, P − 1),
    z_i[p] = q_pos,i·e[:, p], the interpolation of z at ⌊p⌋ and ⌈p⌉, softmax(q_i·k_j·scale + z_i[p_ij]) over the
    allowed keys."""
    b, h, nq, _ = q.shape
    hk, nk = k.shape[1], k.shape[2]
    past = nk - nq
    rows = []
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hk)
            for i in range(nq):
                ia = past + i  # the query's key index
                g = [torch.sigmoid(q_gate[bi, hi, i] @ gk[bi, kh, t] * scale) for t in range(ia + 1)]
                logits = []
                for j in range(nk):
                    if j > ia or (allowed is not None and not allowed[bi % allowed.shape[0], 0, i, j]):
                        logits.append(torch.tensor(float("-inf"), dtype=F64))
                        continue
                    p = torch.clamp(sum(g[j : ia + 1]), max=npos_max - 1)
                    lo, hi_ = int(torch.floor(p)), int(torch.ceil(p))
                    z_lo, z_hi = q_pos[bi, hi, i] @ e[:, lo], q_pos[bi, hi, i] @ e[:, hi_]
                    logits.append(q[bi, hi, i] @ k[bi, kh, j] * scale + (p - lo) * z_hi + (1 - (p - lo)) * z_lo)
                prob = torch.softmax(torch.stack(logits), 0)
                rows.append(prob @ v[bi, kh])
    return torch.stack(rows).view(b, h, nq, -1)


def _inputs(b, h, hk, nq, nk, d, npos_max, seed=0):
    g = torch.Generator().manual_seed(seed)

    def r(*shape, s=1.0):
        return (torch.randn(*shape, generator=g, dtype=F64) * s).requires_grad_()

    # gate logits around ±4 so that counts spread over several integers, some beyond npos_max - 1
    return dict(
        q=r(b, h, nq, d, s=1.5), k=r(b, hk, nk, d, s=1.5), v=r(b, hk, nk, d), gk=r(b, hk, nk, d, s=1.5),
        e=r(d, npos_max), q_gate=r(b, h, nq, d, s=1.5), q_pos=r(b, h, nq, d),
    )  # fmt: skip


@pytest.mark.parametrize(("nq", "nk", "rows"), [(7, 7, 7), (7, 7, 3), (4, 9, 2)])
@pytest.mark.parametrize("npos_max", [3, 16])
@pytest.mark.parametrize("padded", [False, True])
def test_values_and_every_gradient_equal_the_papers_formula(nq, nk, rows, npos_max, padded):
    x = _inputs(2, 4, 2, nq, nk, 4, npos_max)
    mask = torch.ones(2, nk, dtype=torch.long)
    if padded:
        mask[1, :3] = 0
    allowed = attn.build_allowed(mask, nq, nk, "cpu")
    assert (allowed is not None) == (padded or nq < nk)
    scale = 0.5
    got = cope_attention_recompute(x["q"], x["k"], x["v"], x["gk"], x["e"], npos_max, scale, allowed, rows=rows,
                                   q_gate=x["q_gate"], q_pos=x["q_pos"])  # fmt: skip
    ref = paper_cope(**x, npos_max=npos_max, scale=scale, allowed=allowed)
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    names = list(x)
    grads_got = torch.autograd.grad((got * w).sum(), list(x.values()))
    grads_ref = torch.autograd.grad((ref * w).sum(), list(x.values()))
    torch.testing.assert_close(got, ref, atol=1e-12, rtol=1e-12)
    for name, a, r in zip(names, grads_got, grads_ref, strict=True):
        assert r.abs().sum() > 0, name  # every input matters here, so a zero gradient would pass for nothing
        torch.testing.assert_close(a, r, atol=1e-12, rtol=1e-12, msg=name)


def test_same_tensor_as_attention_and_gate_query_sums_both_gradients():
    """The plain gates reuse q (q_gate is q_pos is q): its gradient is the sum of all three roles."""
    x = _inputs(1, 2, 1, 6, 6, 4, 4, seed=2)
    q, k, v, e = x["q"], x["k"], x["v"], x["e"]
    got = cope_attention_recompute(q, k, v, k, e, 4, 0.5, None, rows=4)
    ref = paper_cope(q, k, v, k, e, 4, 0.5, None, q, q)
    for a, r in zip(torch.autograd.grad(got.sum(), (q, k, e)), torch.autograd.grad(ref.sum(), (q, k, e))):
        torch.testing.assert_close(a, r, atol=1e-12, rtol=1e-12)


def test_backward_keeps_only_the_inputs():
    """Nothing N×N (nor N×rows) is saved for the backward: the largest saved tensor is an input."""
    n, d, h = 64, 8, 2
    x = _inputs(1, h, h, n, n, d, 16)
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = cope_attention_recompute(x["q"], x["k"], x["v"], x["k"], x["e"], 16, d**-0.5, rows=16)
    out.sum().backward()
    assert sizes and max(sizes) <= h * n * d


OPTIONS = [{}, {"npos_max": 3}, {"sep_keys": True}, {"val_gates": True}, {"with_rope": True, "share_layers": False}]


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("padded", [False, True])
def test_model_under_recompute_equals_the_default_back_end(opts, padded, monkeypatch):
    monkeypatch.setattr(cope_mod, "BLOCK_ELEMENTS", 1)  # MIN_BLOCK_ROWS rows: several blocks
    monkeypatch.setattr(cope_mod, "MIN_BLOCK_ROWS", 5)
    x = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(0))
    mask = None
    if padded:
        mask = torch.ones_like(x)
        mask[0, :4] = 0
    from peeval.registry import ATTN_BACKENDS

    assert "recompute" in ATTN_BACKENDS
    got = []
    for backend in ("recompute", "sdpa"):
        m = tiny_model("cope", pe_options=opts, attn_backend=backend).to(F64)
        randomize_(m, std=0.5)
        out = m(x, attention_mask=mask, labels=x, use_cache=False)
        out.loss.backward()
        got.append((out.logits.detach(), {n: p.grad for n, p in m.named_parameters() if p.grad is not None}))
    (la, ga), (lr, gr) = got
    torch.testing.assert_close(la, lr, atol=1e-10, rtol=1e-10)
    assert ga.keys() == gr.keys() and "model.pe.pos_emb" in ga
    for n in ga:
        torch.testing.assert_close(ga[n], gr[n], atol=1e-10, rtol=1e-10, msg=n)


def test_plan_runs_recompute_only_when_asked_and_only_for_cope(monkeypatch):
    from peeval.models.encodings import PEContext

    calls = []
    monkeypatch.setattr(attn, "log_once", calls.append)
    q = torch.randn(1, 4, 8, 8)
    ctx = PEContext(position_ids=torch.arange(8)[None], key_position_ids=torch.arange(8)[None], past_length=0)
    cope = tiny_model("cope").model.pe
    assert "recompute" in attn.PREFERENCE and "recompute" in attn.BACKENDS
    assert attn.plan(attn.AttentionCall(cope, 0, "recompute", ctx, q)) == "recompute"
    assert attn.plan(attn.AttentionCall(cope, 0, "sdpa", ctx, q)) == "content_blocks"  # not the default
    assert all(d.cuda_train != "recompute" and d.cuda != "recompute" for d in attn.DEFAULT_BACKENDS.values())
    assert attn.plan(attn.AttentionCall(tiny_model("rope").model.pe, 0, "recompute", ctx, q)) == "sdpa"
    assert any("recompute" in line and "falling back" in line for line in calls)


def test_traces_whole_under_torch_compile():
    """``fullgraph=True`` (no graph break, q in three roles and k in two passed once each) on aot_eager: the
    compiled graph's output and gradients equal the eager ones."""
    x = _inputs(1, 2, 1, 8, 8, 4, 5, seed=3)
    q, k, v, e = x["q"], x["k"], x["v"], x["e"]

    def f(q, k, v, e):
        return cope_attention_recompute(q, k, v, k, e, 5, 0.5, None, rows=4)

    ref = f(q, k, v, e)
    got = torch.compile(f, backend="aot_eager", fullgraph=True)(q, k, v, e)
    torch.testing.assert_close(got, ref, atol=1e-12, rtol=1e-12)
    for a, r in zip(torch.autograd.grad(got.sum(), (q, k, v, e)), torch.autograd.grad(ref.sum(), (q, k, v, e))):
        torch.testing.assert_close(a, r, atol=1e-12, rtol=1e-12)


def test_position_gradient_without_scatter_in_float32_at_a_longer_row():
    """``_position_grad`` (run sums at ``searchsorted`` bounds) in float32 over 512 keys against the plain
    scatter of each dA at ⌊p⌋ and ⌈p⌉ in float64; counts from real gates, clamped and not, and p exactly integer."""
    assert cope_grad is not None, "peeval.models.encodings.cope_grad is missing"
    _position_grad = cope_grad._position_grad
    g = torch.Generator().manual_seed(4)
    r, n, npos = 6, 512, 64
    gates = torch.sigmoid(torch.randn(2, 3, r, n, generator=g) * 3).tril(n - r)  # queries are the last r keys
    gates[..., 0, n - r - 8 : n - r] = 1.0  # whole counts
    p = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=npos - 1)
    da = torch.randn(p.shape, generator=g)
    lo, hi, w = p.floor().long(), p.ceil().long(), (p - p.floor()).double()
    ref = torch.zeros(*p.shape[:-1], npos, dtype=F64)
    ref.scatter_add_(-1, lo, da.double() * (1 - w)).scatter_add_(-1, hi, da.double() * w)
    assert (p == npos - 1).any() and (p < 3).any()
    torch.testing.assert_close(_position_grad(da, p, npos).double(), ref, atol=2e-4, rtol=1e-4)


def test_backward_recomputes_under_the_forwards_autocast(monkeypatch):
    """Under bf16 autocast the forward's probabilities come from bf16 matmuls: the backward recomputes them under
    the same autocast state (the backward itself runs outside it), and its gradients stay as close to float32's as
    the default back-end's do under the same autocast."""
    assert cope_grad is not None, "peeval.models.encodings.cope_grad is missing"
    state = []
    backward = cope_grad._CoPEAttention._backward

    def spy(ctx, d_out):
        state.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return backward(ctx, d_out)

    monkeypatch.setattr(cope_grad._CoPEAttention, "_backward", staticmethod(spy))
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 48, 16, requires_grad=True) for _ in range(3))
    e = torch.randn(16, 8, requires_grad=True)

    def grads(fn, amp):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = fn(q, k, v, k.float(), e, 8, 0.25, None, rows=16)
        return [out.float(), *torch.autograd.grad(out.float().sum(), (q, k, v, e))]

    ref = grads(cope_mod.cope_attention, False)
    got, default = grads(cope_attention_recompute, True), grads(cope_mod.cope_attention, True)
    assert state == [(True, torch.bfloat16)]
    for a, b, r in zip(got, default, ref, strict=True):
        assert (a - r).norm() <= 2 * (b - r).norm() + 1e-3 * r.norm()
