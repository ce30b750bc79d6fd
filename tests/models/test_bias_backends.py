"""The fast back-ends of the position-only biases (alibi, t5, kerple, fire) against the N×N reference.

Blocked sdpa and FlexAttention must give the reference's values and every gradient (q, k,
v, the encoding's parameters) in float64, with padding and with a KV cache; FIRE's
piecewise-linear form must equal its MLP; the back-end choice lives in ``attention.plan``.
"""

import math

import pytest
import torch
from conftest import decode_logits, tiny_model

import peeval.models.attention as attn
import peeval.models.attention_ops as ops
from peeval.models.encodings.base import PEContext

BIAS_PES = [
    ("alibi", {}),
    ("t5", {"num_buckets": 8, "max_distance": 16}),
    ("kerple", {"variant": "log"}),
    ("kerple", {"variant": "power"}),
    ("fire", {"init_L": 8}),  # L < N: the normaliser varies along the rows
]
IDS = [pe + "-" + "-".join(map(str, o.values())) for pe, o in BIAS_PES]


def model64(pe, opts, **kw):
    torch.manual_seed(0)
    m = tiny_model(pe, pe_options=opts, **kw).double()
    with torch.no_grad():  # move the parameters off their init values: every gradient matters
        for p in m.model.pe.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 7 query rows, so that a 30-token test crosses several block edges."""
    monkeypatch.setattr(ops, "MIN_BLOCK_ROWS", 7)
    monkeypatch.setattr(ops, "BLOCK_ELEMENTS", 1)


def run(m, backend, x, mask=None):
    m.config.attn_backend = backend
    m.zero_grad(set_to_none=True)
    out = m(x, attention_mask=mask, labels=x, use_cache=False)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
    return out.logits.detach(), grads


def assert_same(a, b, tol=1e-12):
    torch.testing.assert_close(a[0], b[0], rtol=tol, atol=tol)
    assert set(a[1]) == set(b[1])
    for name in a[1]:
        torch.testing.assert_close(a[1][name], b[1][name], rtol=tol, atol=tol, msg=name)


@pytest.mark.parametrize("pe,opts", BIAS_PES, ids=IDS)
def test_blocked_model_equals_reference_values_and_gradients(pe, opts, small_blocks):
    m = model64(pe, opts)
    x = torch.randint(0, 61, (2, 30))
    ref = run(m, "eager", x)
    assert any(n.startswith("model.pe.") for n in ref[1]) or pe == "alibi"
    assert_same(run(m, "blocked", x), ref)
    assert_same(run(m, "sdpa", x), ref)  # the default picks blocked on the CPU


@pytest.mark.parametrize("pe,opts", BIAS_PES, ids=IDS)
def test_blocked_with_left_padding(pe, opts, small_blocks):
    m = model64(pe, opts)
    x = torch.randint(0, 61, (2, 30))
    mask = torch.ones_like(x)
    mask[1, :9] = 0
    assert_same(run(m, "blocked", x, mask), run(m, "eager", x, mask))


@pytest.mark.parametrize("pe,opts", BIAS_PES, ids=IDS)
def test_blocked_kv_cache_decode(pe, opts, small_blocks):
    """Prefill 20 tokens, then one token at a time: the logits of the reference, step by step."""
    m = model64(pe, opts).eval()
    x = torch.randint(0, 61, (2, 26))
    outs = {}
    for backend in ("eager", "blocked"):
        m.config.attn_backend = backend
        outs[backend] = decode_logits(m, x, 20, 26)
    torch.testing.assert_close(outs["blocked"], outs["eager"], rtol=1e-12, atol=1e-12)
    m.config.attn_backend = "eager"
    with torch.no_grad():
        whole = m(x, use_cache=False).logits
    torch.testing.assert_close(outs["blocked"], whole, rtol=1e-10, atol=1e-10)


def ctx_for(b, nq, nk, start=0):
    kpos = torch.arange(start, start + nk)[None].expand(b, nk)
    return PEContext(position_ids=kpos[:, nk - nq :], key_position_ids=kpos, past_length=nk - nq)


@pytest.mark.parametrize("pe,opts", BIAS_PES, ids=IDS)
@pytest.mark.parametrize("nq,nk,padded", [(13, 13, False), (13, 13, True), (5, 13, False)])
@pytest.mark.parametrize("kernels", ["cpu", "explicit"])
def test_blocked_function_gradients_of_q_k_v_and_parameters(pe, opts, nq, nk, padded, kernels, monkeypatch):
    """The autograd Function itself, GQA (4 query, 2 KV heads), blocks of 4 rows, cache offset;
    with the CPU flash kernels and with the explicit path that other devices take."""
    if kernels == "explicit":
        monkeypatch.setattr(ops, "_cpu_kernels", lambda t: False)
    m = model64(pe, opts)
    enc = m.model.pe
    torch.manual_seed(1)
    q = torch.randn(2, 4, nq, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, nk, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, nk, 8, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(2, nk, dtype=torch.long)
    if padded:
        mask[0, :4] = 0
    allowed = attn.build_allowed(mask, nq, nk, q.device)
    ctx = ctx_for(2, nq, nk, start=3)
    g = torch.randn(2, 4, nq, 8, dtype=torch.float64)
    params = [p for p in enc.parameters()]
    ins = [q, k, v, *params]

    ref = attn.eager_attention(q, k, v, bias=enc.reference_bias(1, ctx), allowed=allowed, scale=0.3)[0]
    ref_grads = torch.autograd.grad(ref, ins, g, allow_unused=True)
    ctx = ctx_for(2, nq, nk, start=3)
    out = attn.blocked_bias_attention(q, k, v, enc.bias(1, ctx), allowed=allowed, scale=0.3, rows=4)
    grads = torch.autograd.grad(out, ins, g, allow_unused=True)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    for name, a, b in zip(["q", "k", "v", *[n for n, _ in enc.named_parameters()]], grads, ref_grads):
        if b is None:
            assert a is None or not a.any(), name
        else:
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=name)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("pe,opts", BIAS_PES, ids=IDS)
def test_flex_score_mod_equals_reference(pe, opts):
    """FlexAttention with the encoding's score_mod (eager flex: same semantics as compiled, CPU, no grad)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    enc = model64(pe, opts).model.pe
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 24, 8, dtype=torch.float64) for _ in range(3))
    ctx = ctx_for(2, 24, 24, start=5)
    with torch.no_grad():
        ref = attn.eager_attention(q, k, v, bias=enc.reference_bias(0, ctx), scale=0.3)[0]
        bm = create_block_mask(attn.causal_mod, None, None, 24, 24, device="cpu")
        out = flex_attention(q, k, v, score_mod=enc.bias(0, ctx).score_mod(), block_mask=bm, scale=0.3)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_flex_compiled_model_forward_on_cpu():
    """attn_backend='flex' without autograd: the compiled CPU kernel, through the model (~1 min
    compile); new score_mod closures (every layer, every forward) reuse the compiled graph."""
    from torch._dynamo.utils import counters

    m = model64("kerple", {}).float().eval()
    x = torch.randint(0, 61, (1, 128))
    with torch.no_grad():
        m.config.attn_backend = "eager"
        ref = m(x, use_cache=False).logits
        m.config.attn_backend = "flex"
        out = m(x, use_cache=False).logits
        graphs = counters["stats"]["unique_graphs"]
        again = m(x, use_cache=False).logits
        assert counters["stats"]["unique_graphs"] == graphs
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(again, out)


