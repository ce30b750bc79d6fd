"""Issue 42: a user's own runs never change the published leaderboard. Every run carries its source (local,
a published profile, external); a local run is a row of its own beside a published profile's, never one more
seed of it; a checkpoint is one seed whatever the copies; a results folder whose checkpoint was retrained after
its evaluation is refused."""

import hashlib
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from helpers.duck import query as _q

from leaderboard.ingest import IngestError, ingest, main  # noqa: E402
from leaderboard.site import build_site  # noqa: E402

PUBLISHED_CPU = Path(REPO) / "leaderboard" / "published" / "cpu"
#: the cpu profile's TAPE run (perplexity on the PG-19 stand-in), the one the issue's smoke run joined
TAPE = "results/pretrain/tape/ppl/results.json"


def _smoke_tape(root: Path, scale: float = 1.25) -> tuple[Path, Path]:
    """A user's smoke TAPE run laid out as in their clone: checkpoints/pretrain/tape (34k parameters, its own
    weights) evaluated into results/smoke-tape, its perplexities ``scale`` times the published run's."""
    ck = root / "checkpoints" / "pretrain" / "tape"
    ck.mkdir(parents=True)
    (ck / "model.safetensors").write_bytes(b"smoke weights")
    (ck / "train_summary.json").write_text(json.dumps({"pe": "tape", "pe_options": {}, "task": None, "seed": 0,
        "params": 34000, "steps": 10, "tokens": 5000, "training_length": 256}))  # fmt: skip
    doc = json.loads((PUBLISHED_CPU / TAPE).read_text())
    doc["peeval"]["checkpoint_sha256"] = hashlib.sha256(b"smoke weights").hexdigest()
    doc["peeval"]["date"] = "2026-12-01T10:00:00+00:00"
    for key, v in list(doc["results"]["peeval_ppl_pg19"].items()):
        if key.startswith("ppl@") and isinstance(v, float):
            doc["results"]["peeval_ppl_pg19"][key] = v * scale
    d = root / "results" / "smoke-tape"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(doc))
    return d, ck


def _tables(site: Path) -> dict[str, list[dict]]:
    return {
        t: json.loads((site / "data" / f"{t}.json").read_text())
        for t in ("leaderboard", "vs_rope", "extension", "efficiency_table")
    }


def test_a_smoke_run_on_a_published_board_leaves_every_published_cell_unchanged(tmp_path, monkeypatch):
    """The issue's measurement: a 34k-parameter smoke TAPE run ingested into the board of the cpu profile
    (`make site`'s store) became a 2nd seed of the published `tape` row (TAPE in distribution ×1.015 -> ×1.254).
    Now every published cell keeps its value and its seeds, and the smoke run is a row of its own."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "build" / "peeval.duckdb"
    db.parent.mkdir()
    ingest([PUBLISHED_CPU], db, root=PUBLISHED_CPU)  # what `make site` did (now without --root: either way)
    before = _tables(build_site(db, tmp_path / "before").parent)
    published = {r["encoding"] for r in before["leaderboard"]}
    assert len(published) > 5 and any(n.startswith("tape") for n in published)

    results, ck = _smoke_tape(tmp_path)
    ingest([results, ck], db)  # the user's run, into the same store
    after = _tables(build_site(db, tmp_path / "after").parent)
    rows = {r["encoding"]: r for r in after["leaderboard"]}
    for r in before["leaderboard"]:  # every published cell: same value, same number
        assert rows[r["encoding"]] == r, r["encoding"]
    # the published comparison with its own RoPE, as it was, and (issue 68 item 5) the user's row below it
    assert after["vs_rope"][: len(before["vs_rope"])] == before["vs_rope"]
    assert [r["encoding"] for r in after["vs_rope"][len(before["vs_rope"]) :]] == sorted(set(rows) - published)
    assert after["extension"] == before["extension"]
    assert all(r in after["efficiency_table"] for r in before["efficiency_table"])  # each checkpoint's own cost
    (mine,) = set(rows) - published  # the smoke run: one row of its own, one seed
    assert "tape" in mine
    sources = dict(_q(db, "select distinct name, source from runs"))
    assert sources[mine] == "local" and {sources[n] for n in published} == {"published/cpu"}

    # the user's row is marked as theirs, with its run name, size and training length (issue 58), and the page
    # no longer says every row shares one budget (the smoke run has 34k parameters, the profile's ~140k)
    page = (tmp_path / "after" / "index.html").read_text()
    (cell,) = re.findall(
        r'<td class="yours"[^>]*>' + re.escape(html.escape(mine)) + r'<span class="sub">([^<]*)<', page
    )[:1]
    assert cell.startswith("yours") and "run smoke-tape" in cell and "34,000 parameters" in cell, cell
    assert "context 256, 5,000 training tokens" in cell, cell
    said = "rows are encodings trained with identical data"
    assert said not in " ".join(page.split()) and said in " ".join(
        (tmp_path / "before" / "index.html").read_text().split()
    )
    assert "yours" not in (tmp_path / "before" / "index.html").read_text().replace("glossary.html#yours", "")

    ingest([PUBLISHED_CPU], db, root=PUBLISHED_CPU)  # the next `make site` keeps what the user ingested
    assert _q(db, "select count(*) from runs where source = 'local'") == [(1,)]
    again = _tables(build_site(db, tmp_path / "again").parent)
    assert again == after


def test_a_hugging_face_checkpoint_of_yours_shows_its_size_training_length_and_tokenizer(tmp_path, monkeypatch):
    """Issue 58: a Hugging Face checkpoint (SmolLM2: no train_summary.json) scored with `peeval eval --like` showed
    "size not recorded" and "tokenizer not recorded" under "yours". Its evaluation records them (results.json's
    peeval.model_params, .tokenizer, .training_length) and the row says them."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "peeval.duckdb"
    ingest([PUBLISHED_CPU], db, root=PUBLISHED_CPU)
    doc = json.loads((PUBLISHED_CPU / TAPE).read_text())
    hub = tmp_path / "hub" / "SmolLM2-135M"  # a checkpoint folder without a training summary
    doc["peeval"].update(model="peeval-llama", checkpoint=str(hub), model_args={"pretrained": str(hub)}, pe="rope",
                         pe_options=None, checkpoint_sha256="ab" * 32, training_length=8192, run_kind="external",
                         date="2026-12-01T10:00:00+00:00", model_params=134_515_008, tokenizer_hash="5eed5eed5eed5eed",
                         tokenizer={"name": "SmolLM2-135M", "vocab_size": 49_152})  # fmt: skip
    d = tmp_path / "results" / "smol-like-cpu"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(doc))
    ingest([d], db)
    page = (build_site(db, tmp_path / "site").parent / "index.html").read_text()
    cells = re.findall(r'<td class="yours"[^>]*>[^<]*<span class="sub">([^<]*)<', page)
    assert cells, "no row of yours"
    cell = html.unescape(cells[0])
    assert "run smol-like-cpu" in cell and "134,515,008 parameters" in cell and "context 8,192" in cell, cell
    assert "tokenizer SmolLM2-135M (49,152) hash 5eed5eed5eed5eed" in cell and "not recorded" not in cell, cell


