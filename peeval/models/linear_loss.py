"""The next-token loss without the logits (issue 65): lm_head and cross-entropy fused, so the (tokens ×
vocabulary) logits (at the gpu profile's 64 × 512 × 50,304: 6.6 GB in float32) are never held whole.

``config.linear_loss`` picks how PeevalForCausalLM's loss (and ``training.speed.summed_loss``) is computed:

- ``logits`` (the default): lm_head, then cross-entropy on the whole logits (HF's ForCausalLMLoss).
- ``chunked``: this module's torch path on any device: a few hundred tokens' logits at a time, their
  gradients (of the hidden states and of lm_head's weight) computed in the forward, as Liger-Kernel's
  fused linear cross-entropy does, and scaled by the loss's gradient in the backward. Float32 throughout.
- ``liger``: Liger-Kernel's Triton kernel (``pip install 'peeval[cuda]'``, CUDA only): the GPU candidate.

Every one shifts the labels as the model's loss does (position t predicts label t + 1, ``-100`` ignored) and
reduces as it does: the mean over labelled tokens, or their sum over ``num_items_in_batch`` when given.
"""

from __future__ import annotations

import torch

from ..registry import LINEAR_LOSSES

IGNORE_INDEX = -100
#: logits held at once by ``chunked`` (rows × vocabulary; float32: 64 MiB)
CHUNK_ELEMENTS = 1 << 24


class _ChunkedLinearCE(torch.autograd.Function):
    """sum over rows of CE(h @ Wᵀ, y) (rows with y == IGNORE_INDEX count 0), gradients made in the forward."""

    @staticmethod
    def forward(ctx, h, weight, target, rows):
        dt = torch.promote_types(torch.promote_types(h.dtype, weight.dtype), torch.float32)
        w = weight.to(dt)
        loss = torch.zeros((), dtype=dt, device=h.device)
        grad_h = torch.empty(h.shape, dtype=dt, device=h.device)
        grad_w = torch.zeros(w.shape, dtype=dt, device=h.device)
        for s in range(0, h.shape[0], rows):
            hc, yc = h[s : s + rows].to(dt), target[s : s + rows]
            logits = hc @ w.T
            lse = torch.logsumexp(logits, dim=-1)
            keep = yc != IGNORE_INDEX
            y = torch.where(keep, yc, 0).unsqueeze(-1)
            loss += torch.where(keep, lse - logits.gather(-1, y).squeeze(-1), 0).sum()
            dlogits = torch.exp(logits - lse.unsqueeze(-1))  # softmax, in place of the logits
            dlogits.scatter_add_(-1, y, torch.full_like(y, -1, dtype=dt))
            dlogits *= keep.unsqueeze(-1)
            grad_h[s : s + rows] = dlogits @ w
            grad_w += dlogits.T @ hc
        ctx.save_for_backward(grad_h.to(h.dtype), grad_w.to(weight.dtype))
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_loss.to(grad_h.dtype), grad_w * grad_loss.to(grad_w.dtype), None, None


def summed_linear_ce(h: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, how: str = "chunked"):
    """Σ CE(h @ weightᵀ, target) over rows whose target is not ``IGNORE_INDEX``: h (T, C), target (T,)."""
    if how == "chunked":
        rows = max(1, CHUNK_ELEMENTS // weight.shape[0])
        return _ChunkedLinearCE.apply(h, weight, target, rows)
    if how == "liger":
        return _liger(h, weight, target)
    raise ValueError(f"linear_loss={how!r}: allowed {', '.join(LINEAR_LOSSES[1:])} here")


def _liger(h, weight, target):
    if not h.is_cuda:
        raise ValueError("linear_loss='liger' runs on CUDA only: use 'chunked' on the CPU")
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    except ImportError:
        raise ValueError("linear_loss='liger' needs liger-kernel: pip install 'peeval[cuda]'") from None
    return liger_fused_linear_cross_entropy(h, weight, target, ignore_index=IGNORE_INDEX, reduction="sum")


def next_token_loss(h, weight, labels, how: str, num_items_in_batch=None) -> torch.Tensor:
    """The model's loss from the last hidden states h (B, N, C), lm_head's weight and labels (B, N), without
    the logits: position t predicts labels[t + 1]; the mean over labelled tokens (HF's ForCausalLMLoss), or
    the sum over ``num_items_in_batch`` when given."""
    target = labels[:, 1:].reshape(-1).to(h.device)
    total = summed_linear_ce(h[:, :-1].reshape(-1, h.shape[-1]), weight, target, how)
    if num_items_in_batch is not None:
        return total / num_items_in_batch
    return total / (target != IGNORE_INDEX).sum()
