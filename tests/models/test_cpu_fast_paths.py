"""The CPU fast paths of tape and pope (issue 17 item 3) against the implementations they
replace, kept here as references: same logits and every gradient in float64, with left
padding and with a KV cache, and PyTorch's CPU flash kernel (not the N×N math kernel) runs."""

import copy
import types

import pytest
import torch
import torch.nn.functional as F
from conftest import decode_logits, randomize_, tiny_model
from torch.profiler import ProfilerActivity, profile

X = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(0))


# -- the implementations before issue 17 (references) ---------------------------------
def ref_tape_transform_qk(self, layer, q, k, ctx):
    if layer == 0 or "tape_E" not in ctx.state:
        ctx.state["tape_E"] = self.initial_state(q, ctx.position_ids)
    e = ctx.state["tape_E"]
    return self.apply_state(q, e), self.apply_state(k, e)


def ref_pope_transform_qk(self, layer, q, k, ctx):
    if ctx.fused:
        return q, k
    dt = torch.promote_types(q.dtype, torch.float32)
    phase = ctx.position_ids.to(dt)[:, None, :, None] * self.inv_freq.to(dt)
    mq = F.softplus(q.to(dt)) if self.use_softplus else q.to(dt)
    mk = F.softplus(k.to(dt)) if self.use_softplus else k.to(dt)
    q2 = torch.cat([mq * phase.cos(), mq * phase.sin()], dim=-1)
    delta = self.delta_for(layer)
    kphase = phase if delta is None else phase + delta.to(dt)[None, :, None, :]
    k2 = torch.cat([mk * kphase.cos(), mk * kphase.sin()], dim=-1)
    return q2.to(q.dtype), k2.to(k.dtype)


REFERENCE = {
    "tape": {"transform_qk": ref_tape_transform_qk},
    "pope": {"transform_qk": ref_pope_transform_qk, "extra_values": lambda self, layer, ctx: None},
}


def _pair(pe, dtype=torch.float64, **opts):
    model = tiny_model(pe, pe_options=opts).to(dtype)
    randomize_(model)
    ref = copy.deepcopy(model)
    for name, fn in REFERENCE[pe].items():
        setattr(ref.model.pe, name, types.MethodType(fn, ref.model.pe))
    return model, ref


def _loss_and_grads(model, mask=None):
    model.zero_grad(set_to_none=True)
    out = model(X, attention_mask=mask, labels=X, use_cache=False)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach(), grads


CASES = [
    ("tape", {}),
    ("tape", {"L": 1, "R": 4}),
    ("tape", {"L": 4, "R": 1}),
    ("pope", {}),
    ("pope", {"softplus": False, "delta": False}),
]


@pytest.mark.parametrize(("pe", "opts"), CASES)
@pytest.mark.parametrize("padded", [False, True])
def test_equals_reference_values_and_every_gradient_float64(pe, opts, padded):
    model, ref = _pair(pe, **opts)
    mask = None
    if padded:
        mask = torch.ones_like(X)
        mask[0, :4] = 0  # left padding on the first row
    a, ga = _loss_and_grads(model, mask)
    b, gb = _loss_and_grads(ref, mask)
    torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)
    assert ga.keys() == gb.keys() and len(ga) == len(list(model.parameters()))
    for n in ga:
        torch.testing.assert_close(ga[n], gb[n], atol=1e-10, rtol=1e-10, msg=n)


@pytest.mark.parametrize(("pe", "opts"), CASES[:1] + CASES[3:4])
def test_equals_reference_with_kv_cache_float64(pe, opts):
    model, ref = _pair(pe, **opts)
    outs = []
    for m in (model, ref):
        outs.append(decode_logits(m, X, 7))
    torch.testing.assert_close(outs[0], outs[1], atol=1e-10, rtol=1e-10)
    with torch.no_grad():  # and decoding equals one full forward
        torch.testing.assert_close(outs[0], model(X, use_cache=False).logits, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("pe", ["tape", "pope"])
def test_cpu_forward_runs_the_flash_kernel_not_the_math_one(pe):
    """Unequal q/k/v widths send CPU sdpa to its math kernel (N×N scores, ~2× slower)."""
    model = tiny_model(pe)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(X, use_cache=False)
    names = {e.key for e in prof.key_averages()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in names
    assert "aten::_scaled_dot_product_attention_math" not in names
