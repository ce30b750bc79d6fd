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


# -- pieces shared by the kernels' bodies (inlined by triton: the kernels compile as if written out) --
if triton is not None:

    @triton.jit
    def dot(a, b, PREC: tl.constexpr):
        """tl.dot; PREC "upcast" computes in fp32 (the interpreter's bf16 dot is broken in triton 3.7)."""
        if PREC == "upcast":
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        else:
            return tl.dot(a, b, input_precision=PREC)

    @triton.jit
    def program_heads(H, G):
        """(bh, b, h, hk) of this program: grid axis 1 runs over batch x query heads, and query head
        h reads kv head hk = h // G (GQA)."""
        bh = tl.program_id(1)
        b = bh // H
        h = bh % H
        return bh, b, h, h // G

    @triton.jit
    def query_program(BM: tl.constexpr, H, G, N):
        """A program over one query block (forward, dq): (start_m, offs_m, mm, bh, b, h, hk). The
        last blocks, with the longest causal rows, are handed out first so they do not finish last."""
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BM
        offs_m, mm = span(start_m, BM, N)
        bh, b, h, hk = program_heads(H, G)
        return start_m, offs_m, mm, bh, b, h, hk

    @triton.jit
    def key_program(BN: tl.constexpr, H, G, N):
        """A program over one key block (dk, dv): (start_n, offs_n, mn, bh, b, h, hk)."""
        start_n = tl.program_id(0) * BN
        offs_n, mn = span(start_n, BN, N)
        bh, b, h, hk = program_heads(H, G)
        return start_n, offs_n, mn, bh, b, h, hk

    @triton.jit
    def span(start, BLOCK: tl.constexpr, n):
        """Offsets ``start .. start + BLOCK - 1`` and their mask ``< n``: a block of rows, or a
        feature dim padded to a power of two (start 0)."""
        offs = start + tl.arange(0, BLOCK)
        return offs, offs < n

    @triton.jit
    def load_tile(ptr, rows, stride, cols, rmask, cmask):
        """The (rows, cols) tile of a row-major block (last dim contiguous), 0 outside the masks."""
        return tl.load(ptr + rows[:, None] * stride + cols[None, :], mask=rmask[:, None] & cmask[None, :], other=0.0)

    @triton.jit
    def online_softmax(s, m_i, l_i):
        """One key block of the online softmax in base 2: (p, the rescale alpha of what was
        accumulated so far, the new running max, the new running sum)."""
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)

    @triton.jit
    def key_blocks(phase: tl.constexpr, start_m, BM: tl.constexpr, N):
        """[lo, hi) of the key blocks a query block at ``start_m`` visits: phase 0 the ones before it
        (all visible: no causal mask), phase 1 its diagonal (causal mask and the ragged tail)."""
        if phase == 0:
            return 0, start_m
        else:
            return start_m, tl.minimum(start_m + BM, N)

    @triton.jit
    def query_blocks(phase: tl.constexpr, start_n, BN: tl.constexpr, N):
        """[lo, hi) of the query blocks that see a key block at ``start_n``: phase 0 its diagonal
        (causal mask), phase 1 those below it (all visible; tail rows have lse = +inf, so p = 0)."""
        if phase == 0:
            return start_n, tl.minimum(start_n + BN, N)
        else:
            return start_n + BN, N

    @triton.jit
    def store_rows(ptr, row0, rows, width, cols, rmask, cmask, x):
        """``x`` into rows ``row0 + rows`` of a contiguous (·, width) output (the gradients, per query
        head), cast to the output's dtype, inside the masks."""
        tl.store(
            ptr + (row0 + rows[:, None]) * width + cols[None, :],
            x.to(ptr.dtype.element_ty),
            mask=rmask[:, None] & cmask[None, :],
        )
