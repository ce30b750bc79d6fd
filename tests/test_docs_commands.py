"""Every command the README and docs/ show parses as written (issue 58): a ``peeval`` line with the real parser
(its options, lm-eval's pass-through flags for ``peeval eval``), a ``make`` line names a target of the Makefile,
a ``python -m`` / ``python <script>`` line names a module or script of the repository. So an option renamed in
the code fails here, not in a reader's terminal."""

from __future__ import annotations

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
    from peeval.evaluation import parse_lm_eval_flags

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