def test_an_evaluation_records_the_models_size_and_tokenizer():
    """The two numbers provenance() adds, counted by hand: a 3 -> 2 linear layer holds 3*2 weights + 2 biases; the
    tokenizer's name is the hub id's or folder's last part, its vocabulary its length."""
    import torch

    from peeval.evaluation.provenance import model_size, tokenizer_name

    class Tok:
        name_or_path = "/models/HuggingFaceTB/SmolLM2-135M/"

        def __len__(self):
            return 49_152

    class LM:
        model = torch.nn.Linear(3, 2)
        tokenizer = Tok()

    assert model_size(LM()) == 8
    assert tokenizer_name(LM()) == {"name": "SmolLM2-135M", "vocab_size": 49_152}
    assert model_size(object()) is None and tokenizer_name(object()) is None


#: a stand-in for the venv's python in `make site`: prints each command's arguments as one JSON line
ECHO_PY = "python3 -c 'import sys,json;print(json.dumps(sys.argv[1:]))'"


def _make_site(tmp_path, **variables) -> subprocess.CompletedProcess:
    """`make site` in ``tmp_path`` (the repository's leaderboard/ linked in) with ``variables``, its commands
    printed instead of run (:data:`ECHO_PY`)."""
    link = tmp_path / "leaderboard"
    if not link.exists():
        link.symlink_to(Path(REPO) / "leaderboard", target_is_directory=True)
    argv = ["make", "-s", "-f", str(Path(REPO) / "Makefile"), "site", "STAMP=", f"PY={ECHO_PY}"]
    argv += [f"{k}={v}" for k, v in variables.items()]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)


def _commands(out: str) -> list[list[str]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("[")]


def test_make_site_keeps_the_store_and_ingests_the_users_runs(tmp_path):
    """`make site` no longer deletes the board's store (what the user ingested into it stays), its claims judge
    the published profile's runs, and MINE=... puts the user's results on the board in the same command."""
    r = _make_site(tmp_path, SITE_PROFILE="cpu", MINE="results/mine lm_out")
    assert r.returncode == 0, r.stderr
    ingest_, claims, site = _commands(r.stdout)
    assert ingest_ == ["-m", "leaderboard.ingest", "leaderboard/published/cpu", "results/mine", "lm_out", "--db",
                       "build/site-cpu/peeval.duckdb"]  # fmt: skip
    assert claims == ["pipelines/claims.py", "--db", "build/site-cpu/peeval.duckdb", "--source", "published/cpu"]
    assert site[:2] == ["-m", "leaderboard.site"]
    recipe = subprocess.run(["make", "-n", "site", "VENV=/nonexistent"], cwd=REPO, capture_output=True, text=True)
    assert "rm " not in recipe.stdout[recipe.stdout.find("SITE_PROFILE") :], recipe.stdout


