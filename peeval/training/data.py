"""Training data: the corpus split, the tokenizers (trained BPE or the mirror's GPT-2), packing into
blocks, and ``Batches``, the one source of micro-batches the loop reads (text blocks or diagnostic rows)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import torch

from .._io import save_dir_atomically
from .profiles import get_profile

EOS = "<|endoftext|>"


def load_corpus(corpus: str, train_chars: int | None, val_docs: int, val_chars: int | None) -> tuple[list, list]:
    """(train texts, validation texts) of a text dataset with a ``text`` column.

    The last ``val_docs`` documents (in the dataset's order) are held out for validation;
    the training texts are the others, truncated to ``train_chars`` characters in total
    (documents taken in order, so the budget is the same for every encoding).
    """
    from ..data import load_dataset

    if os.path.isdir(corpus) and not (Path(corpus) / "README.md").exists():
        texts = [p.read_text(encoding="utf-8") for p in sorted(Path(corpus).glob("*.txt"))]
    else:
        ds = load_dataset(corpus, split="train")
        if "text" not in ds.column_names:
            raise ValueError(f"corpus {corpus!r} has no 'text' column (columns: {ds.column_names})")
        texts = list(ds["text"])
    if len(texts) <= val_docs:
        raise ValueError(f"corpus {corpus!r} has {len(texts)} documents: need more than val_docs={val_docs}")
    train, val = texts[: len(texts) - val_docs], texts[len(texts) - val_docs :]
    return _truncate(train, train_chars), _truncate(val, val_chars)


def _truncate(texts: list[str], n_chars: int | None) -> list[str]:
    if n_chars is None:
        return texts
    out, left = [], int(n_chars)
    for t in texts:
        if left <= 0:
            break
        out.append(t[:left])
        left -= len(out[-1])
    return out


def gpt2_tokenizer():
    """The mirror's GPT-2 BPE (transformers 5 wants ``vocab=``/``merges=`` paths, see the mirror README)."""
    from transformers import GPT2TokenizerFast

    from ..data import mirror_root

    root = mirror_root()
    d = root / "tokenizers" / "gpt2" if root else None
    if d is None or not (d / "vocab.json").exists():
        raise FileNotFoundError(f"GPT-2 tokenizer files not found in the data mirror ({d}); set PEEVAL_DATA_MIRROR")
    tok = GPT2TokenizerFast(vocab=str(d / "vocab.json"), merges=str(d / "merges.txt"))
    tok.pad_token = tok.eos_token
    return tok


def train_bpe(texts: list[str], vocab_size: int):
    """A byte-level BPE trained on ``texts`` with the ``tokenizers`` library (deterministic:
    same texts and vocabulary size -> the same vocabulary and merges)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=EOS, eos_token=EOS, unk_token=EOS, pad_token=EOS)


#: files of a saved tokenizer (transformers' names) and of a model: its config, its weights whole or sharded
#: (``model-00001-of-00002.safetensors``, ``pytorch_model.bin.index.json``), an adapter, a GGUF file
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json")
MODEL_FILES = ("config.json", "adapter_config.json", "generation_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt", ".index.json")


def model_files(folder: Path) -> list[str]:
    """The files of ``folder`` that make it a model (its config, weights of any shard, an adapter)."""
    if not folder.is_dir():
        return []
    names = sorted(p.name for p in folder.iterdir() if p.name in MODEL_FILES or p.name.endswith(WEIGHT_SUFFIXES))
    return sorted(names, key=lambda n: n in MODEL_FILES)  # the weights first: the error names them


def build_tokenizer(out_dir: str | os.PathLike, profile: str = "cpu", *, overwrite: bool = False, **overrides):
    """Build the profile's tokenizer (``bpe``: trained on the profile's training text; ``gpt2``:
    the mirror's files) and save it in ``out_dir``. Returns the tokenizer. A folder holding a tokenizer
    is replaced only with ``overwrite``; one holding model weights never (its tokenizer is the one its
    weights were trained with)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out_dir}: is a file, allowed a folder")
    weights = model_files(out)
    if weights:
        raise ValueError(
            f"--out {out_dir} holds a model ({weights[0]}): its tokenizer is the one it was trained with and is "
            "not replaced (not even with --overwrite); choose another folder"
        )
    tok_files = [f for f in TOKENIZER_FILES if (out / f).exists()]
    if tok_files and not overwrite:
        raise ValueError(
            f"--out {out_dir} already holds a tokenizer ({', '.join(tok_files)}): pass --overwrite to replace it, "
            "or choose another folder"
        )
    prof = get_profile("train", profile, overrides)
    if prof["tokenizer"] not in ("bpe", "gpt2"):
        raise ValueError(f"tokenizer={prof['tokenizer']!r}: allowed 'bpe' or 'gpt2'")
    tok = profile_tokenizer(prof)
    save_dir_atomically(Path(out_dir), tok.save_pretrained)
    return tok


