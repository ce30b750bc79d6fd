"""CoPE in query blocks (issue 17 item 2) against the full N×N reference (``CoPE.reference_bias`` +
attention): values and every gradient in float64, over several blocks, GQA, a KV cache,
left padding and every option; and no N×N tensor is kept for the backward."""

import dataclasses
import functools

import pytest
import torch
from conftest import decode_logits, randomize_, tiny_config, tiny_model

from peeval.models import attention as attn
from peeval.models.encodings import PEContext, build_encoding
from peeval.models.encodings import cope as cope_mod
from peeval.models.encodings.cope import cope_attention

F64 = torch.float64


def _reference(pe, q, k, v, allowed, layer=0):
    nq, nk = q.shape[2], k.shape[2]
    pos = torch.arange(nk - nq, nk)[None].expand(q.shape[0], nq)
    ctx = PEContext(position_ids=pos, key_position_ids=torch.arange(nk)[None].expand(q.shape[0], nk), past_length=0)
    ctx.values = v
    bias = pe.reference_bias(layer, q, k, ctx)
    return attn.sdpa_attention(q, k, v, bias=bias, allowed=allowed, scale=pe.scale())


@pytest.mark.parametrize("npos_max", [64, 3])
@pytest.mark.parametrize(("nq", "nk", "rows"), [(11, 11, 4), (11, 11, 11), (5, 13, 2), (1, 9, 1)])
@pytest.mark.parametrize("padded", [False, True])
def test_blocks_equal_reference_values_and_gradients(npos_max, nq, nk, rows, padded):
    cfg = tiny_config("cope", num_attention_heads=4, num_key_value_heads=2, pe_options={"npos_max": npos_max})
    pe = build_encoding(cfg).to(F64)
    g = torch.Generator().manual_seed(0)
    b, h, hk, d = 2, 4, 2, pe.head_dim
    q = (torch.randn(b, h, nq, d, generator=g, dtype=F64) * 2).requires_grad_()
    k = (torch.randn(b, hk, nk, d, generator=g, dtype=F64) * 2).requires_grad_()
    v = torch.randn(b, hk, nk, d, generator=g, dtype=F64).requires_grad_()
    with torch.no_grad():
        pe.pos_emb.normal_(generator=g)
    mask = torch.ones(b, nk, dtype=torch.long)
    if padded:
        mask[1, :3] = 0
    allowed = attn.build_allowed(mask, nq, nk, q.device)
    grads = []
    for fn in (
        # the same gate keys as the reference (``gate_keys`` rounds them to float32)
        lambda: cope_attention(
            q, k, v, pe.gate_keys(0, k, None), pe.pos_emb[0], npos_max, pe.scale(), allowed, rows=rows
        ),
        lambda: _reference(pe, q, k, v, allowed),
    ):
        out = fn()
        w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
        gq, gk, gv, ge = torch.autograd.grad((out * w).sum(), (q, k, v, pe.pos_emb))
        grads.append((out, gq, gk, gv, ge))
    for name, a, r in zip(("out", "q", "k", "v", "pos_emb"), *grads):
        torch.testing.assert_close(a, r, atol=1e-11, rtol=1e-11, msg=name)
    assert grads[1][4].abs().sum() > 0


OPTIONS = [
    {},
    {"npos_max": 3},
    {"sep_keys": True},
    {"val_gates": True},
    {"with_rope": True, "share_layers": False},
]


def _model(opts):
    m = tiny_model("cope", pe_options=opts).to(F64)
    randomize_(m, std=0.5)
    return m


def _logits_and_grads(m, x, mask=None):
    m.zero_grad(set_to_none=True)
    out = m(x, attention_mask=mask, labels=x, use_cache=False)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("padded", [False, True])
