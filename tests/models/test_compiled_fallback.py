"""A compiled attention path that fails (FIRE's FlexAttention backward on an H200, issue 46) falls
back to one that works, with one log line, and the model trains; on CUDA never to the blocked path.

The failure is forced on the CPU: the compiled flex call is replaced by one that raises, in the
forward or (like the H200's Inductor error) only in the backward.
"""

import logging

import pytest
import torch
from conftest import tiny_model

import peeval._log as plog
import peeval.models.attention as attn
import peeval.models.attention_ops as ops
from peeval.models.encodings.base import PEContext

INDUCTOR = "InductorError: SubprocException: triton_tem_fused_flex_attention_backward failed"


@pytest.fixture
def fresh(monkeypatch, caplog):
    """No back-end known broken, no log line said yet, warnings captured."""
    monkeypatch.setattr(attn, "BROKEN", set())
    monkeypatch.setattr(attn, "_FLEX_PROBED", set())
    monkeypatch.setattr(plog, "_said", set())
    caplog.set_level(logging.WARNING, logger="peeval")
    return caplog


def fire64():
    torch.manual_seed(0)
    m = tiny_model("fire", pe_options={"init_L": 8}).double()
    with torch.no_grad():
        for p in m.model.pe.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m


def step(m, backend, x, train=True):
    m.config.attn_backend = backend
    m.zero_grad(set_to_none=True)
    if not train:
        with torch.no_grad():
            return m(x, use_cache=False).logits, {}
    out = m(x, labels=x, use_cache=False)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}


def fallback_lines(caplog):
    return [r.getMessage() for r in caplog.records if "failed for pe=" in r.getMessage()]


def test_flex_forward_compile_failure_falls_back_once(fresh, monkeypatch):
    calls = []

    def broken_flex(*a, **k):
        calls.append(1)
        raise RuntimeError(INDUCTOR + "\nsecond line of the compiler's report")

    monkeypatch.setattr(ops, "_compiled_flex", broken_flex)
    m = fire64()
    x = torch.randint(0, 61, (2, 24))
    ref = step(m, "eager", x, train=False)[0]
    out = step(m, "flex", x, train=False)[0]
    again = step(m, "flex", x, train=False)[0]
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(again, ref, rtol=1e-10, atol=1e-10)
    assert len(calls) == 1  # marked broken: never tried again, in any layer or forward
    lines = fallback_lines(fresh)
    assert len(lines) == 1, lines
    assert "'flex'" in lines[0] and "pe='fire'" in lines[0] and "RuntimeError" in lines[0]
    assert "'blocked'" in lines[0] and "\n" not in lines[0]


class _FailsBackward(torch.autograd.Function):
    """The forward's value; a backward that raises as Inductor did compiling the flex backward."""

    @staticmethod
    def forward(actx, out, *inputs):
        return out.clone()

    @staticmethod
    def backward(actx, grad):
        raise RuntimeError(INDUCTOR)


def test_flex_backward_compile_failure_is_caught_in_the_forward_and_the_model_trains(fresh, monkeypatch):
    """The backward's failure shows in the forward's probe, so the real call never runs flex: the
    training step's loss and every gradient are the fallback path's, and training goes on."""
    from torch.nn.attention.flex_attention import flex_attention

    forwards = []

    def flex_without_backward(q, k, v, **kw):
        forwards.append(1)
        with torch.no_grad():
            out = flex_attention(q.detach(), k.detach(), v.detach(), **kw)  # eager FlexAttention: CPU forward
        return _FailsBackward.apply(out, q, k, v)

    monkeypatch.setattr(ops, "_compiled_flex", flex_without_backward)
    monkeypatch.setattr(attn, "flex_available", lambda q: True)  # as on CUDA: flex under autograd
    m = fire64()
    x = torch.randint(0, 61, (2, 24))
    ref = step(m, "blocked", x)
    got = step(m, "flex", x)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-10, atol=1e-10)
    assert set(got[1]) == set(ref[1]) and any(n.startswith("model.pe.") for n in got[1])
    for name in ref[1]:
        torch.testing.assert_close(got[1][name], ref[1][name], rtol=1e-10, atol=1e-10, msg=name)
    assert len(forwards) == 1  # the probe only
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        m.zero_grad(set_to_none=True)
        loss = m(x, labels=x, use_cache=False).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert len(forwards) == 1 and len(fallback_lines(fresh)) == 1
    assert len(fresh.records) == 1, [r.getMessage() for r in fresh.records]  # one line in all


