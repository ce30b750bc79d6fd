"""Stability under position shifts (TAPE appendix D, table 8), per layer.

Two shifts of an input sequence x (N tokens) are compared with the original:

- ``add_tokens``: three [BOS] tokens prepended (positions 0..N+2, x at 3..N+2);
- ``shift_ids``:  the same tokens with position ids starting at 3 instead of 0.

Two per-layer quantities, restricted to the original tokens (queries and keys of x):

- ``attn_diff@<shift>@<layer>``: how much attention moved, as the total-variation distance
  between each query's attention distribution before and after the shift,
  ½·Σ_j |A'_ij − A_ij| (mass the shifted input puts on the extra BOS keys counts as moved),
  averaged over batch, heads and queries; in [0, 1]. The paper prints it ×10⁻² and does not
  give the formula: this is our reading (it matches the paper's magnitudes: RoPE loses about
  0.09 of its attention to three BOS tokens, and ~0 under a pure id shift).
- ``pe_dot_diff@<shift>@<layer>``: the relative change, in %, of the positional-embedding dot
  products the layer's attention uses, P_ij = e_i e_jᵀ per head and block (Eq. 6; an L×L
  matrix; for RoPE the 2×2 rotation by (i−j)θ): 100·‖P' − P‖_F / ‖P‖_F. Defined for the
  encodings with an explicit positional state, ``tape`` (its per-layer E) and ``rope``
  (the same state, never updated); other encodings get only ``attn_diff``.

Layers are numbered from 1 as in the paper. Proposition 4.2: with RoPE initialisation and
O(R)-equivariant updates, ``shift_ids`` leaves both at fp32 noise for any weights; TAPE
``equivariant=False`` does not.

``python -m peeval.evaluation.shift_stability --checkpoint DIR --out DIR`` writes an lm-eval-shaped
``results.json`` (task ``peeval_shift_stability``, with ``peeval`` provenance) that
``leaderboard.ingest`` stores like any other run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from .._io import atomic_write_text, dumps_json
from .._io.outputs import finish_manifest
from ..install.versions import cpu_identity
from ..records import PROVENANCE_KEY, SHIFTS, Provenance, mean_stderr, result_key, shift_metric, stderr_key
from ..records import SHIFT_TASK as TASK

N_SHIFT = 3


@torch.no_grad()
def forward_maps(model, input_ids: torch.Tensor, position_ids: torch.Tensor):
    """Per-layer attention maps (B, H, N, N) and positional states (or None) of one forward."""
    with model.model.pe.recording_states() as states:
        out = model(input_ids=input_ids, position_ids=position_ids, output_attentions=True, use_cache=False)
    attn = [a.float() for a in out.attentions]
    return attn, (states if len(states) == len(attn) else None)


def tv_distance(a_shift: torch.Tensor, a_orig: torch.Tensor, extra: int) -> float:
    """Mean over (batch, heads, queries of x) of ½·Σ_j |A'_ij − A_ij|; A' has ``extra`` leading keys."""
    a_s = a_shift[:, :, extra:, :]  # queries of x
    moved = a_s[..., :extra].sum(-1) + (a_s[..., extra:] - a_orig).abs().sum(-1)
    return float(0.5 * moved.mean())


def dot_products(e: torch.Tensor) -> torch.Tensor:
    """P_ij = e_i e_jᵀ per block: (B, H, N, L, R, M) -> (B, H, M, N, N, L, L)."""
    return torch.einsum("bhilrm,bhjkrm->bhmijlk", e, e)


def pe_dot_diff(e_shift: torch.Tensor, e_orig: torch.Tensor, extra: int) -> float:
    """100·‖P' − P‖_F / ‖P‖_F over the tokens of x, one head at a time (P is N²·M·L² per head)."""
    num = den = 0.0
    for h in range(e_orig.shape[1]):
        p = dot_products(e_orig[:, h : h + 1].double())
        ps = dot_products(e_shift[:, h : h + 1, extra:].double())
        num += float(((ps - p) ** 2).sum())
        den += float((p**2).sum())
    return 100.0 * math.sqrt(num / den) if den > 0 else float("nan")