def test_model_blocked_equals_reference_every_gradient(opts, padded, monkeypatch):
    monkeypatch.setattr(cope_mod, "BLOCK_ELEMENTS", 1)  # MIN_BLOCK_ROWS rows: several blocks
    monkeypatch.setattr(cope_mod, "MIN_BLOCK_ROWS", 5)
    m = _model(opts)
    x = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(0))
    mask = None
    if padded:
        mask = torch.ones_like(x)
        mask[0, :4] = 0
    a, ga = _logits_and_grads(m, x, mask)
    full_bias_into_sdpa(m.model.pe)
    r, gr = _logits_and_grads(m, x, mask)
    torch.testing.assert_close(a, r, atol=1e-10, rtol=1e-10)
    assert ga.keys() == gr.keys() and "model.pe.pos_emb" in ga
    for n in ga:
        torch.testing.assert_close(ga[n], gr[n], atol=1e-10, rtol=1e-10, msg=n)


def full_bias_into_sdpa(pe):
    """The reference: CoPE's bias description without its blocked form, so sdpa gets the N×N bias."""
    bias = pe.bias
    pe.bias = lambda layer, ctx: dataclasses.replace(bias(layer, ctx), attend_fn=None)


def test_model_kv_cache_decoding_equals_reference(monkeypatch):
    monkeypatch.setattr(cope_mod, "BLOCK_ELEMENTS", 1)
    monkeypatch.setattr(cope_mod, "MIN_BLOCK_ROWS", 3)
    m = _model({"npos_max": 4})
    x = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        steps = decode_logits(m, x, 7, 12)
        full_bias_into_sdpa(m.model.pe)
        torch.testing.assert_close(steps, m(x, use_cache=False).logits, atol=1e-10, rtol=1e-10)


def test_sdpa_model_never_builds_the_full_bias(monkeypatch):
    m = tiny_model("cope")

    def boom(*a, **k):
        raise AssertionError("the N×N bias was built")

    monkeypatch.setattr(m.model.pe, "reference_bias", boom)
    x = torch.randint(0, 61, (1, 10))
    m(x, labels=x).loss.backward()


def test_backward_keeps_no_n_by_n_tensor(monkeypatch):
    """Under autograd, above the checkpoint budget, the blocks are recomputed: the largest tensor saved is
    O(N·d), not N²."""
    monkeypatch.setattr(cope_mod, "CHECKPOINT_ELEMENTS", 2 * 256 * 256 - 1)  # this call's bias: just above it
    n, d, h = 256, 8, 2
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, n, d, generator=g).requires_grad_() for _ in range(3))
    e = torch.randn(d, 16, generator=g).requires_grad_()
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = cope_attention(q, k, v, k, e, 16, d**-0.5, rows=32)
    out.sum().backward()
    assert sizes and max(sizes) <= h * n * d
    assert e.grad.abs().sum() > 0


def _record_size(sizes: list[int], t: torch.Tensor) -> torch.Tensor:
    sizes.append(t.numel())
    return t


def test_below_the_checkpoint_budget_blocks_are_kept_with_bitwise_the_same_gradients(monkeypatch):
    """Small inputs (the CPU diagnostics) keep the blocks' temporaries instead of recomputing them: something
    N-by-rows is saved, and the output and every gradient are bitwise those of the checkpointed blocks."""
    n, d, h = 96, 8, 2
    g = torch.Generator().manual_seed(0)
    leaves = [torch.randn(1, h, n, d, generator=g).requires_grad_() for _ in range(3)]
    e = torch.randn(d, 16, generator=g).requires_grad_()
    got = {}
    for budget in (0, 1 << 30):  # checkpointed, kept
        monkeypatch.setattr(cope_mod, "CHECKPOINT_ELEMENTS", budget)
        sizes: list[int] = []
        pack = functools.partial(_record_size, sizes)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            q, k, v = leaves
            out = cope_attention(q, k, v, k, e, 16, d**-0.5, rows=32)
        grads = torch.autograd.grad(out.sum(), [*leaves, e])
        got[budget] = (out.detach(), grads, max(sizes))
    (o0, g0, s0), (o1, g1, s1) = got[0], got[1 << 30]
    assert s0 <= h * n * d < h * 32 * n <= s1  # recomputed: O(N·d) saved; kept: a block's rows x keys
    assert torch.equal(o0, o1) and all(torch.equal(a, b) for a, b in zip(g0, g1, strict=True))