def dense_flex(q, k, v, *, score_mod, block_mask, scale, enable_gqa):
    """FlexAttention's meaning with autograd on the CPU: score_mod on every (b, h, i, j), causal."""
    b, h, n, m = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    k, v = attn.repeat_kv(k, h // k.shape[1]), attn.repeat_kv(v, h // v.shape[1])  # enable_gqa
    idx = (torch.arange(b)[:, None, None, None], torch.arange(h)[None, :, None, None],
           torch.arange(n)[None, None, :, None], torch.arange(m)[None, None, None, :])  # fmt: skip
    s = score_mod(q @ k.transpose(-1, -2) * scale, *idx)
    s = s.masked_fill(idx[3] > idx[2], float("-inf"))
    return torch.softmax(s, -1) @ v


def test_a_working_flex_is_probed_once_per_shape(fresh, monkeypatch):
    """No failure: the probe runs once per shape, the real call every layer, nothing is logged,
    and the values and gradients are the reference's."""
    calls = []

    def eager_flex(q, k, v, **kw):
        calls.append(q.shape[2])
        return dense_flex(q, k, v, **kw)

    monkeypatch.setattr(ops, "_compiled_flex", eager_flex)
    monkeypatch.setattr(attn, "flex_available", lambda q: True)
    m = tiny_model("kerple").double()  # one kernel for all layers
    layers = m.config.num_hidden_layers
    x = torch.randint(0, 61, (1, 16))
    step(m, "flex", x)
    assert len(calls) == layers + 1  # the first layer's probe, then every layer
    step(m, "flex", x)
    assert len(calls) == 2 * layers + 1
    step(m, "flex", x[:, :8])  # a new shape: probed again
    assert len(calls) == 3 * layers + 2
    assert fresh.records == []
    ref, got = step(m, "eager", x), step(m, "flex", x)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-10, atol=1e-10)
    assert set(got[1]) == set(ref[1]) and {"model.pe.r1", "model.pe.r2"} <= set(got[1])
    for name in ref[1]:
        torch.testing.assert_close(got[1][name], ref[1][name], rtol=1e-10, atol=1e-10, msg=name)


def ctx_for(nq):
    pos = torch.arange(nq)[None]
    return PEContext(position_ids=pos, key_position_ids=pos, past_length=0)


def test_a_failed_flex_falls_back_to_sdpa_on_cuda(fresh, monkeypatch):
    """fire@flex on CUDA whose compilation fails goes to sdpa with the bias (issue 57: never the blocked path, 32x
    rope on an H200 in issue 46); on the CPU to the blocked path."""
    monkeypatch.setattr(attn, "_is_cuda", lambda t: True)
    enc = fire64().model.pe
    q = torch.zeros(1, 4, 8, 8, requires_grad=True)
    call = attn.AttentionCall(enc, 0, "flex", ctx_for(8), q)
    call.bias = enc.bias(0, call.ctx)
    assert attn.fallback_for(call, "flex") == "sdpa"
    monkeypatch.setattr(attn, "_is_cuda", lambda t: False)
    assert attn.fallback_for(call, "flex") == "blocked"


def test_after_the_fallback_every_later_call_runs_the_back_end_the_log_line_named(fresh, monkeypatch):
    """Measured on an H200: the line said "using 'eager' instead" but the 49 steps after it ran the blocked path
    (2.4 s a step, 32x rope). The plan of every later call is the fallback the line named (issue 57: sdpa)."""
    monkeypatch.setattr(attn, "_is_cuda", lambda t: True)
    enc = fire64().model.pe
    q = torch.zeros(1, 4, 8, 8, requires_grad=True)
    call = attn.AttentionCall(enc, 0, "flex", ctx_for(8), q)
    call.bias = enc.bias(0, call.ctx)
    attn.BROKEN.add(("flex", "fire", q.device.type))  # what fall_back records
    named = attn.fallback_for(call, "flex")
    assert named == "sdpa"
    assert attn.plan(attn.AttentionCall(enc, 0, "flex", ctx_for(8), q)) == named
    with torch.no_grad():
        assert attn.plan(attn.AttentionCall(enc, 0, "flex", ctx_for(8), q)) == named