def test_make_site_takes_names_only_and_paths_with_spaces(tmp_path):
    """Issue 56: `make site SITE_PROFILE=../../../../tmp/x` wrote a store and a site outside the repository;
    SITE_PROFILE='cpu `cmd`' ran the command; MINE="my runs" was split on the space."""
    outside = tmp_path / "x"
    for bad in ("../../../../" + str(outside).lstrip("/"), "cpu `touch pwned`", "cpu;touch pwned", "cpu/../../x"):
        r = _make_site(tmp_path, SITE_PROFILE=bad)
        assert r.returncode == 2 and "SITE_PROFILE: a profile name" in r.stderr, (bad, r.stderr)
        assert not _commands(r.stdout) and not (tmp_path / "pwned").exists() and not outside.exists(), bad
        assert not (tmp_path / "build").exists(), bad
    (tmp_path / "my runs").mkdir()
    r = _make_site(tmp_path, SITE_PROFILE="cpu", MINE="my runs")
    assert r.returncode == 0, r.stderr
    assert _commands(r.stdout)[0][3:-2] == ["my runs"]  # one path, spaces and all


def _published_copy(tmp_path: Path) -> Path:
    """A copy of the cpu profile's folder, as a clone holds it."""
    folder = tmp_path / "published" / "cpu"
    shutil.copytree(PUBLISHED_CPU, folder)
    return folder