# -- FIRE: the piecewise-linear form of its MLP ---------------------------------------------


def fire_reference_and_fast(dtype, n=64, hidden=32, seed=0):
    torch.manual_seed(seed)
    m = tiny_model("fire", pe_options={"init_L": 16, "hidden": hidden}).to(dtype)
    enc = m.model.pe
    with torch.no_grad():
        enc.c.add_(0.05 * torch.randn_like(enc.c))
        enc.L_mult.add_(0.2 * torch.randn_like(enc.L_mult))
    ctx = ctx_for(1, n, n, start=0)
    ref = enc.reference_bias(1, ctx)
    fast = enc.bias(1, ctx).block(slice(0, n), slice(0, n))
    return enc, ref, fast


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-13), (torch.float32, 2e-6)])
def test_fire_pieces_equal_the_mlp_values_and_gradients(dtype, tol):
    enc, ref, fast = fire_reference_and_fast(dtype)
    causal = torch.ones(64, 64).tril().bool()
    scale = ref.abs().max().item()
    torch.testing.assert_close(fast[..., causal], ref[..., causal], rtol=0, atol=tol * scale)
    g = torch.randn_like(ref) * causal
    params = list(enc.parameters())
    for name, a, b in zip(
        [n for n, _ in enc.named_parameters()],
        torch.autograd.grad(fast, params, g, allow_unused=True),
        torch.autograd.grad(ref, params, g, allow_unused=True),
    ):
        bound = tol * max(1.0, b.abs().max().item()) * 64  # a sum of 64² terms in float32
        torch.testing.assert_close(a, b, rtol=0, atol=bound, msg=name)


