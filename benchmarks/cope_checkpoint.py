"""CoPE training step with checkpointed query blocks (every block recomputed in the backward, the behaviour before
``cope.CHECKPOINT_ELEMENTS``) against the default (blocks kept below the budget), side by side in one process,
interleaved, one thread: ``python benchmarks/cope_checkpoint.py``. Prints a markdown table (median of the repeats;
memory: the bytes autograd saves for the backward, the activation memory a step holds) and checks that loss and
gradients are bitwise equal."""

from __future__ import annotations

import statistics
import time

import torch

import peeval.models.encodings.cope as cope
from peeval.models import PeevalConfig, PeevalForCausalLM

#: (name, model size, batch, sequence): the cpu profile's diagnostics (counting's longest rows) and pretraining
SHAPES = [
    ("diagnostics 2x64, B=32, N=256", {"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2}, 32, 256),
    ("pretraining 4x128, B=16, N=256", {"hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 4}, 16, 256),
]
REPEATS = 5


def _step(model, x) -> tuple[float, torch.Tensor, int]:
    model.zero_grad(set_to_none=True)
    saved = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=x, labels=x)
    out.loss.backward()
    return out.loss.item(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]), saved[0]


def main() -> None:
    torch.set_num_threads(1)
    default = cope.CHECKPOINT_ELEMENTS
    print(
        "| shape | checkpointed blocks (ms) | default (ms) | ratio | saved for backward (MB): checkpointed / default "
        "| bitwise equal |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for name, size, b, n in SHAPES:
        cfg = PeevalConfig(pe="cope", vocab_size=512, num_attention_heads=4, num_key_value_heads=4,
                           max_position_embeddings=2 * n, **size)  # fmt: skip
        torch.manual_seed(0)
        model = PeevalForCausalLM(cfg)
        x = torch.randint(0, 512, (b, n), generator=torch.Generator().manual_seed(1))
        times: dict[int, list[float]] = {0: [], default: []}
        results = {}
        for _ in range(REPEATS):
            for budget in times:
                cope.CHECKPOINT_ELEMENTS = budget
                t0 = time.perf_counter()
                results[budget] = _step(model, x)
                times[budget].append(time.perf_counter() - t0)
        cope.CHECKPOINT_ELEMENTS = default
        old, new = (statistics.median(times[k]) for k in (0, default))
        same = results[0][0] == results[default][0] and torch.equal(results[0][1], results[default][1])
        mb = f"{results[0][2] / 2**20:.0f} / {results[default][2] / 2**20:.0f}"
        print(f"| {name} | {old * 1000:.0f} | {new * 1000:.0f} | {new / old:.2f} | {mb} | {same} |")


if __name__ == "__main__":
    main()
