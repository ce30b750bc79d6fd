"""Issue 68: your runs on a published board. A row is a run, keyed by what makes it comparable: runs scored with
``--like`` are named by their run name (two TAPE seed 0 runs of other sizes and tokenizers became one row
"tape · 2 seeds"); seeds share a row only when size, tokenizer and training length agree; every published run
records its tokenizer; a row on another tokenizer gets its own perplexity chart and is compared with the board's
RoPE per byte; your rows are in the front page's comparison; adding a row never hides a published value.

The runs of yours here are the published TAPE seed 0 results copied with their provenance changed (the numbers
of a real `peeval eval --like cpu` are what tests/leaderboard/test_your_runs_in_chromium.py scores), so every
expected number below is worked out from the published files themselves."""

import hashlib
import html
import json
import math
import re
from pathlib import Path

import pytest
from conftest import REPO
from helpers.data_mirror import needs_mirror

from leaderboard.ingest import IngestError, ingest
from leaderboard.site import build_site

PUBLISHED_CPU = Path(REPO) / "leaderboard" / "published" / "cpu"
TAPE = PUBLISHED_CPU / "results" / "pretrain" / "tape" / "ppl" / "results.json"
ROPE = [PUBLISHED_CPU / "results" / "pretrain" / r / "ppl" / "results.json" for r in ("rope", "rope-s1", "rope-s2")]
OTHER_TOKENIZER = "0123456789abcdef"  # a 384-token smoke tokenizer's hash (not the board's)
TASK = "peeval_ppl_pg19"


def _yours(root: Path, run: str, *, scale: float, tokenizer: str | None, vocab: int, params: int, trained: int,
           like: str | None = "cpu", kind: str = "pretrain", seed: int = 0) -> Path:  # fmt: skip
    """A run of yours: the published TAPE seed 0 results, its perplexities ``scale`` times, scored from a checkpoint
    of ``params`` parameters trained at ``trained`` tokens with a tokenizer of ``vocab`` tokens (hash
    ``tokenizer``, None: the board's), as `peeval eval --like cpu --run_name <run>` writes it."""
    ck = root / "checkpoints" / run
    ck.mkdir(parents=True)
    (ck / "model.safetensors").write_bytes(run.encode())
    if kind == "pretrain":
        (ck / "train_summary.json").write_text(json.dumps({"pe": "tape", "pe_options": {}, "task": None, "seed": seed,
            "params": params, "steps": 10, "tokens": 5000, "training_length": trained}))  # fmt: skip
    doc = json.loads(TAPE.read_text())
    prov = doc["peeval"]
    board_hash = prov.get("tokenizer_hash")
    prov.update(checkpoint=str(ck), checkpoint_sha256=hashlib.sha256(run.encode()).hexdigest(), model_params=params,
                model_args={"pretrained": str(ck)}, date="2026-12-01T10:00:00+00:00", training_length=trained,
                tokenizer={"name": run, "vocab_size": vocab}, tokenizer_hash=tokenizer or board_hash,
                run_kind=kind)  # fmt: skip
    if like:
        prov["like"] = like
    for key, v in list(doc["results"][TASK].items()):
        if key.startswith("ppl@") and isinstance(v, float):
            doc["results"][TASK][key] = v * scale
    out = root / "results" / run
    out.mkdir(parents=True)
    (out / "results.json").write_text(json.dumps(doc))
    return out


