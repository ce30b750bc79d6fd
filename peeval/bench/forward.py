"""Forward speed and peak memory of every encoding, as ratios to ``rope`` in the same run.

    python -m peeval.bench.forward                       # `make bench`: every encoding and back-end,
                                                 # forward @2048 and training step @1024
    python -m peeval.bench.forward --lengths 512 2048 8192   # forward at chosen lengths
    python -m peeval.bench.forward --pe rope tape tape@triton pope@triton --device cuda --dtype bfloat16 --train

An entry ``pe@backend`` picks the attention back-end (default sdpa, which for the bias
encodings alibi / t5 / kerple / fire means ``attention.plan``'s choice: FlexAttention on
CUDA, blocked sdpa on the CPU; ``alibi@eager`` is the N×N reference, ``alibi@flex`` forces
FlexAttention, compiled during the warm-up, CPU forward only); ``--train`` times a
forward + backward (training step without the optimizer) instead of a forward.

Speed: the encodings are timed interleaved with ``rope`` (round robin, median of
``--reps``), so a noisy machine shifts both sides alike. Memory: on CUDA
``max_memory_allocated``; on CPU each (encoding, length) runs in a fresh subprocess and
reports its peak resident-set growth during the forward (``ru_maxrss`` − RSS before).
Also: ``rope`` vs transformers' ``LlamaForCausalLM`` of identical shape and weights.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

from .._io import atomic_write_text, dumps_json
from ..models import PeevalConfig, PeevalForCausalLM
from ..models.encodings import ENCODINGS

SHAPE = dict(
    vocab_size=8192, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
    max_position_embeddings=512,
)  # fmt: skip


def build(spec: str, device: str, dtype: torch.dtype, max_len: int):
    pe, _, backend = spec.partition("@")
    torch.manual_seed(0)
    opts = {"max_positions": max(32768, 2 * max_len)} if pe == "randpe" else {}
    # learned: a table as long as the longest measured input, so it can be timed at all
    mpe = max_len if pe == "learned" else SHAPE["max_position_embeddings"]
    cfg = PeevalConfig(
        **{**SHAPE, "max_position_embeddings": mpe}, pe=pe, pe_options=opts, attn_backend=backend or "sdpa"
    )
    return PeevalForCausalLM(cfg).to(device=device, dtype=dtype).eval()


def llama_twin(model):
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = {k: v for k, v in model.config.to_dict().items() if k in LlamaConfig.__dataclass_fields__}
    fields.pop("model_type", None)
    llama = LlamaForCausalLM(LlamaConfig(**fields, attn_implementation="sdpa"))
    llama.load_state_dict(model.state_dict(), strict=False)
    return llama.to(next(model.parameters()).device, next(model.parameters()).dtype).eval()


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step(model, x, train: bool) -> None:
    if train:
        model(x, labels=x, use_cache=False).loss.backward()
        model.zero_grad(set_to_none=True)
    else:
        with torch.no_grad():
            model(x, use_cache=False)


def time_step(model, x, device, train=False) -> float:
    _sync(device)
    t = time.perf_counter()
    step(model, x, train)
    _sync(device)
    return time.perf_counter() - t


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def cpu_step_peak_mib(model, x, train: bool) -> float:
    """Peak resident-set growth of one step: reset the high-water mark (Linux clear_refs), step, read VmHWM."""
    step(model, x[:, :8], train)  # load lazy libraries and thread pools first
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS")
    step(model, x, train)
    return max(0, _status_kib("VmHWM") - before) / 1024


def cpu_peak_memory(spec: str, n: int, train: bool = False) -> float:
    """``cpu_step_peak_mib`` in a fresh interpreter, so that no earlier run's heap is reused."""
    code = (
        "import torch; from peeval.bench.forward import build, cpu_step_peak_mib;"
        f"m=build({spec!r},'cpu',torch.float32,{n}).train({train}); x=torch.randint(0,8192,(1,{n}));"
        f"print(cpu_step_peak_mib(m,x,{train}))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def gpu_peak_memory(model, x, train=False) -> float:
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(model, x, train)
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def run(pes, lengths, device, dtype, reps, memory=True, train=False):
    rows = []
    for n in lengths:
        models = {pe: build(pe, device, dtype, n) for pe in dict.fromkeys(["rope", *pes])}
        models["llama(hf)"] = llama_twin(models["rope"])
        x = torch.randint(0, SHAPE["vocab_size"], (1, n), device=device)
        times: dict[str, list[float]] = {k: [] for k in models}
        for m in models.values():  # warm-up (and Triton compilation)
            m.train(train)
            time_step(m, x, device, train)
        for _ in range(reps):  # round robin: rope and each encoding side by side
            for k, m in models.items():
                times[k].append(time_step(m, x, device, train))
        med = {k: statistics.median(v) for k, v in times.items()}
        for k in models:
            mem = None
            if memory:
                if device.startswith("cuda"):
                    mem = gpu_peak_memory(models[k], x, train)
                elif k != "llama(hf)":  # a fresh process per measurement: peeval models only
                    mem = cpu_peak_memory(k, n, train)
            rows.append({"pe": k, "length": n, "tokens_per_s": n / med[k], "time_ratio_to_rope": med[k] / med["rope"],
                         "peak_mib": mem})  # fmt: skip
        del models
    for r in rows:
        base = next(b for b in rows if b["pe"] == "rope" and b["length"] == r["length"])
        r["mem_ratio_to_rope"] = r["peak_mib"] / base["peak_mib"] if r["peak_mib"] and base["peak_mib"] else None
    return rows


def format_table(rows) -> str:
    lines = ["| pe | N | tokens/s | time / rope | peak MiB | mem / rope |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        mem = f"{r['peak_mib']:.0f}" if r["peak_mib"] is not None else "–"
        mr = f"{r['mem_ratio_to_rope']:.2f}" if r["mem_ratio_to_rope"] is not None else "–"
        lines.append(
            f"| {r['pe']} | {r['length']} | {r['tokens_per_s']:.0f} | {r['time_ratio_to_rope']:.2f} | {mem} | {mr} |"
        )
    return "\n".join(lines)


#: the issue-17 comparison `make bench` prints: (mode, length, train)
DEFAULT_RUNS = (("forward", 2048, False), ("forward+backward", 1024, True))
#: encodings whose default path is not the N×N reference: the reference is timed beside them
REFERENCE_BACKENDS = ("alibi@eager", "t5@eager", "kerple@eager", "fire@eager", "cope@eager")


def default_entries(device: str) -> list[str]:
    """Every encoding on its default back-end, the references of the fast paths, and on CUDA the
    fused Triton and FlexAttention paths."""
    entries = [*ENCODINGS, *REFERENCE_BACKENDS]
    if device.startswith("cuda"):
        entries += ["tape@triton", "pope@triton", "alibi@flex", "t5@flex", "kerple@flex", "fire@flex"]
    return entries


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pe", nargs="*", default=None, help="entries pe[@backend] (default: every encoding and back-end)")
    p.add_argument("--lengths", nargs="*", type=int, default=None, help="default: forward @2048 and train @1024")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--train", action="store_true", help="time forward + backward instead of forward")
    p.add_argument("--json", help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    if a.json:
        from .._io.outputs import OutputRefused, check_output_file

        try:
            check_output_file(a.json, "--json", "bench")
        except OutputRefused as e:  # one line, exit 2 (argparse's error adds its usage)
            print(f"peeval.bench.forward: error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    pes = a.pe if a.pe is not None else default_entries(a.device)
    if a.lengths is None and not a.train:
        plan = [(mode, [n], train) for mode, n, train in DEFAULT_RUNS]
    else:
        plan = [("forward+backward" if a.train else "forward", a.lengths or [2048], a.train)]
    rows = []
    for mode, lengths, train in plan:
        got = run(pes, lengths, a.device, getattr(torch, a.dtype), a.reps, memory=not a.no_memory, train=train)
        print(f"{mode} device={a.device} dtype={a.dtype} threads={torch.get_num_threads()} shape={SHAPE} batch=1")
        print(format_table(got), flush=True)
        rows += [{**r, "mode": mode} for r in got]
    if a.json:
        atomic_write_text(a.json, dumps_json(rows, indent=1))


if __name__ == "__main__":
    main()
