"""``peeval eval --like <profile>``: score your own checkpoint with exactly the protocol of a published
profile's pretrained models (leaderboard/published/<profile>/), so its row fills the same columns of that board.

The settings are read from the published runs themselves (their results.json: tasks, ``--metadata`` with the
perplexity lengths, targets and skip, ``--limit``, ``--seed``, few-shot), never from today's parameter files,
which may have moved since the profile ran; the documents each task read are checked against the published
runs' ``documents_sha256`` after the evaluation, before anything is written (another mirror would score other
text under the same column names).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

#: the published profiles of a source checkout (``leaderboard/published/<profile>/``)
PUBLISHED = Path(__file__).resolve().parent.parent.parent / "leaderboard" / "published"
#: the runs whose protocol a checkpoint of yours takes: the profile's pretrained language models
KIND = "pretrain"


class LikeError(ValueError):
    """A ``--like`` that cannot be honoured: one line, exit 2, nothing written."""


@dataclass(frozen=True)
class Protocol:
    """What a published profile's pretrained models were scored with."""

    profile: str
    tasks: tuple[str, ...]
    metadata: dict
    limit: float | None
    seed: int
    num_fewshot: int | None
    documents: dict[str, list[str]]  # task -> the documents_sha256 of each dataset it read
    runs: int
    board: dict = field(default_factory=dict)  # what its models are: see :func:`board_models`
    mirror_reads: dict = field(default_factory=dict)  # task -> the data mirror's folders it read (local stand-ins)

    def describe(self) -> str:
        lengths = self.metadata.get("lengths")
        return (f"--like {self.profile}: tasks {','.join(self.tasks)}, --metadata {json.dumps(self.metadata)}, "
                f"--limit {self.limit}, --seed {self.seed} (as its {self.runs} published {KIND} runs"
                + (f"; lengths {lengths}" if lengths else "") + ")")  # fmt: skip


def _folder(profile: str) -> Path:
    path = Path(profile)
    if path.is_dir() and (path / "SOURCE.json").is_file():
        return path
    folder = PUBLISHED / profile
    if not (folder / "SOURCE.json").is_file():
        have = sorted(p.parent.name for p in PUBLISHED.glob("*/SOURCE.json"))
        raise LikeError(f"--like {profile}: no published profile of that name: allowed {', '.join(have) or 'none'} "
                        "(leaderboard/published/ of a source checkout) or a published folder's path")  # fmt: skip
    return folder


def _tasks(results: dict) -> tuple[str, ...]:
    """The tasks a run asked for: lm-eval's groups stand for their subtasks."""
    groups = results.get("group_subtasks") or {}
    inner = {t for subs in groups.values() for t in subs}
    return tuple(sorted(t for t in results.get("results", {}) if t not in inner))