def test_fire_pieces_by_hand():
    """Two units: f(x) = 2·relu(x − 0.5) − relu(−x + 0.25) + 0.1, breakpoints 0.25, 0.5."""
    enc = tiny_model("fire", pe_options={"hidden": 2}, num_attention_heads=1, num_key_value_heads=1).model.pe
    enc.double()
    with torch.no_grad():
        enc.w1[0] = torch.tensor([1.0, -1.0])
        enc.b1[0] = torch.tensor([-0.5, 0.25])
        enc.w2[0] = torch.tensor([[2.0], [-1.0]])
        enc.b2[0] = torch.tensor([0.1])
    t, a, c = enc.pieces(0)
    assert t.tolist() == [0.25, 0.5]
    # x <= 0.25: -(-x + 0.25) + 0.1 = x - 0.15; 0.25 < x <= 0.5: 0.1; x > 0.5: 2x - 1 + 0.1
    assert a[:, 0].tolist() == [1.0, 0.0, 2.0]
    assert c[:, 0].tolist() == pytest.approx([-0.15, 0.1, -0.9])


def test_fire_zero_input_weight_is_a_constant_unit():
    enc = tiny_model("fire", pe_options={"hidden": 2}, num_attention_heads=1, num_key_value_heads=1).model.pe
    enc.double()
    with torch.no_grad():
        enc.w1[0] = torch.tensor([0.0, 1.0])
        enc.b1[0] = torch.tensor([0.7, -0.5])
        enc.w2[0] = torch.tensor([[3.0], [1.0]])
        enc.b2[0] = torch.tensor([0.0])
    x = torch.tensor([0.0, 0.3, 0.6, 0.9], dtype=torch.float64)
    t, a, c = enc.pieces(0)
    seg = torch.bucketize(x, t)
    torch.testing.assert_close(a[seg, 0] * x + c[seg, 0], enc.mlp(0, x)[:, 0])
    assert math.isinf(t[-1].item())


# -- memory and the back-end choice ------------------------------------------------------------


def test_blocked_training_saves_nothing_quadratic(monkeypatch):
    """What autograd keeps from the forward for the blocked attention is O(N): no N×N bias or
    probabilities (the backward rebuilds one block at a time)."""
    monkeypatch.setattr(ops, "BLOCK_ELEMENTS", 4 * 32 * 256)  # blocks of 32 rows
    m = model64("kerple", {}).float()
    n = 256
    x = torch.randint(0, 61, (1, n))

    def largest_saved(backend):
        m.config.attn_backend = backend
        sizes = []

        def pack(t):
            sizes.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = m(x, labels=x, use_cache=False).loss
        loss.backward()
        return max(sizes)

    assert largest_saved("blocked") < n * n  # the largest: logits (N × vocab), MLP activations
    assert largest_saved("eager") >= 4 * n * n  # the reference holds the scores (the check can fail)


def plan(request, pe, q, ctx, mask, output_attentions=False):
    return attn.plan(attn.AttentionCall(pe, 0, request, ctx, q, mask, output_attentions))