def shift_stability(model, input_ids: torch.Tensor, bos_id: int | None = None, shift: int = N_SHIFT) -> dict:
    """``{metric: value}`` for both shifts and every layer (see the module docstring)."""
    model.eval()
    b, n = input_ids.shape
    dev = input_ids.device
    pos = torch.arange(n, device=dev)[None].expand(b, n)
    bos = bos_id if bos_id is not None else getattr(model.config, "bos_token_id", None)
    if bos is None:
        raise ValueError("shift_stability: the model config has no bos_token_id; pass bos_id")
    base_attn, base_states = forward_maps(model, input_ids, pos)
    with_bos = torch.cat([torch.full((b, shift), int(bos), dtype=input_ids.dtype, device=dev), input_ids], 1)
    add_tokens, shift_ids = SHIFTS
    variants = {
        add_tokens: (with_bos, torch.arange(n + shift, device=dev)[None].expand(b, n + shift), shift),
        shift_ids: (input_ids, pos + shift, 0),
    }
    out: dict[str, float] = {}
    for name, (ids, p, extra) in variants.items():
        attn, states = forward_maps(model, ids, p)
        for layer, (a_s, a_o) in enumerate(zip(attn, base_attn, strict=True), start=1):
            out[shift_metric("attn_diff", name, layer)] = tv_distance(a_s, a_o, extra)
            if states is not None and base_states is not None:
                out[shift_metric("pe_dot_diff", name, layer)] = pe_dot_diff(
                    states[layer - 1], base_states[layer - 1], extra
                )
    return out


def measure_each(model, sequences: list[torch.Tensor], bos_id: int | None = None) -> dict[str, list[float]]:
    """Every metric of every sequence, one sequence at a time (the run's samples)."""
    from tqdm.auto import tqdm

    per: dict[str, list[float]] = {}
    for ids in tqdm(sequences, desc="shift stability", disable=len(sequences) < 4):
        for k, v in shift_stability(model, ids[None] if ids.dim() == 1 else ids, bos_id).items():
            per.setdefault(k, []).append(v)
    return per


def summarise(per: dict[str, list[float]]) -> dict[str, tuple[float, float, int]]:
    """Mean, stderr across sequences and n for every metric."""
    out = {}
    for k, vals in per.items():
        mean, se = mean_stderr(vals)
        out[k] = (mean, float("nan") if se is None else se, len(vals))
    return out


def measure(model, sequences: list[torch.Tensor], bos_id: int | None = None) -> dict[str, tuple[float, float, int]]:
    """Mean, stderr across sequences and n for every metric, one sequence at a time."""
    return summarise(measure_each(model, sequences, bos_id))


#: the run's samples: one line per sequence, every metric's value under its name (lm-eval's samples layout), from
#: which ingest recomputes each mean (issue 66)
SAMPLES_FILE = f"samples_{TASK}.jsonl"


def samples_lines(per: dict[str, list[float]]) -> str:
    n = max((len(v) for v in per.values()), default=0)
    lines = []
    for i in range(n):
        values = {k: per[k][i] for k in sorted(per) if i < len(per[k])}
        lines.append(dumps_json({"doc_id": i, "filter": "none", "metrics": list(values), **values}))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- command line
def _sequences(tokenizer, n_seq: int, length: int, seed: int) -> list[torch.Tensor]:
    """``n_seq`` windows of ``length`` tokens from the PG-19 test set (mirror: Gutenberg)."""
    from ..data import HUB_COPIES, load_dataset

    # the mirror's stand-in offline, else PG-19's test split through its default parquet copy (the hub's own
    # repository is a loading script datasets 5 refuses)
    docs = load_dataset("deepmind/pg19", split="test", copy=next(iter(HUB_COPIES["pg19"].values())))
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in torch.randperm(len(docs), generator=g).tolist():
        ids = tokenizer(docs[i]["text"][: 20 * length], add_special_tokens=False)["input_ids"]
        if len(ids) >= length:
            start = int(torch.randint(0, len(ids) - length + 1, (1,), generator=g))
            out.append(torch.tensor(ids[start : start + length]))
        if len(out) == n_seq:
            break
    if not out:
        raise ValueError(f"shift_stability: no PG-19 document has {length} tokens")
    return out