def published_protocol(profile: str) -> Protocol:
    """The one protocol every pretrained model of ``profile`` was scored with; runs that disagree (two suites
    with different settings) are an error naming the difference, never a silent pick."""
    folder = _folder(profile)
    name = json.loads((folder / "SOURCE.json").read_text(encoding="utf-8")).get("profile") or folder.name
    seen: dict[str, tuple] = {}
    documents: dict[str, set[str]] = {}
    mirror_reads: dict[str, set[str]] = {}
    for path in sorted((folder / "results" / KIND).glob("*/*/results.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        pv = r.get("peeval") or {}
        meta = dict((pv.get("protocol") or {}).get("metadata") or {})
        shots = {v for v in (r.get("n-shot") or {}).values()}
        key = (_tasks(r), json.dumps(meta, sort_keys=True), pv.get("limit"), pv.get("seed", 0),
               max(shots) if shots else None)  # fmt: skip
        seen.setdefault(json.dumps(key), (key, path))
        for task, reads in (pv.get("data") or {}).items():
            for read in reads:
                documents.setdefault(task, set()).add(read.get("documents_sha256"))
                if read.get("source") == "mirror" and isinstance(read.get("location"), str):
                    mirror_reads.setdefault(task, set()).add(read["location"])
    if not seen:
        raise LikeError(f"--like {profile}: {folder} holds no {KIND} runs (results/{KIND}/<run>/<suite>/results.json)")
    if len(seen) > 1:
        (a, pa), (b, pb) = list(seen.values())[:2]
        raise LikeError(f"--like {profile}: its {KIND} runs were scored with different settings ({pa.parent} {a} vs "
                        f"{pb.parent} {b}): give --tasks / --metadata yourself")  # fmt: skip
    (tasks, meta, limit, seed, shots), _ = next(iter(seen.values()))
    runs = len(list((folder / "results" / KIND).glob("*/*/results.json")))
    docs = {t: sorted(d for d in v if d) for t, v in documents.items()}
    mirror = {t: sorted(v) for t, v in mirror_reads.items()}
    return Protocol(name, tasks, json.loads(meta), limit, seed, shots or None, docs, runs, board_models(folder), mirror)


def check_mirror(proto: Protocol) -> None:
    """The board's documents are here before anything is scored: a task that read the data mirror's stand-in (the
    Gutenberg books for PG-19) cannot be matched from the hub (the real PG-19 is other documents), so a missing
    mirror is one line at once, never a hub retry for data the board did not read (issue 68)."""
    from peeval.data import mirror_root

    root = mirror_root()
    for task, folders in sorted(proto.mirror_reads.items()):
        missing = [f for f in folders if root is None or not (root / f).is_dir()]
        if missing:
            where = f"the mirror {root} does not hold it" if root else "no data mirror is set or beside the repository"
            raise LikeError(f"--like {proto.profile}: its {task} runs read the data mirror's {missing[0]} (the board's "
                            f"own documents, not the hub's), but {where}: set PEEVAL_DATA_MIRROR to a mirror that "
                            "does, or fetch it with `peeval data`; nothing scored")  # fmt: skip


def board_models(folder: Path) -> dict:
    """What the board's pretrained models are, from their own records: ``params`` (their sizes),
    ``training_length``, ``vocab_size`` and ``tokenizer`` (its kind, e.g. bpe) from each train_summary.json,
    ``tokenizer_hash`` from each results.json (``peeval.tokenizer_hash``), each a sorted list of what occurs."""
    seen: dict[str, set] = {
        k: set() for k in ("params", "training_length", "vocab_size", "tokenizer", "tokenizer_hash")
    }
    for path in sorted((folder / "checkpoints" / KIND).glob("*/train_summary.json")):
        s = json.loads(path.read_text(encoding="utf-8"))
        settings = s.get("settings") if isinstance(s.get("settings"), dict) else {}
        for key, value in (("params", s.get("params")), ("training_length", s.get("training_length")),
                           ("vocab_size", settings.get("vocab_size")), ("tokenizer", settings.get("tokenizer")),
                           ("tokenizer_hash", s.get("tokenizer_hash"))):  # fmt: skip
            if value is not None:
                seen[key].add(value)
    for path in sorted((folder / "results" / KIND).glob("*/*/results.json")):
        h = (json.loads(path.read_text(encoding="utf-8")).get("peeval") or {}).get("tokenizer_hash")
        if isinstance(h, str):
            seen["tokenizer_hash"].add(h)
    return {k: sorted(v) for k, v in seen.items()}


def comparability(
    proto: Protocol, params: int | None, training_length: int | None, vocab: int | None, tokenizer_hash: str | None
) -> str:
    """One line, said before scoring: what differs between the checkpoint and the board's pretrained models
    (tokenizer, size, training length) and what to run to match; or that all three match."""
    board, diff = proto.board, []
    hashes, vocabs = board.get("tokenizer_hash") or [], board.get("vocab_size") or []
    if (hashes and tokenizer_hash not in hashes) or (not hashes and vocabs and vocab not in vocabs):
        mine = (f"{vocab:,} tokens" if vocab else "?") + (f", hash {tokenizer_hash}" if tokenizer_hash else "")
        theirs = "/".join(board.get("tokenizer") or []) + " " + "/".join(f"{v:,}" for v in vocabs) + " tokens"
        theirs += f", hash {'/'.join(hashes)}" if hashes else ""
        diff.append(f"tokenizer ({mine} vs the board's {theirs.strip()}: compared by bits per byte, on its own chart)")
    sizes = board.get("params") or []
    if sizes and params not in sizes:
        diff.append(f"size ({params:,} parameters vs {' / '.join(f'{p:,}' for p in sizes)})" if params else "size")
    lengths = board.get("training_length") or []
    if lengths and training_length not in lengths:
        diff.append(f"training length ({training_length} vs {'/'.join(map(str, lengths))})")
    if not diff:
        return f"--like {proto.profile}: tokenizer, size and training length as the board's pretrained models"
    return (f"--like {proto.profile}: differs from the board's pretrained models in " + "; ".join(diff)
            + f"; to match, run `peeval tokenizer --profile {proto.profile} --out TOK` and `peeval train --profile "
            f"{proto.profile} --tokenizer TOK --pe PE --out CKPT`")  # fmt: skip


#: lm-eval flags peeval eval passes through that change which examples a task scores or how it prompts them
LIKE_REFUSES = ("samples", "apply_chat_template", "system_instruction", "fewshot_as_multiturn", "gen_kwargs",
                "predict_only")  # fmt: skip


def apply(args) -> Protocol:
    """Fill ``args`` (peeval eval's) from the published protocol; an option that would change it is refused."""
    proto = published_protocol(args.like)
    for flag, value in (("--tasks", args.tasks), ("--metadata", args.metadata), ("--limit", args.limit),
                        ("--num_fewshot", args.num_fewshot)):  # fmt: skip
        if value is not None:
            raise LikeError(f"{flag}: --like {args.like} sets it (as the published runs: {proto.describe()}); "
                            f"drop {flag}, or drop --like")  # fmt: skip
    for flag in LIKE_REFUSES:  # lm-eval's own flags that change which examples are scored, or how
        if (getattr(args, "lm_eval_flags", None) or {}).get(flag) not in (None, False, ""):
            raise LikeError(f"--{flag}: it changes what --like {args.like} scores (as the published runs: "
                            f"{proto.describe()}); drop --{flag}, or drop --like")  # fmt: skip
    if args.seed not in (0, proto.seed):
        raise LikeError(f"--seed {args.seed}: --like {args.like} scores with --seed {proto.seed}; drop --seed")
    check_mirror(proto)
    args.tasks = list(proto.tasks)
    args.metadata = json.dumps(proto.metadata) if proto.metadata else None
    args.limit = proto.limit
    args.seed = proto.seed
    args.num_fewshot = proto.num_fewshot
    args.model = args.model or "peeval"
    return proto


def check_documents(proto: Protocol, data: dict) -> None:
    """The documents this run read are the ones the published runs read (same sha256 per task)."""
    for task, want in proto.documents.items():
        got = sorted({read.get("documents_sha256") for read in data.get(task, [])} - {None})
        if want and got != want:
            raise LikeError(f"--like {proto.profile}: {task} read other documents than the published runs "
                            f"(documents_sha256 {', '.join(got) or 'none'} vs {', '.join(want)}): another data mirror? "
                            "nothing written (peeval data verifies the mirror)")  # fmt: skip