def test_plan_is_the_one_decision():
    import inspect

    import peeval.models.modeling_peeval as modeling

    src = inspect.getsource(modeling)
    assert "alibi" not in src and "attn_backend ==" not in src and "backend ==" not in src

    m = tiny_model("t5")
    pe, ctx = m.model.pe, ctx_for(1, 8, 8)
    q = torch.zeros(1, 4, 8, 8, requires_grad=True)
    assert plan("sdpa", pe, q, ctx, None) == "blocked"
    assert plan("eager", pe, q, ctx, None) == "eager"
    assert plan("sdpa", pe, q, ctx, None, output_attentions=True) == "eager"
    assert plan("flex", pe, q, ctx, None) == "blocked"  # no FlexAttention backward on the CPU
    with torch.no_grad():
        assert plan("flex", pe, q, ctx_for(1, 8, 8), None) == "flex"
        assert plan("flex", pe, q, ctx_for(1, 1, 8), None) == "blocked"  # cache history
        padded = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1]])
        assert plan("flex", pe, q, ctx_for(1, 8, 8), padded) == "blocked"
    rope = tiny_model("rope").model.pe
    assert plan("blocked", rope, q, ctx, None) == "sdpa"
    assert plan("flash", tiny_model("alibi").model.pe, q, ctx, None) != "flash"  # no flash-attn on the CPU
    assert plan("sdpa", tiny_model("cope").model.pe, q, ctx, None) == "content_blocks"


def test_every_back_end_has_one_signature():
    """Each back-end is (can run, run), both of one ``AttentionCall``; every request names a list
    of them that ends in one that always runs."""
    import inspect

    for name, b in attn.BACKENDS.items():
        for fn in (b.can_run, b.run):
            assert len(inspect.signature(fn).parameters) == 1, name
    for request, order in attn.PREFERENCE.items():
        assert set(order) <= set(attn.BACKENDS) and order[-1] in ("sdpa", "eager"), request
    assert set(attn.PREFERENCE) == set(modeling_backends())


def modeling_backends():
    from peeval.models.configuration_peeval import ATTN_BACKENDS

    return ATTN_BACKENDS


def test_alibi_offers_flash_slopes_others_do_not():
    ctx = ctx_for(1, 4, 4)
    assert tiny_model("alibi").model.pe.bias(0, ctx).alibi_slopes.tolist() == [0.25, 0.0625, 2**-6, 2**-8]
    for pe in ("t5", "kerple", "fire"):
        assert tiny_model(pe).model.pe.bias(0, ctx).alibi_slopes is None
    for pe in ("rope", "nope"):
        assert tiny_model(pe).model.pe.bias(0, ctx) is None


def test_flash_plan_runs_only_biases_flash_can_express(monkeypatch):
    """A 'flash' request: ALiBi passes its slopes, a bias-free encoding none, any other bias goes
    elsewhere, and so does ALiBi on remapped (randpe) positions."""
    calls = []

    def fake_flash(q, k, v, *, alibi_slopes=None, scale=None):
        calls.append(alibi_slopes)
        return attn.sdpa_attention(q, k, v, scale=scale)

    monkeypatch.setattr(attn, "flash_attention", fake_flash)
    monkeypatch.setattr(attn, "flash_available", lambda t: True)
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 4, 6, 8, dtype=torch.bfloat16) for _ in range(3))

    def run(pe):
        call = attn.AttentionCall(pe, 0, "flash", ctx_for(1, 6, 6), q)
        how = attn.plan(call)
        call.k, call.v = k, v
        return how, attn.attend(how, call)[0]

    assert run(tiny_model("alibi").model.pe)[0] == "flash"
    assert calls[-1].tolist() == [0.25, 0.0625, 2**-6, 2**-8]
    assert run(tiny_model("rope").model.pe)[0] == "flash"
    assert calls[-1] is None and len(calls) == 2
    assert run(tiny_model("t5").model.pe)[0] == "blocked"
    randpe = tiny_model("randpe", pe_options={"base": "alibi", "max_positions": 64}).model.pe
    base, ctx = randpe.remap(ctx_for(1, 6, 6))
    call = attn.AttentionCall(base, 0, "flash", ctx, q)
    assert attn.plan(call) == "blocked"  # flash-attn's ALiBi would read indices, not randpe's positions
    assert len(calls) == 2
