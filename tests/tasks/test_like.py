"""``peeval eval --like PROFILE`` (issue 58): your checkpoint scored with exactly a published profile's protocol,
read from its published runs; an option that would change it, runs that disagree, or other documents are one
line, exit 2, nothing written."""

from __future__ import annotations

import json
import re
import shutil

from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import needs_mirror

from peeval.cli import main
from peeval.evaluation.like import PUBLISHED, published_protocol


def test_the_published_cpu_protocol_is_read_from_its_runs():
    """The lengths are lm-eval's own record of the task config (``configs``), not peeval's provenance that
    published_protocol reads: the two must agree, and so must every pretrained run."""
    proto = published_protocol("cpu")
    one = next((PUBLISHED / "cpu" / "results" / "pretrain").glob("*/*/results.json"))
    config = json.loads(one.read_text())["configs"]
    assert proto.tasks == tuple(sorted(config))
    for task in proto.tasks:
        assert proto.metadata["lengths"] == config[task]["metadata"]["lengths"]
        assert proto.metadata["targets"] == config[task]["metadata"]["targets"]
    assert proto.runs == len(list((PUBLISHED / "cpu" / "results" / "pretrain").glob("*/*/results.json"))) > 1
    assert all(len(d) == 1 for d in proto.documents.values())  # one set of documents per task


def _eval(*args: str) -> int:
    return main(["eval", "--device", "cpu", *args])


