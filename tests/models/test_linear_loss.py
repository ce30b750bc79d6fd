"""Issue 65 item 3: the loss without the logits (``config.linear_loss``), against the plain loss."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import randomize_, tiny_model

import peeval.models.linear_loss as ll
from peeval.models import PeevalConfig
from peeval.training.speed import summed_loss


def test_hand_checked_one_token():
    """h = (1, 0), W = I: logits (1, 0), target 0: loss log(1 + e^-1); dL/dh = (p0 - 1, p1) @ W, p0 = e/(e+1)."""
    h = torch.tensor([[1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    w = torch.eye(2, dtype=torch.float64, requires_grad=True)
    loss = ll.summed_linear_ce(h, w, torch.tensor([0]))
    loss.backward()
    p0 = math.e / (math.e + 1)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1)), abs=1e-15)
    assert h.grad[0].tolist() == pytest.approx([p0 - 1, 1 - p0], abs=1e-15)
    # dL/dW[v] = (p_v - [v == 0]) h: only the first column of h is 1
    assert w.grad.flatten().tolist() == pytest.approx([p0 - 1, 0.0, 1 - p0, 0.0], abs=1e-15)


@pytest.mark.parametrize("rows", [1, 3, 64])
def test_chunked_equals_plain_cross_entropy_value_and_gradients(monkeypatch, rows):
    vocab = 11
    monkeypatch.setattr(ll, "CHUNK_ELEMENTS", rows * vocab)  # chunks of `rows` rows, one of them partial
    g = torch.Generator().manual_seed(0)
    h = torch.randn(2, 9, 5, generator=g, dtype=torch.float64)
    w = torch.randn(vocab, 5, generator=g, dtype=torch.float64)
    labels = torch.randint(0, vocab, (2, 9), generator=g)
    labels[0, 3] = labels[1, 0] = labels[1, 8] = -100
    out = {}
    for how in ("plain", "chunked"):
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        if how == "plain":
            logits = hh @ ww.T
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1), ignore_index=-100)
        else:
            loss = ll.next_token_loss(hh, ww, labels, "chunked")
        (loss * 3.0).backward()  # a loss gradient other than 1 reaches both gradients
        out[how] = (loss.detach(), hh.grad, ww.grad)
    for a, b in zip(out["plain"], out["chunked"], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    summed = ll.next_token_loss(h, w, labels, "chunked", num_items_in_batch=1)
    assert summed.item() == pytest.approx(out["plain"][0].item() * 14, rel=1e-12)  # 14 targets


def test_the_model_and_summed_loss_agree_with_the_logits_path():
    """PeevalForCausalLM with linear_loss='chunked' (float64): the same loss and every parameter's gradient
    (lm_head tied to the embedding) as the default, through the model's own loss and the training loss."""
    x = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
    labels = x.clone()
    labels[0, :4] = -100
    grads = {}
    for how in ("logits", "chunked"):
        m = tiny_model("rope", linear_loss=how).double().train()
        randomize_(m)
        out = m(input_ids=x, labels=labels)
        assert (out.logits is None) == (how == "chunked")  # never the whole logits
        total = summed_loss(m, x, labels)  # the default path's .float() makes it float32: compared loosely
        out.loss.backward()
        grads[how] = (out.loss.detach(), total.detach(), {n: p.grad for n, p in m.named_parameters()})
    torch.testing.assert_close(grads["logits"][0], grads["chunked"][0], rtol=1e-6, atol=0.0, check_dtype=False)
    torch.testing.assert_close(grads["logits"][1], grads["chunked"][1], rtol=1e-6, atol=0.0, check_dtype=False)
    assert grads["logits"][2].keys() == grads["chunked"][2].keys()
    for n, g in grads["logits"][2].items():
        torch.testing.assert_close(g, grads["chunked"][2][n], rtol=1e-5, atol=1e-7, msg=n)  # HF upcasts to float32


def test_an_unknown_linear_loss_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^linear_loss='fused': allowed logits, chunked, liger$"):
        PeevalConfig(linear_loss="fused")


def test_liger_says_what_it_needs_on_the_cpu():
    with pytest.raises(ValueError, match="CUDA only"):
        ll.summed_linear_ce(torch.zeros(2, 3), torch.zeros(4, 3), torch.zeros(2, dtype=torch.long), "liger")