def load_tokenizer(path: str | os.PathLike):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load the tokenizer in {str(path)!r}: {e}") from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def pack(texts: list[str], tok, seq_len: int) -> torch.Tensor:
    """Tokenise, join documents with EOS, cut into (n_blocks, seq_len) blocks (tail dropped)."""
    ids: list[int] = []
    for t in texts:
        ids.extend(tok(t, add_special_tokens=False)["input_ids"])
        ids.append(tok.eos_token_id)
    n = len(ids) // seq_len
    if n == 0:
        raise ValueError(f"the corpus gives {len(ids)} tokens: fewer than one block of seq_len={seq_len}")
    return torch.tensor(ids[: n * seq_len], dtype=torch.long).view(n, seq_len)


#: where packed corpora are kept between runs; ``off`` turns the cache off
CACHE_ENV = "PEEVAL_CACHE"


def cache_root() -> Path | None:
    """``$PEEVAL_CACHE``, else ``$XDG_CACHE_HOME/peeval`` (``~/.cache/peeval``); None when it says ``off``."""
    root = os.environ.get(CACHE_ENV)
    if root is not None:
        return None if root.strip().lower() in ("off", "0", "") else Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "peeval"


def pack_cached(texts: list[str], tok, seq_len: int) -> torch.Tensor:
    """``pack``, read back when these texts were packed with this tokenizer and length before: every training run
    of a profile tokenises the same corpus (7 M characters on cpu: 8 s a run). The file name hashes the texts
    themselves, the tokenizer's fingerprint, its EOS id and ``seq_len``, so a changed corpus or tokenizer never
    meets a stale file; it is written atomically (the pipeline trains side by side), and one that cannot be read
    is packed again. ``PEEVAL_CACHE=off``: no cache."""
    root = cache_root()
    if root is None:
        return pack(texts, tok, seq_len)
    h = hashlib.sha256(f"pack v1|{tokenizer_fingerprint(tok)}|{tok.eos_token_id}|{seq_len}|{len(texts)}".encode())
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little") + b)
    path = root / "packed" / f"{h.hexdigest()[:32]}.pt"
    if path.is_file():
        try:
            blocks = torch.load(path, weights_only=True)
            if blocks.dim() == 2 and blocks.shape[1] == seq_len:
                return blocks.long()
        except Exception as e:  # a truncated or foreign file: pack again and replace it
            print(f"peeval: cached corpus blocks {path} unreadable ({type(e).__name__}): tokenising again")
    blocks = pack(texts, tok, seq_len)
    small = blocks.to(torch.int32) if int(blocks.max()) < 2**31 else blocks
    from .state import atomic_torch_save  # a full disk: torch's RuntimeError made an OSError

    try:
        atomic_torch_save(small, path)
    except OSError as e:  # a read-only or full cache folder costs the time, never the run
        print(f"peeval: cannot cache corpus blocks in {path.parent} ({e}); set {CACHE_ENV} to a writable folder")
    return blocks


def unigram_ppl(train_blocks: torch.Tensor, val_blocks: torch.Tensor, vocab_size: int) -> float:
    """Validation perplexity of the add-one-smoothed unigram distribution of the training
    tokens: the baseline a trained model must beat by far."""
    counts = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double() + 1.0
    logp = (counts / counts.sum()).log()
    # the model predicts tokens 1..N-1 of each block: score the same tokens
    return math.exp(-logp[val_blocks[:, 1:].flatten()].mean().item())


def profile_tokenizer(prof: dict):
    """The tokenizer a profile builds when no tokenizer folder is given (as ``build_tokenizer``)."""
    if prof["tokenizer"] == "gpt2":
        return gpt2_tokenizer()
    train, _ = load_corpus(prof["corpus"], prof["train_chars"], prof["val_docs"], prof["val_chars"])
    return train_bpe(train, prof["vocab_size"])


def tokenizer_fingerprint(tok) -> str:
    """A short hash of the tokenizer's vocabulary and rules (a resumed run must tokenise alike)."""
    backend = getattr(tok, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tok.get_vocab().items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Batches:
    """Where the micro-batches come from: packed text blocks, or padded diagnostic examples."""

    def __init__(self, train: dict[str, torch.Tensor], val: dict[str, torch.Tensor]):
        self.train, self.val = train, val
        self.n = train["input_ids"].shape[0]

    def get(self, idx: torch.Tensor, split: str = "train") -> dict[str, torch.Tensor]:
        src = self.train if split == "train" else self.val
        return {k: v[idx] for k, v in src.items()}
