"""Plumbing shared by the fused kernels: optional triton import, availability, dtypes."""

from __future__ import annotations

import os

import torch

try:  # triton is optional (the ``gpu`` / ``dev`` extras)
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

LOG2E = 1.4426950408889634


def interpret() -> bool:
    """TRITON_INTERPRET=1: kernels run on CPU tensors through triton's interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def kernel_available(t: torch.Tensor) -> bool:
    return triton is not None and (t.is_cuda or interpret())


def np2(x: int) -> int:
    """Block width for a feature dim: the next power of two, at least 16 (tl.dot's minimum)."""
    return max(16, triton.next_power_of_2(x))


def last_contig(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def dot_precision(dtype: torch.dtype) -> str:
    """IEEE dots for fp32; the interpreter gets bf16 ``tl.dot`` wrong, so it upcasts there."""
    if dtype == torch.float32:
        return "ieee"
    return "upcast" if dtype == torch.bfloat16 and interpret() else "tf32"


def fallback_reason(t: torch.Tensor) -> str:
    return "triton is not installed" if triton is None else f"tensors on {t.device.type}"
