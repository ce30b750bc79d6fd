"""Every command the README and docs/ show parses as written (issue 58): a ``peeval`` line with the real parser
(its options, lm-eval's pass-through flags for ``peeval eval``), a ``make`` line names a target of the Makefile,
a ``python -m`` / ``python <script>`` line names a module or script of the repository. So an option renamed in
the code fails here, not in a reader's terminal."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _commands() -> list[tuple[str, str]]:
    """(file, command) of every line of a ```bash block, continuation lines joined, comments dropped."""
    out = []
    for doc in DOCS:
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = [w.strip("[]") for w in shlex.split(line, comments=True)]  # [--flag]: an optional one
                if words:
                    out.append((doc.relative_to(ROOT).as_posix(), words))
    return out


COMMANDS = _commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) > 40 and any(w[:2] == ["peeval", "eval"] and "--like" in w for _, w in COMMANDS)


@pytest.mark.parametrize(("doc", "words"), [c for c in COMMANDS if c[1][0] == "peeval"], ids=lambda x: str(x)[:60])
def test_peeval_lines_parse(doc, words):
    from peeval.cli import build_parser
    from peeval.evaluation.runner import parse_lm_eval_flags

    args, extra = build_parser().parse_known_args(words[1:])  # argparse exits (SystemExit: the test fails) on a bad one
    if args.command == "eval":
        parse_lm_eval_flags([e for e in extra if e != "..."])
    else:
        assert [e for e in extra if e != "..."] == [], (doc, words)


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))
    for doc, words in COMMANDS:
        if words[0] == "make":
            named = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
            assert set(named) <= targets, (doc, words)


def test_python_modules_and_scripts_exist():
    for doc, words in COMMANDS:
        if words[0] != "python":
            continue
        if words[1] == "-m":
            assert importlib.util.find_spec(words[2]) is not None, (doc, words)
        elif words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), (doc, words)


def test_the_readme_fits_one_screen_and_the_docs_index_lists_every_guide():
    """README.md at most 600 words (`wc -w`: it was 10,809); docs/README.md links every file of docs/."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").split()) <= 600
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    guides = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    assert guides == linked, (guides - linked, linked - guides)


def test_docs_glossary_is_the_sites():
    from leaderboard.site.glossary import markdown

    assert (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8") == markdown(), (
        "run python -m leaderboard.site.glossary"
    )


def test_make_test_says_in_one_line_when_the_browser_tests_are_skipped():
    """Without Chromium, `make test` prints one line saying the browser tests are skipped and how to install it
    (they were skipped silently but for pytest's summary); with one, it says nothing. pytest replaced by `true`."""
    import os
    import subprocess
    import sys

    venv = Path(sys.executable).parent.parent
    if not (venv / ".peeval-installed").exists():
        pytest.skip("not the make venv (no .peeval-installed stamp)")

    def run(chromium: str) -> list[str]:
        env = {**os.environ, "PEEVAL_CHROMIUM": chromium}
        out = subprocess.run(["make", "-s", "test", f"VENV={venv}", "PY=true"], cwd=ROOT, env=env, capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
        return [line for line in out.splitlines() if "Chromium" in line]

    (line,) = run("/nonexistent/chromium")
    assert "browser tests are skipped" in line and "apt-get install chromium" in line
    assert run("/bin/true") == []


def _launched(words: list[str]) -> list[str] | None:
    """The peeval command a ``torchrun`` / ``accelerate launch`` line runs (``-m peeval.cli ARGS``), else None."""
    if words[0] not in ("torchrun", "accelerate") or "-m" not in words:
        return None
    i = words.index("-m")
    assert words[i + 1] == "peeval.cli", words
    return words[i + 2 :]


@pytest.mark.parametrize(("doc", "words"), [c for c in COMMANDS if _launched(c[1])], ids=lambda x: str(x)[:60])
def test_launcher_lines_run_a_peeval_command_that_parses(doc, words):
    """docs/gpu.md's torchrun / accelerate lines: the launcher's `-m peeval.cli` command parses with peeval's parser."""
    from peeval.cli import build_parser
    from peeval.evaluation.runner import parse_lm_eval_flags

    launched = _launched(words)
    if "..." in launched:  # `train ...`: the options are elided; the subcommand must exist
        sub = next(a for a in build_parser()._actions if a.dest == "command")
        assert launched[0] in sub.choices, (doc, words)
        launched = [w for w in launched if w != "..."]
        if len(launched) == 1:
            return
    args, extra = build_parser().parse_known_args(launched)
    if args.command == "eval":
        parse_lm_eval_flags(extra)
    else:
        assert extra == [], (doc, words)


@pytest.mark.parametrize(("doc", "words"), [c for c in COMMANDS if c[1][0] == "lm_eval"], ids=lambda x: str(x)[:60])
def test_lm_eval_lines_parse_and_name_registered_models_and_tasks(doc, words, monkeypatch):
    """A plain `lm_eval` line parses with lm-eval's own parser, names a registered model and peeval's tasks, and its
    --metadata is JSON (CKPT / DIR / $SMOLLM2 stand for the reader's checkpoint)."""
    import json
    import sys

    from lm_eval._cli import HarnessCLI
    from lm_eval.api.registry import get_model

    monkeypatch.setattr(sys, "argv", [w for w in words if w != "..."])
    args = HarnessCLI().parse_args()
    get_model(args.model)  # raises on an unknown name
    if args.metadata:
        assert isinstance(json.loads(args.metadata) if isinstance(args.metadata, str) else args.metadata, dict)
    if args.tasks:
        from peeval.tasks.family import family_of

        tasks = args.tasks if isinstance(args.tasks, list) else args.tasks.split(",")
        assert all(family_of(t) is not None for t in tasks), args.tasks


def test_the_docs_duckdb_queries_run_on_a_published_store(tmp_path):
    """docs/leaderboard.md's `duckdb leaderboard/peeval.duckdb "<query>"` lines: each query runs on a store of the
    published cpu profile (the `duckdb` command line tool itself need not be installed) and returns rows."""
    import duckdb

    from leaderboard.ingest import ingest

    queries = [w[2] for _, w in COMMANDS if w[0] == "duckdb"]
    assert len(queries) >= 3
    db = tmp_path / "peeval.duckdb"
    ingest([ROOT / "leaderboard" / "published" / "cpu"], db, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    try:
        for q in queries:
            con.execute(q).fetchall()  # a renamed table or column fails here
    finally:
        con.close()


def test_the_docs_shell_substitutions_name_what_exists():
    """`SMOLLM2=$(python -c "from peeval.models.llama_adapters import smollm2_dir; ...")`: what it imports exists."""
    lines = [" ".join(w) for _, w in COMMANDS if "$(python" in w[0]]
    assert lines
    for line in lines:
        for module, name in re.findall(r"from ([\w.]+) import (\w+)", line):
            assert hasattr(importlib.import_module(module), name), (module, name)
