"""``peeval bench --train``: the training step of a profile's model, per encoding and back-end, as
ratios to ``rope`` in one run (issue 46).

    peeval bench --train --profile gpu                       # every encoding (+ the alternatives on CUDA)
    peeval bench --train --profile cpu --pe rope t5 t5@eager --steps 5
    peeval bench --train --profile gpu --pe rope fire fire@flex --json out.json --md out.md

One entry ``pe[@backend]`` (``attn_backend``; default: peeval's own choice, ``attention.plan``) is the
profile's model (its ``hidden_size``, layers, heads, ``vocab_size``, ``seq_len`` and ``batch_size``, or
``--batch_size`` / ``--seq_len``) on random tokens: forward with labels under bf16 autocast on CUDA (as
``peeval train``; ``--autocast none`` for float32), backward, AdamW step. Each entry is timed alone:
``--warmup`` steps (compilation), then the median of ``--steps`` steps (fewer once an entry has run
``--entry_seconds``). Reported: step time, ratio to rope's, tokens/s, the attention back-ends that ran
(a fallback shows), and the share of the device's peak: 6 · parameters (embeddings included) ·
tokens/s over ``--peak_flops``, by default 989e12 on an H100 / H200 (bf16 dense) and none elsewhere
(no CPU peak is assumed). An entry that fails is a row with its error; the others go on. Rows are
written (``--json``, ``--md``) after every entry, so a run cut short keeps what it measured.

Imports torch, transformers and peeval's models only (no lm-eval, datasets, accelerate), and torch
only when it runs (``peeval`` starts without it); the profile is read without pydantic where it is not
installed.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

from peeval.registry import LINEAR_LOSSES
from peeval.registry.declarations import profile_names

from .._io import atomic_write_text, dumps_json
from .._io.outputs import stamp_markdown

#: bf16 dense peak FLOP/s of the GPUs named here (NVIDIA's data sheets: H100 SXM 989 TFLOP/s; H200 the same chip)
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12}
#: on CUDA, besides every encoding's default: the alternatives issue 46 compares
CUDA_ALTERNATIVES = ("fire@blocked", "fire@eager", "fire@flex", "t5@blocked", "t5@flex", "t5@eager", "kerple@blocked",
                     "kerple@flex", "kerple@eager", "cope@eager", "tape@triton", "pope@triton",
                     "cope@recompute")  # fmt: skip
CPU_ALTERNATIVES = ("fire@eager", "t5@eager", "kerple@eager", "cope@eager")
SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "vocab_size", "rope_theta", "tie_word_embeddings")  # fmt: skip


def profile_settings(name: str) -> dict:
    """The train profile ``name`` (validated; without pydantic: profiles.yaml with its ``extends`` resolved)."""
    try:
        from ..training.profiles import get_profile
    except ImportError:  # pydantic missing: the raw table
        import yaml

        table = yaml.safe_load((Path(__file__).parent.parent / "training" / "profiles.yaml").read_text())["train"]
        if name not in table:
            raise ValueError(f"unknown train profile {name!r}: allowed {', '.join(table)}") from None
        chain = [table[name]]
        while "extends" in chain[-1]:
            chain.append(table[chain[-1]["extends"]])
        out: dict = {}
        for entry in reversed(chain):
            out.update({k: v for k, v in entry.items() if k != "extends"})
        return out
    return get_profile("train", name)


def build(entry: str, prof: dict, seq_len: int, device: str, linear_loss: str = "logits"):
    import torch

    from ..models import PeevalConfig, PeevalForCausalLM

    pe, _, backend = entry.partition("@")
    torch.manual_seed(0)
    shape = {k: prof[k] for k in SHAPE_KEYS}
    cfg = PeevalConfig(**shape, max_position_embeddings=seq_len, pe=pe, attn_backend=backend or "sdpa",
                       linear_loss=linear_loss)  # fmt: skip
    return PeevalForCausalLM(cfg).to(device).train()


def peak_flops(device: str, given: float | None) -> float | None:
    import torch

    if given:
        return given
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        return next((v for k, v in PEAK_FLOPS.items() if k in name), None)
    return None


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_entry(entry, prof, *, batch, seq_len, device, autocast, steps, warmup, entry_seconds, compiled=False,
               linear_loss="logits") -> dict:  # fmt: skip
    """One entry's row: median step time of up to ``steps`` steps after ``warmup``, and what ran.
    ``compiled``: the loss through ``speed.compiled_loss`` and fused AdamW, as ``peeval train`` on CUDA."""
    import torch

    import peeval.models.attention as attn
    from peeval.training.speed import compiled_loss, make_optimizer, summed_loss

    model = build(entry, prof, seq_len, device, linear_loss)
    opt = make_optimizer([{"params": list(model.parameters()), "weight_decay": 0.0}],
                         {"lr": 1e-4, "betas": (0.9, 0.999)}, compiled)  # fmt: skip
    loss_of = compiled_loss() if compiled else summed_loss
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, prof["vocab_size"], (batch, seq_len), generator=g).to(device)
    dtype = torch.bfloat16 if autocast == "bf16" else None
    ran: set[str] = set()
    attend = attn.attend

    def record(how, call):
        ran.add(how)
        return attend(how, call)

    def loss_and_backward(fn) -> None:
        with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
            loss = fn(model, x, x) / (x.numel() - x.shape[0])  # the mean next-token loss
        loss.backward()

    def one_step() -> float:
        _sync(device)
        t = time.perf_counter()
        loss_and_backward(loss_of)
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(device)
        return time.perf_counter() - t

    # the back-ends that run: recorded in the eager steps; a compiled entry records them in one eager forward and
    # backward first (no optimizer step), since dynamo guards on the recording set and would recompile as it grows
    attn.attend = record
    try:
        if compiled:
            loss_and_backward(summed_loss)
            model.zero_grad(set_to_none=True)
            attn.attend = attend
        start = time.perf_counter()
        warm = [one_step() for _ in range(max(1, warmup))]
        times: list[float] = []
        while len(times) < steps and (not times or time.perf_counter() - start < entry_seconds):
            times.append(one_step())
    finally:
        attn.attend = attend
    params = sum(p.numel() for p in model.parameters())
    mem = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None
    return {"entry": entry, "step_s": statistics.median(times), "steps_timed": len(times), "first_step_s": warm[0],
            "params": params, "tokens_per_step": batch * seq_len, "backends": sorted(ran), "peak_mib": mem,
            "compiled": compiled}  # fmt: skip


def finish(rows: list[dict], peak: float | None) -> list[dict]:
    """Ratios to rope, tokens/s and the share of the peak (rows with an error keep it)."""
    rope = next((r["step_s"] for r in rows if r["entry"] == "rope" and "step_s" in r), None)
    for r in rows:
        if "step_s" not in r:
            continue
        r["ratio_to_rope"] = r["step_s"] / rope if rope else None
        r["tokens_per_s"] = r["tokens_per_step"] / r["step_s"]
        r["model_flops_share"] = 6 * r["params"] * r["tokens_per_s"] / peak if peak else None
    return rows


def format_table(rows: list[dict], header: str) -> str:
    lines = [header, "", "| entry | step ms | / rope | tokens/s | 6ND / peak | back-ends that ran | note |",
             "|---|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for r in rows:
        if "step_s" not in r:
            lines.append(f"| {r['entry']} | – | – | – | – | – | FAILED: {r['error']} |")
            continue
        ratio = f"{r['ratio_to_rope']:.2f}" if r.get("ratio_to_rope") else "–"
        share = f"{100 * r['model_flops_share']:.1f} %" if r.get("model_flops_share") else "–"
        note = f"{r['steps_timed']} steps, first {r['first_step_s']:.1f} s"
        lines.append(f"| {r['entry']} | {1000 * r['step_s']:.1f} | {ratio} | {r['tokens_per_s']:.0f} | {share} | "
                     f"{', '.join(r['backends'])} | {note} |")  # fmt: skip
    return "\n".join(lines)


def default_entries(device: str) -> list[str]:
    from ..models.encodings import ENCODINGS

    return [*ENCODINGS, *(CUDA_ALTERNATIVES if device.startswith("cuda") else CPU_ALTERNATIVES)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile", default="cpu", help=f"train profile whose model is timed: {', '.join(profile_names('train'))}"
    )
    p.add_argument("--pe", nargs="*", default=None, help="entries pe[@backend]; rope is added (default: every "
                   "encoding, and on CUDA the alternatives fire/t5/kerple@blocked|flex|eager, cope@eager|recompute, "
                   "tape/pope@triton)")  # fmt: skip
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--batch_size", type=int, default=None, help="default: the profile's")
    p.add_argument("--seq_len", type=int, default=None, help="default: the profile's")
    p.add_argument("--autocast", default=None, choices=["bf16", "none"], help="default: bf16 on CUDA, none on CPU")
    p.add_argument("--steps", type=int, default=10, help="timed steps per entry (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (compilation)")
    p.add_argument("--entry_seconds", type=float, default=60.0, help="stop timing an entry after this (>= 1 step)")
    p.add_argument("--peak_flops", type=float, default=None, help="FLOP/s of the device (default: 989e12 on "
                   "H100/H200, none elsewhere)")  # fmt: skip
    p.add_argument("--compile", default="auto", choices=["auto", "on", "off"], help="the step's path, as "
                   "peeval train's --compile: auto (default) compiles on CUDA (torch.compile + fused AdamW), "
                   "not on the CPU")  # fmt: skip
    p.add_argument("--linear_loss", default="logits", choices=list(LINEAR_LOSSES), help="how every entry's "
                   "loss meets lm_head (config.linear_loss): logits, chunked, liger (CUDA: peeval[cuda])")  # fmt: skip
    p.add_argument("--json", default=None, help="write the rows here (after every entry)")
    p.add_argument("--md", default=None, help="write the markdown table here (after every entry)")


def check_args(a: argparse.Namespace) -> None:
    """Every option before anything runs or is written: a ValueError naming the option (one line, exit 2)."""
    from ..registry import ATTN_BACKENDS, encoding_names

    for name, low in (("steps", 1), ("warmup", 0), ("batch_size", 1), ("seq_len", 1)):
        v = getattr(a, name)
        if v is not None and v < low:
            raise ValueError(f"--{name} {v}: allowed an integer >= {low}")
    if a.entry_seconds <= 0 or (a.peak_flops is not None and a.peak_flops <= 0):
        raise ValueError("--entry_seconds and --peak_flops: allowed a number > 0")
    known = set(encoding_names())
    for entry in a.pe or []:
        pe, _, backend = entry.partition("@")
        if pe not in known or (backend and backend not in ATTN_BACKENDS):
            raise ValueError(f"--pe {entry!r}: allowed pe[@backend], pe one of {', '.join(sorted(known))}, backend "
                             f"one of {', '.join(ATTN_BACKENDS)}")  # fmt: skip
    if a.device is not None:
        import torch

        try:
            dev = torch.device(a.device)
        except RuntimeError:
            raise ValueError(f"--device {a.device!r}: allowed cpu, cuda or cuda:N") from None
        if dev.type not in ("cpu", "cuda") or (dev.type == "cuda" and not torch.cuda.is_available()):
            raise ValueError(f"--device {a.device!r}: allowed cpu{', cuda or cuda:N' * torch.cuda.is_available()}")
    if a.linear_loss == "liger":  # CUDA only, and from the cuda extra: said before any entry runs
        import importlib.util

        import torch

        if not (a.device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda"):
            raise ValueError("--linear_loss liger: runs on CUDA only (allowed on the CPU: logits, chunked)")
        if importlib.util.find_spec("liger_kernel") is None:
            raise ValueError("--linear_loss liger needs liger-kernel: pip install 'peeval[cuda]'")
    profile_settings(a.profile)  # an unknown profile: its own one line
    from .._io.outputs import check_output_file

    if a.json:  # never over weights, a store or a user's file: only a report of its own kind
        check_output_file(a.json, "--json", "bench", inputs=[a.md] if a.md else [])
    if a.md:
        check_output_file(a.md, "--md", "markdown", inputs=[a.json] if a.json else [])


def run(a: argparse.Namespace) -> list[dict]:
    import torch

    check_args(a)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")  # the fallback lines
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    prof = profile_settings(a.profile)
    batch, seq_len = a.batch_size or prof["batch_size"], a.seq_len or prof["seq_len"]
    autocast = a.autocast or ("bf16" if device.startswith("cuda") else "none")
    entries = list(dict.fromkeys(["rope", *(a.pe if a.pe else default_entries(device))]))
    peak = peak_flops(device, a.peak_flops)
    compiled = a.compile == "on" or (a.compile == "auto" and device.startswith("cuda"))
    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"
    shape = ", ".join(f"{k}={prof[k]}" for k in SHAPE_KEYS[:5])
    header = (f"training step (forward + backward + AdamW), profile {a.profile}: {shape}, vocab {prof['vocab_size']}, "
              f"batch {batch} x {seq_len} tokens; device {name}, autocast {autocast}, threads "
              f"{torch.get_num_threads()}, torch {torch.__version__}, {'compiled' if compiled else 'eager'}, "
              f"linear_loss {a.linear_loss}; peak "
              f"{f'{peak:.3g} FLOP/s' if peak else 'none assumed'}")  # fmt: skip
    print(header, flush=True)
    rows: list[dict] = []
    for entry in entries:
        try:
            row = time_entry(entry, prof, batch=batch, seq_len=seq_len, device=device, autocast=autocast,
                             steps=a.steps, warmup=a.warmup, entry_seconds=a.entry_seconds,
                             compiled=compiled, linear_loss=a.linear_loss)  # fmt: skip
        except torch.OutOfMemoryError as e:
            row = {"entry": entry, "error": f"out of memory: {' '.join(str(e).split())[:160]}"}
        except Exception as e:  # one entry's failure is a row; the others still run
            row = {"entry": entry, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        rows.append(row)
        finish(rows, peak)
        done = (f"{1000 * row['step_s']:.1f} ms/step ({row.get('ratio_to_rope') or 0:.2f}x rope), ran "
                f"{','.join(row['backends'])}" if "step_s" in row else row["error"])  # fmt: skip
        print(f"  {entry}: {done}", flush=True)
        if a.json:
            atomic_write_text(a.json, dumps_json({"header": header, "rows": rows}, indent=1))
        if a.md:
            atomic_write_text(a.md, stamp_markdown(format_table(rows, header) + "\n", "peeval bench --md"))
    print(format_table(rows, header), flush=True)
    return rows
