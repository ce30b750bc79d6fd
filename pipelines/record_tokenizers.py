"""Record, in a published profile's results, the tokenizer each run scored with (issue 68 item 1).

    python pipelines/record_tokenizers.py leaderboard/published/cpu [leaderboard/published/cpu-claims ...]

Results published before ``peeval eval`` recorded ``peeval.tokenizer`` / ``peeval.tokenizer_hash`` carry none, so a
row of the board could not be told from a row on another tokenizer. Each is derived, never guessed, from what the
run's own record names:

- a peeval checkpoint (``model_args.pretrained`` = ``checkpoints/...``, or the pretrained model an extension was
  adapted from): its ``train_summary.json`` names the profile and the tokenizer settings (kind, vocabulary size,
  corpus, training characters); the same tokenizer is rebuilt from the data mirror exactly as ``peeval tokenizer``
  builds it (deterministic), and its vocabulary size must be the summary's;
- the packaged GGUF model (``model_args.gguf_file``): the tokenizer transformers reads from that file;
- a diagnostic run (a task's own vocabulary, no text tokenizer): left without one (no perplexity chart holds it).

Each results.json is rewritten byte-identically but for the two keys (``peeval._io.dumps_json``, indent 1), and
SOURCE.json's sha256 of each file changed is updated, so ``ingest`` still checks the folder whole. Running it
again changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: train_summary settings that decide a profile's text tokenizer (peeval.training.data.profile_tokenizer)
TOKENIZER_SETTINGS = ("tokenizer", "vocab_size", "corpus", "train_chars", "val_docs", "val_chars")


def _summary(folder: Path, checkpoint: str | None) -> dict | None:
    if not checkpoint or Path(checkpoint).is_absolute():
        return None
    path = folder / checkpoint / "train_summary.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _base_checkpoint(folder: Path, prov: dict) -> str | None:
    """The pretrained checkpoint a run's tokenizer is: its own, or (an extension: an adapter over a peeval
    checkpoint) the base its adapt_summary names."""
    args = prov.get("model_args") or {}
    pretrained = args.get("pretrained")
    if _summary(folder, pretrained) is not None:
        return pretrained
    adapter = args.get("adapter")
    if isinstance(adapter, str) and (folder / adapter / "adapt_summary.json").is_file():
        adapt = json.loads((folder / adapter / "adapt_summary.json").read_text(encoding="utf-8"))
        base = adapt.get("base") or adapt.get("pretrained")
        if isinstance(base, str) and _summary(folder, base) is not None:
            return base
    return None


def tokenizer_of(folder: Path, prov: dict, cache: dict) -> dict | None:
    """``{"name", "vocab_size", "hash"}`` of the tokenizer a published run scored with, or None (diagnostics)."""
    from peeval.training.data import profile_tokenizer, tokenizer_fingerprint
    from peeval.training.profiles import get_profile

    args = prov.get("model_args") or {}
    if args.get("gguf_file"):
        key = ("gguf", args["gguf_file"])
        if key not in cache:
            from transformers import AutoTokenizer

            from peeval.models.llama_adapters import smollm2_dir
            from peeval.records import base_model_label

            tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=args["gguf_file"])
            cache[key] = {"name": base_model_label(args["gguf_file"]) or args["gguf_file"], "vocab_size": len(tok),
                          "hash": tokenizer_fingerprint(tok)}  # fmt: skip
        return cache[key]
    base = _base_checkpoint(folder, prov)
    summary = _summary(folder, base) if base else None
    if summary is None or summary.get("task"):  # a diagnostic task's own vocabulary
        return None
    settings = summary.get("settings") or {}
    given = {k: settings.get(k) for k in TOKENIZER_SETTINGS}
    key = ("profile", summary.get("profile"), json.dumps(given, sort_keys=True))
    if key not in cache:
        prof = get_profile("train", str(summary.get("profile")), {k: v for k, v in given.items() if v is not None})
        tok = profile_tokenizer(prof)
        if len(tok) != settings.get("vocab_size"):
            raise SystemExit(
                f"{base}: rebuilt tokenizer has {len(tok)} tokens, its summary says {settings.get('vocab_size')}"
            )
        cache[key] = {
            "name": str(settings.get("tokenizer")),
            "vocab_size": len(tok),
            "hash": tokenizer_fingerprint(tok),
        }
    return cache[key]


def record(folder: Path, cache: dict | None = None) -> list[str]:
    """Add the tokenizer to every results.json of ``folder`` that lacks one; the files changed."""
    from peeval._io import dumps_json

    cache = {} if cache is None else cache
    source_path = folder / "SOURCE.json"
    source = json.loads(source_path.read_text(encoding="utf-8"))
    changed = []
    for path in sorted((folder / "results").rglob("results.json")):
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text)
        prov = doc.get("peeval") or {}
        if prov.get("tokenizer_hash") or (tok := tokenizer_of(folder, prov, cache)) is None:
            continue
        prov["tokenizer"] = {"name": tok["name"], "vocab_size": tok["vocab_size"]}
        prov["tokenizer_hash"] = tok["hash"]
        new = dumps_json(doc, infinity="inf", default=str, indent=1)
        if new != text:
            path.write_text(new, encoding="utf-8")
            rel = path.relative_to(folder).as_posix()
            source["files"][rel] = hashlib.sha256(new.encode("utf-8")).hexdigest()
            changed.append(rel)
    if changed:
        source_path.write_text(json.dumps(source, indent=1) + "\n", encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pipelines/record_tokenizers.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="published profile folders (leaderboard/published/<profile>)")
    args = ap.parse_args(argv)
    cache: dict = {}
    for f in args.folders:
        changed = record(Path(f), cache)
        print(f"{f}: tokenizer recorded in {len(changed)} results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
