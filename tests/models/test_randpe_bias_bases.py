"""randpe over a base with a position-only bias (alibi, t5, kerple, fire): the bias is built from
the remapped positions by the blocked back-end, never as an N×N tensor, and it equals the eager
reference (values and every gradient in float64). Issue 26: randpe once forwarded only some hooks,
so these bases silently fell back to the dense N×N bias."""

import pytest
import torch
from conftest import tiny_model

import peeval.models.attention as attn
import peeval.models.attention_ops as ops

#: the bases whose bias depends on positions only (checked against the registry below)
BIAS_BASES = ["alibi", "t5", "kerple", "fire"]
N = 128


def test_the_bias_bases_are_every_randpe_base_with_a_position_bias():
    from peeval.models.encodings import PEContext, PositionBias
    from peeval.models.encodings.randpe import bases

    pos = torch.arange(4)[None]
    ctx = PEContext(position_ids=pos, key_position_ids=pos, past_length=0)
    with_bias = [b for b in bases() if isinstance(tiny_model(b).model.pe.bias(0, ctx), PositionBias)]
    assert sorted(with_bias) == sorted(BIAS_BASES)


def model64(base):
    m = tiny_model("randpe", pe_options={"base": base, "max_positions": 4 * N}).double().train()
    with torch.no_grad():  # move the parameters off their init values: every gradient matters
        for p in m.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return m


def run(m, backend, x):
    """Loss, logits and gradients under ``backend``, with one fixed draw of randpe's positions;
    also the largest tensor autograd saved."""
    m.config.attn_backend = backend
    m.zero_grad(set_to_none=True)
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    torch.manual_seed(7)  # the training draw: the same positions for both back-ends
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(x, labels=x, use_cache=False)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
    return out.logits.detach(), grads, max(sizes)


@pytest.mark.parametrize("base", BIAS_BASES)
def test_randpe_over_a_bias_base_runs_blocked_and_equals_eager(base, monkeypatch):
    monkeypatch.setattr(ops, "BLOCK_ELEMENTS", 4 * 32 * N)  # blocks of 32 rows: several per sequence
    blocked = []
    real = attn.blocked_bias_attention
    monkeypatch.setattr(attn, "blocked_bias_attention", lambda *a, **k: blocked.append(1) or real(*a, **k))
    m = model64(base)
    x = torch.randint(0, 61, (1, N), generator=torch.Generator().manual_seed(0))
    ref_logits, ref_grads, _ = run(m, "eager", x)
    assert not blocked
    logits, grads, largest = run(m, "sdpa", x)  # the default back-end
    assert len(blocked) == m.config.num_hidden_layers  # every layer took the blocked path
    assert largest < N * N  # no N×N bias (nor scores) kept: the largest are logits and MLP activations
    torch.testing.assert_close(logits, ref_logits, rtol=1e-12, atol=1e-12)
    assert grads.keys() == ref_grads.keys() and any(n.startswith("model.pe.base.") for n in grads) == (base != "alibi")
    for n in grads:
        torch.testing.assert_close(grads[n], ref_grads[n], rtol=1e-12, atol=1e-12, msg=n)