def test_a_copied_published_run_folder_is_refused(tmp_path, capsys):
    """A published run folder copied (its results.json re-indented) counted as one more seed of its row: the
    folder no longer holds what its SOURCE.json lists, so nothing of it is read (one line, exit 2)."""
    folder = _published_copy(tmp_path)
    src = folder / Path(TAPE).parent
    copy = src.with_name("ppl-copy")
    shutil.copytree(src, copy)
    (copy / "results.json").write_text(json.dumps(json.loads((src / "results.json").read_text()), indent=3))
    db = tmp_path / "s.duckdb"
    assert main([str(folder), "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ppl-copy/results.json" in err[0] and "SOURCE.json" in err[0], err
    assert not db.exists()
    # a SOURCE.json written before it listed its files: the count of runs says it
    source = json.loads((folder / "SOURCE.json").read_text())
    del source["files"]
    (folder / "SOURCE.json").write_text(json.dumps(source))
    with pytest.raises(IngestError, match=f"{source['runs'] + 1} runs found, SOURCE.json says {source['runs']}"):
        ingest([folder], db)


def test_a_deleted_published_run_folder_is_refused(tmp_path, capsys):
    """SOURCE.json names 40 runs and one folder was deleted: 39 were ingested without a word. Now: one line, exit
    2, naming what is missing."""
    folder = _published_copy(tmp_path)
    shutil.rmtree(folder / Path(TAPE).parent)
    assert main([str(folder), "--db", str(tmp_path / "s.duckdb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is missing" in err[0] and "tape/ppl/" in err[0], err
    source = json.loads((folder / "SOURCE.json").read_text())
    del source["files"]
    (folder / "SOURCE.json").write_text(json.dumps(source))
    with pytest.raises(IngestError, match=f"{source['runs'] - 1} runs found, SOURCE.json says {source['runs']}"):
        ingest([folder], tmp_path / "s.duckdb")
    # a published folder's results given by a path below it are its profile's runs, checked the same way
    with pytest.raises(IngestError, match="runs found"):
        ingest([folder / "results" / "pretrain"], tmp_path / "s.duckdb")


def test_a_changed_published_file_is_refused(tmp_path):
    folder = _published_copy(tmp_path)
    f = folder / TAPE
    doc = json.loads(f.read_text())
    doc["results"]["peeval_ppl_pg19"]["ppl@256,none"] = 1.0001
    f.write_text(json.dumps(doc, indent=1))
    with pytest.raises(IngestError, match="changed since SOURCE.json"):
        ingest([folder], tmp_path / "s.duckdb")


def test_one_checkpoint_is_one_seed_whatever_the_copies(tmp_path, monkeypatch):
    """A local results folder copied (re-indented), or the same checkpoint evaluated twice on the same tasks
    into two folders, would be two seeds of one row: refused, naming both; into a store that holds one already,
    too. The same checkpoint on other tasks is the same seed's other numbers: accepted."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    copy = results.with_name("smoke-tape-copy")
    copy.mkdir()
    (copy / "results.json").write_text(json.dumps(json.loads((results / "results.json").read_text()), indent=2))
    with pytest.raises(IngestError, match="smoke-tape.*the same results as.*smoke-tape"):
        ingest([tmp_path / "results", ck], tmp_path / "a.duckdb")
    doc = json.loads((results / "results.json").read_text())
    doc["peeval"]["date"] = "2026-12-02T10:00:00+00:00"  # evaluated again: other bytes, the same checkpoint
    (copy / "results.json").write_text(json.dumps(doc))
    with pytest.raises(IngestError, match="the same checkpoint \\(sha256\\), model and tasks"):
        ingest([tmp_path / "results", ck], tmp_path / "a.duckdb")
    db = tmp_path / "b.duckdb"
    ingest([results, ck], db)
    with pytest.raises(IngestError, match="in the store"):
        ingest([copy], db)
    assert _q(db, "select count(*) from runs") == [(1,)]
    doc["results"] = {"peeval_passkey": {"acc,none": 0.5, "acc_stderr,none": 0.1}}  # other tasks: fine
    (copy / "results.json").write_text(json.dumps(doc))
    ingest([copy], db)
    assert _q(db, "select count(*), count(distinct name) from runs") == [(2, 1)]


def test_the_same_weights_read_by_another_encoding_are_another_model(tmp_path, monkeypatch):
    """RoPE's and NoPE's untrained step-0 controls hold the same weights (neither has a position parameter, one
    seed): the smoke pipeline's ingest refused the second as "the same checkpoint (sha256), model and tasks". The
    encoding that reads the weights is part of what one evaluation is."""
    import shutil

    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    other_ck = ck.with_name("nope")
    shutil.copytree(ck, other_ck)
    summary = json.loads((ck / "train_summary.json").read_text())
    (other_ck / "train_summary.json").write_text(json.dumps({**summary, "pe": "nope"}))
    doc = json.loads((results / "results.json").read_text())
    doc["peeval"].update(checkpoint="checkpoints/pretrain/nope", pe="nope", date="2026-12-02T10:00:00+00:00")
    doc["peeval"]["model_args"] = {**doc["peeval"]["model_args"], "pretrained": "checkpoints/pretrain/nope"}
    other = results.with_name("smoke-nope")
    other.mkdir()
    (other / "results.json").write_text(json.dumps(doc))
    db = tmp_path / "s.duckdb"
    ingest([tmp_path / "results", tmp_path / "checkpoints"], db)
    assert sorted(r[0] for r in _q(db, "select pe from runs")) == ["nope", "tape"]


def test_a_checkpoint_retrained_after_its_evaluation_is_refused(tmp_path, monkeypatch, capsys):
    """The ingest reads the checkpoint's current train_summary.json: a checkpoint retrained with --overwrite
    after the evaluation lent its new summary (seed, size, options) to the old numbers. Now the sha256 the
    evaluation recorded is compared with the weights there: a mismatch is one line, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    results, ck = _smoke_tape(tmp_path)
    (ck / "model.safetensors").write_bytes(b"retrained weights")
    db = tmp_path / "s.duckdb"
    assert main([str(results), str(ck), "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoints/pretrain/tape changed since it was evaluated" in err[0], err
    assert not db.exists()
    (ck / "model.safetensors").write_bytes(b"smoke weights")  # the weights as evaluated: accepted
    assert main([str(results), str(ck), "--db", str(db)]) == 0


def test_the_sha256_compared_is_the_one_peeval_eval_records(tmp_path):
    from leaderboard.ingest import checkpoint_sha256
    from peeval.evaluation.runner import checkpoint_hash

    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "model-00002.safetensors").write_bytes(b"second")
    (ck / "model-00001.safetensors").write_bytes(b"first")
    (ck / "config.json").write_text("{}")
    assert checkpoint_sha256(ck) == checkpoint_hash(str(ck)) == hashlib.sha256(b"firstsecond").hexdigest()
    assert checkpoint_sha256(ck / "config.json") == checkpoint_hash(str(ck / "config.json"))


def test_a_name_never_holds_runs_of_two_sources(tmp_path, monkeypatch):
    """An external model named like a published row ('rope @cpu') is refused, never folded into it."""
    monkeypatch.chdir(tmp_path)
    d = tmp_path / "results" / "odd"
    d.mkdir(parents=True)
    prov = {"model": "rope @cpu", "model_args": {}, "checkpoint": None, "date": "2026-11-22T10:00:00+00:00"}
    (d / "results.json").write_text(json.dumps({"results": {"arc_easy": {"acc,none": 0.3}}, "peeval": prov}))
    db = tmp_path / "s.duckdb"
    ingest([PUBLISHED_CPU], db)
    with pytest.raises(IngestError, match="'rope @cpu' is taken by a run of published/cpu"):
        ingest([d], db)