def results_document(metrics: dict, checkpoint: str, model, args) -> dict:
    """lm-eval's results.json shape plus the ``peeval`` provenance ``leaderboard.ingest`` needs."""
    import peeval

    from .provenance import checkpoint_hash, git_commit, library_versions, now_iso

    res: dict = {"alias": TASK}
    for k, (mean, se, _n) in sorted(metrics.items()):
        res[result_key(k)] = mean
        res[stderr_key(k)] = se if math.isfinite(se) else "N/A"
    n = max((v[2] for v in metrics.values()), default=0)
    cfg = model.config
    prov = Provenance(
        peeval_version=peeval.__version__,
        git_commit=git_commit(),
        model="peeval",
        model_args={"pretrained": checkpoint},
        checkpoint=checkpoint,
        checkpoint_sha256=checkpoint_hash(checkpoint),
        pe=getattr(cfg, "pe", None),
        pe_options=getattr(cfg, "pe_options", None),
        rope_parameters=getattr(cfg, "rope_parameters", None),
        training_length=getattr(cfg, "max_position_embeddings", None),
        max_length=args.length + N_SHIFT,
        protocol={"shift_stability": f"{n} PG-19 windows of {args.length} tokens", "metadata": vars(args)},
        dtype=str(next(model.parameters()).dtype),
        seed=args.seed,
        limit=None,
        device="cpu",
        world_size=1,
        torch_threads=torch.get_num_threads(),
        versions=library_versions(("torch", "transformers", "lm_eval")),
        command=sys.argv,
        date=now_iso(),
        cpu=cpu_identity(),
    )
    return {
        "results": {TASK: res},
        "n-samples": {TASK: {"original": n, "effective": n}},
        "config": {"model": "peeval", "model_args": f"pretrained={checkpoint}"},
        PROVENANCE_KEY: prov.to_json(),
    }


#: the writer named in the manifest shift stability leaves in ``--out`` (``_io.outputs``), and the files it writes
WRITER = "shift stability"
WRITES = ("results.json", "samples_*.jsonl")


def _check_out(out: Path, ckpt: str) -> None:
    """Refuse (OutputRefused, one line) an ``--out`` that is or lies in the checkpoint, or holds a results.json or
    samples this module did not write: its own earlier output is known by the manifest it left, never by content."""
    from .._io.outputs import MANIFEST, OutputRefused, check_output_dir, holds_nothing_of, is_written_by

    check_output_dir(out, "--out", lambda p: True, "", inputs=[ckpt], whole=False)
    if out.is_dir() and not (is_written_by(out, WRITER, WRITES) or holds_nothing_of(out, WRITES)):
        raise OutputRefused(f"--out {out}: holds a results.json or samples shift stability did not write (no "
                            f"{MANIFEST} of it: another run's, or edited); it is never replaced (choose another "
                            "folder)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m peeval.evaluation.shift_stability", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--checkpoint", required=True, help="a peeval checkpoint directory (rope or tape for pe_dot_diff)")
    ap.add_argument("--out", required=True, help="output directory: results.json is written there")
    ap.add_argument("--sequences", type=int, default=8, help="number of PG-19 windows (default 8)")
    ap.add_argument("--length", type=int, default=128, help="tokens per window (default 128)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import peeval.models  # noqa: F401  (registers model_type "peeval")
    from peeval.models.loading import load_complete

    ckpt = args.checkpoint
    if not (Path(ckpt) / "config.json").is_file():
        ap.error(f"--checkpoint {ckpt}: no config.json (not a checkpoint directory)")
    try:  # never into the checkpoint, never over another command's results.json (an evaluation's)
        _check_out(Path(args.out), ckpt)
        model = load_complete(AutoModelForCausalLM, ckpt, dtype=torch.float32)
    except ValueError as e:  # an incomplete checkpoint: one line, nothing written
        print(f"shift stability: error: {e}", file=sys.stderr)
        return 2
    tok = AutoTokenizer.from_pretrained(ckpt)
    bos = model.config.bos_token_id if model.config.bos_token_id is not None else tok.bos_token_id
    per = measure_each(model, _sequences(tok, args.sequences, args.length, args.seed), bos)
    metrics = summarise(per)
    doc = results_document(metrics, ckpt, model, args)
    doc[PROVENANCE_KEY]["samples_files"] = [SAMPLES_FILE]  # ingest holds the folder to it (issue 66)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / SAMPLES_FILE, samples_lines(per))
    atomic_write_text(out / "results.json", dumps_json(doc, indent=1, default=str))
    finish_manifest(out, WRITER, WRITES)
    print(f"shift stability: {len(metrics)} metrics in {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