def _published(key: str, paths: list[Path]) -> list[float]:
    return [json.loads(p.read_text())["results"][TASK][f"{key},none"] for p in paths]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The cpu board (`make site SITE_PROFILE=cpu`) before and after two runs of yours, both TAPE seed 0: a smoke
    one (another tokenizer, 34k parameters, trained at 64) and a cpu one (the board's tokenizer and size)."""
    root = tmp_path_factory.mktemp("board")
    db = root / "peeval.duckdb"
    ingest([PUBLISHED_CPU], db)
    before = build_site(db, root / "before").parent
    smoke = _yours(root, "my-smoke-tape", scale=1.25, tokenizer=OTHER_TOKENIZER, vocab=384, params=34000, trained=64)
    cpu = _yours(root, "my-cpu-tape", scale=0.98, tokenizer=None, vocab=512, params=138204, trained=256)
    ingest([smoke, cpu], db)
    return db, before, build_site(db, root / "after").parent


def _table(site: Path, name: str) -> list[dict]:
    return json.loads((site / "data" / f"{name}.json").read_text())


def test_two_runs_of_yours_are_two_rows_named_by_their_runs(board):
    """Item 1: named by --run_name, never merged with each other (nor with the board) by encoding."""
    db, before, after = board
    rows = {r["encoding"]: r for r in _table(after, "leaderboard")}
    assert {"my-smoke-tape", "my-cpu-tape"} <= set(rows), sorted(rows)
    assert not {"tape", "tape · 2 seeds"} & set(rows)
    tape = json.loads(TAPE.read_text())["results"][TASK]["ppl@256,none"]
    ppl = next(c for c in rows["my-smoke-tape"] if c.endswith("ppl@256 ↓"))
    assert rows["my-smoke-tape"][ppl] == pytest.approx(1.25 * tape, rel=1e-12)  # one run: its own number
    assert rows["my-cpu-tape"][ppl] == pytest.approx(0.98 * tape, rel=1e-12)
    for r in _table(before, "leaderboard"):  # the board's rows as they were
        assert rows[r["encoding"]] == r


def test_seeds_share_a_row_only_when_size_tokenizer_and_training_length_agree(tmp_path):
    """Item 1: two runs of one name (no --like: named by encoding) on other tokenizers are refused, one line naming
    both, never averaged; the same model's two seeds still share their row."""
    a = _yours(tmp_path, "a", scale=1.0, tokenizer=None, vocab=512, params=1000, trained=256, like=None)
    b = _yours(tmp_path, "b", scale=1.1, tokenizer=OTHER_TOKENIZER, vocab=384, params=1000, trained=256, like=None,
               seed=1)  # fmt: skip
    with pytest.raises(IngestError, match="tokenizer differ") as e:
        ingest([a, b], tmp_path / "s.duckdb")
    assert "\n" not in str(e.value) and "results/a" in str(e.value) and "results/b" in str(e.value)
    c = _yours(tmp_path, "c", scale=1.1, tokenizer=None, vocab=512, params=1000, trained=256, like=None, seed=1)
    assert ingest([a, c], tmp_path / "t.duckdb")["runs"] == 2  # seeds 0 and 1 of one model: one row


def test_every_published_run_records_its_tokenizer():
    """Item 1: each published perplexity, passkey, zero-shot and shift run says which tokenizer it scored with; the
    board's pretrained models share one (the cpu profile's 512-token BPE), the SmolLM2 runs another."""
    for profile in ("cpu", "cpu-claims"):
        folder = PUBLISHED_CPU.parent / profile
        seen: dict[str, set] = {}
        for path in sorted((folder / "results").rglob("results.json")):
            kind = path.relative_to(folder / "results").parts[0]
            prov = json.loads(path.read_text())["peeval"]
            if kind == "diag":  # a diagnostic task's own vocabulary: no text tokenizer
                continue
            assert re.fullmatch(r"[0-9a-f]{16}", str(prov.get("tokenizer_hash"))), path
            assert prov["tokenizer"]["vocab_size"] > 0, path
            seen.setdefault(kind, set()).add((prov["tokenizer"]["name"], prov["tokenizer"]["vocab_size"],
                                              prov["tokenizer_hash"]))  # fmt: skip
        assert len(seen["pretrain"]) == 1 and next(iter(seen["pretrain"]))[:2] == ("bpe", 512), seen
        assert seen["shift"] == seen["pretrain"]
        assert len(seen["base"]) == 1 and next(iter(seen["base"]))[1] == 49152  # SmolLM2's vocabulary
        assert seen["base"] != seen["pretrain"]


@needs_mirror("local", "gutenberg-train")
def test_the_recorded_board_tokenizer_is_the_cpu_profiles_own():
    """Item 1, derived not guessed: `peeval tokenizer --profile cpu` (deterministic BPE on the mirror's training
    text) has the hash every published cpu pretrained run now records."""
    from peeval.training.data import profile_tokenizer, tokenizer_fingerprint
    from peeval.training.profiles import get_profile

    recorded = json.loads(TAPE.read_text())["peeval"].get("tokenizer_hash")
    assert tokenizer_fingerprint(profile_tokenizer(get_profile("train", "cpu"))) == recorded


def test_a_row_without_a_tokenizer_never_joins_another_tokenizers_chart():
    """Item 2: `here_groups` joined a row recording no tokenizer to the only known group (its per-token perplexity
    drawn beside the board's): now it gets a chart of its own."""
    from leaderboard.site.ppl import here_groups

    rows = [{"name": "tape @cpu", "tokenizer": "bpe 512", "training_length": 256},
            {"name": "mine", "tokenizer": None, "training_length": 64}]  # fmt: skip
    groups = here_groups(rows, {"tape @cpu", "mine"}, 256)
    members = sorted(sorted(n for n in ("tape @cpu", "mine") if member(n)) for _, member, _ in groups)
    assert members == [["mine"], ["tape @cpu"]], [g[0] for g in groups]


def test_each_tokenizer_has_its_own_perplexity_chart(board):
    """Item 2: the smoke run (384 tokens) on a chart of its own, the cpu one on the board's tokenizer's chart."""
    _, _, after = board
    page = html.unescape((after / "ppl.html").read_text())
    charts = re.findall(r"<svg[^>]*class=\"chart\".*?</svg>", page, re.S)
    # "…: ppl, models trained here (my-smoke-tape 384 tokenizer; trained at 64)": its length is off the axis
    own = [c for c in charts if "my-smoke-tape 384 tokenizer" in c and ": ppl" in c]
    assert own and all("tape @cpu" not in c and "my-cpu-tape" not in c for c in own), len(charts)
    assert all("my-smoke-tape" not in c for c in charts if "bpe 512 tokenizer" in c)
    board_chart = [c for c in charts if "bpe 512 tokenizer" in c and "ppl vs context length" in c]
    assert any("my-cpu-tape" in c and "rope @cpu" in c for c in board_chart)


def test_your_runs_are_compared_with_the_boards_rope(board):
    """Item 5: both runs in "each encoding against RoPE" (marked as yours) and in the front page's picture, against
    the board's RoPE: per token on the board's tokenizer, per byte (2^bpb) on another. Worked out from the
    published files: the geometric mean over RoPE's 3 seeds, TAPE seed 0 times the copy's scale."""
    _, before, after = board
    vs = {r["encoding"]: r for r in _table(after, "vs_rope")}
    assert {"my-cpu-tape", "my-smoke-tape"} <= set(vs), sorted(vs)
    col = next(c for c in vs["rope @cpu"] if "@256" in c)
    rope_ppl = math.exp(sum(math.log(v) for v in _published("ppl@256", ROPE)) / 3)
    (tape_ppl,) = _published("ppl@256", [TAPE])
    assert vs["my-cpu-tape"][col] == pytest.approx(0.98 * tape_ppl / rope_ppl, rel=1e-9)
    rope_bpb = sum(_published("bpb@256", ROPE)) / 3
    (tape_bpb,) = _published("bpb@256", [TAPE])
    assert vs["my-smoke-tape"][col] == pytest.approx(2 ** (tape_bpb - rope_bpb), rel=1e-9)  # per byte
    published = {r["encoding"] for r in _table(before, "vs_rope")}
    assert [r for r in _table(after, "vs_rope") if r["encoding"] in published] == _table(before, "vs_rope")
    page = (after / "index.html").read_text()
    for name in ("my-smoke-tape", "my-cpu-tape"):
        assert re.search(r'<td class="yours"[^>]*>' + re.escape(name), page)
    picture = page[page.index('class="picture"') :] if 'class="picture"' in page else page
    assert "my-cpu-tape (yours)" in picture and "my-smoke-tape (yours, per byte)" in picture
    assert "per byte (another tokenizer)" in page


def test_adding_a_row_never_hides_a_published_value(tmp_path):
    """Item 8: a model of yours scored at the board's lengths (256 ... 4096) beside the SmolLM2 rows (512 ...
    2048, another protocol) switched the table's columns to 256 and 4096, so every SmolLM2 perplexity read "–".
    Each protocol now keeps its columns, and bits per byte, which tokenizers share, stand beside them."""
    db = tmp_path / "s.duckdb"
    ingest([PUBLISHED_CPU], db)
    before = {r["model / method"]: r for r in _table(build_site(db, tmp_path / "before").parent, "extension")}
    mine = _yours(tmp_path, "my-gpt2", scale=1.0, tokenizer="fedcba9876543210", vocab=50257, params=436224,
                  trained=4160, kind="external")  # fmt: skip
    ingest([mine], db)
    after = {r["model / method"]: r for r in _table(build_site(db, tmp_path / "after").parent, "extension")}
    for name, row in before.items():
        for col, value in row.items():
            if "ppl@" in col and value not in ("–", None):
                assert after[name].get(col) == value, (name, col)
    (mine,) = set(after) - set(before)
    (bpb,) = _published("bpb@4096", [TAPE])
    assert [after[mine][c] for c in after[mine] if c.endswith("bpb@4096 ↓")] == [pytest.approx(bpb)]