@needs_mirror("local", "gutenberg-eval")
def test_like_scores_with_the_published_settings_and_refuses_what_would_change_them(tmp_path, capsys):
    ck = save_tiny_checkpoint(tmp_path / "ck" / "rope", ["the cat sat on the mat 0123456789 and the dog ran"],
                              pe="rope", vocab_size=300, max_positions=64)  # fmt: skip
    md = {"lengths": [16, 32], "targets": 40, "skip": 0, "max_docs": 2}
    assert (
        _eval(
            "--model",
            "peeval",
            "--model_args",
            f"pretrained={ck}",
            "--tasks",
            "peeval_ppl_pg19",
            "--metadata",
            json.dumps(md),
            "--output_path",
            str(tmp_path / "pub"),
            "--run_name",
            "rope",
        )
        == 0
    )
    board = tmp_path / "board"  # a published profile of one run: what `python -m leaderboard.publish` lays out
    (board / "results" / "pretrain" / "rope").mkdir(parents=True)
    shutil.copytree(tmp_path / "pub" / "rope", board / "results" / "pretrain" / "rope" / "ppl")
    (board / "SOURCE.json").write_text(json.dumps({"profile": "tiny"}))
    capsys.readouterr()

    mine = tmp_path / "mine"
    assert _eval("--like", str(board), "--model_args", f"pretrained={ck}", "--output_path", str(mine),
                 "--run_name", "my-model") == 0, capsys.readouterr().err[-2000:]  # fmt: skip
    got = json.loads((mine / "my-model" / "results.json").read_text())
    want = json.loads((tmp_path / "pub" / "rope" / "results.json").read_text())
    assert got["peeval"]["protocol"] == want["peeval"]["protocol"]  # lengths, targets, skip, max_docs
    assert got["peeval"]["data"] == want["peeval"]["data"]  # the same documents
    assert got["results"] == want["results"]  # same checkpoint, same protocol: the same numbers
    assert got["peeval"]["like"] == "tiny" and "like" not in want["peeval"]  # whose columns it fills

    # an option --like sets is refused, naming it: one line, exit 2, nothing written
    capsys.readouterr()
    assert _eval("--like", str(board), "--model_args", f"pretrained={ck}", "--tasks", "peeval_ppl_proof_pile",
                 "--output_path", str(tmp_path / "no")) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tasks" in err[0] and "--like" in err[0], err
    assert not (tmp_path / "no").exists()

    # other documents than the published runs read (another mirror): refused after scoring, nothing written
    res = board / "results" / "pretrain" / "rope" / "ppl" / "results.json"
    doctored = json.loads(res.read_text())
    doctored["peeval"]["data"]["peeval_ppl_pg19"][0]["documents_sha256"] = "0" * 64
    res.write_text(json.dumps(doctored))
    assert _eval("--like", str(board), "--model_args", f"pretrained={ck}", "--output_path", str(tmp_path / "no2"),
                 "--run_name", "x") == 2  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]  # after lm-eval's progress
    assert len(err) == 1 and "other documents" in err[0], err
    assert not (tmp_path / "no2" / "x" / "results.json").exists()

    # two runs of the profile scored differently: no silent pick
    doctored["peeval"]["protocol"]["metadata"]["lengths"] = [16]
    (board / "results" / "pretrain" / "rope-s1" / "ppl").mkdir(parents=True)
    (board / "results" / "pretrain" / "rope-s1" / "ppl" / "results.json").write_text(json.dumps(doctored))
    assert _eval("--like", str(board), "--model_args", f"pretrained={ck}", "--output_path", str(tmp_path / "no3")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different settings" in err[0], err


def test_an_unknown_profile_is_one_line_naming_the_published_ones(capsys):
    assert _eval("--like", "nope-profile", "--model_args", "pretrained=x") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--like nope-profile" in err[0] and "cpu" in err[0], err


@needs_mirror("local", "gutenberg-eval")
def test_like_cpu_fills_the_published_boards_columns(tmp_path, capsys, monkeypatch):
    """Issue 58, on the real published board (leaderboard/published/cpu), not a synthetic one: a tiny checkpoint
    scored with `peeval eval --like cpu` (the profile's own settings: about a minute on one CPU thread) records the
    published runs' protocol and documents, produces the metrics they have, and on the board built from the
    published folder plus this run, its row (marked as yours) fills exactly the columns the published rows fill."""
    from leaderboard.ingest import ingest
    from leaderboard.site import build_site

    ck = save_tiny_checkpoint(tmp_path / "ck" / "rope", ["the cat sat on the mat 0123456789 and the dog ran"],
                              pe="rope", vocab_size=300, max_positions=64)  # fmt: skip
    out = tmp_path / "mine"
    assert _eval("--like", "cpu", "--model_args", f"pretrained={ck}", "--output_path", str(out),
                 "--run_name", "my-rope") == 0, capsys.readouterr().err[-3000:]  # fmt: skip
    got = json.loads((out / "my-rope" / "results.json").read_text())
    want = json.loads(next((PUBLISHED / "cpu" / "results" / "pretrain").glob("*/*/results.json")).read_text())
    assert got["peeval"]["protocol"] == want["peeval"]["protocol"]  # lengths, targets, skip (read from the runs)
    assert got["peeval"]["like"] == "cpu"
    for task, reads in want["peeval"]["data"].items():
        assert [r["documents_sha256"] for r in got["peeval"]["data"][task]] == [r["documents_sha256"] for r in reads]
    assert sorted(got["results"]) == sorted(want["results"])
    for task in want["results"]:  # every metric the published runs have (ppl@L, bpb@L, tokens@L, ... per length)
        assert set(got["results"][task]) == set(want["results"][task]), task

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "board.duckdb"
    ingest([PUBLISHED / "cpu"], db, root=PUBLISHED / "cpu")  # `make site MINE=...`'s two ingests
    ingest([out / "my-rope"], db)
    site = build_site(db, tmp_path / "site").parent

    def filled(table: str) -> dict[str, set[str]]:  # per row, its perplexity columns that hold a number
        rows = json.loads((site / "data" / f"{table}.json").read_text())
        return {next(iter(r.values())): {c for c, v in r.items() if "ppl@" in c and v not in ("–", None, "")}
                for r in rows}  # fmt: skip

    # the profile's pretrained language models ("rope @cpu", "tape @cpu", ...; its flip-flop models have no perplexity)
    published_rows = {n: cols for n, cols in filled("leaderboard").items() if cols}
    assert len(published_rows) >= 10, published_rows
    (mine,) = [(n, cols) for n, cols in filled("extension").items() if not n.endswith("@cpu")]  # a checkpoint of yours
    # every column the published rows fill, mine fills (issue 68: the table also keeps the SmolLM2 rows' own
    # lengths, 512 and 2,048, which mine measured too)
    assert published_rows and all(cols <= mine[1] for cols in published_rows.values()), (mine, published_rows)
    assert any("ppl@4096" in c for c in mine[1]) and any("ppl@256" in c for c in mine[1])
    lengths: dict[str, set[int]] = {}  # and the per-length table: the same lengths, all five
    for r in json.loads((site / "data" / "ppl_by_length_table.json").read_text()):
        lengths.setdefault(r["name"], set()).add(r["length"])
    assert lengths[mine[0]] == set(want["peeval"]["protocol"]["metadata"]["lengths"])
    # every published model at every length, but a learned table of 256 positions (no cell beyond: not applicable)
    assert all(lengths[n] == lengths[mine[0]] for n in published_rows if not n.startswith("learned @")), lengths
    assert lengths["learned @cpu"] == {256}
    page = (site / "index.html").read_text()
    assert re.search(r'<td class="yours"[^>]*>' + re.escape(mine[0]), page)  # marked as yours


def test_like_without_the_boards_documents_fails_at_once_naming_them(tmp_path, monkeypatch, capsys):
    """Issue 68 items 10, 12: without the data mirror, `--like cpu` retried the hub for ~30 s for the real PG-19 (not
    the board's documents: the published runs read the mirror's Gutenberg stand-in) before one line naming
    deepmind/pg19. Now it stops before loading anything, naming the mirror folder the board read."""
    import time

    from peeval.data import _not_found

    monkeypatch.setenv("PEEVAL_DATA_MIRROR", str(tmp_path / "empty-mirror"))
    (tmp_path / "empty-mirror").mkdir()
    ck = save_tiny_checkpoint(tmp_path / "ck" / "rope", ["the cat sat on the mat 0123456789 and the dog ran"],
                              pe="rope", vocab_size=300, max_positions=64)  # fmt: skip
    capsys.readouterr()  # the checkpoint's save bars
    t0 = time.monotonic()
    assert _eval("--model", "peeval", "--model_args", f"pretrained={ck}", "--like", "cpu",
                 "--output_path", str(tmp_path / "out")) == 2  # fmt: skip
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "local/gutenberg-eval" in err[0] and "PEEVAL_DATA_MIRROR" in err[0], err
    assert time.monotonic() - t0 < 20 and not (tmp_path / "out").exists()
    message = str(_not_found("deepmind/pg19", None, ConnectionError("offline")))
    assert "local/gutenberg-eval" in message
