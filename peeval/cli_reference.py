"""docs/cli.md, the ``peeval`` command reference, written from the argparse parsers themselves
(:func:`peeval.cli.build_parser`), so ``--help`` and the docs cannot disagree: ``python -m
peeval.cli_reference`` rewrites it, and tests/test_cli_reference.py fails when the file is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
#: a fixed width, so the text does not depend on the terminal that ran the script
WIDTH = 100

HEADER = """# `peeval` command reference

Generated from the argparse parsers by `python -m peeval.cli_reference` (do not edit by hand: a test
compares this file with the parsers). `python -m peeval` is the `peeval` command. `peeval eval` also passes
lm-eval's own evaluation flags through (`--log_samples`, `--gen_kwargs`, ...: [evaluating.md](evaluating.md)).
"""


def _fixed_width(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH, max_help_position=32)
    return parser


def render() -> str:
    """The reference: ``peeval --help``, then each subcommand's ``--help``, as markdown."""
    from peeval.cli import build_parser

    parser = _fixed_width(build_parser())
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = [HEADER, "## `peeval`\n", "```text\n" + parser.format_help().rstrip() + "\n```\n"]
    for name, sub in subs.choices.items():
        parts += [f"## `peeval {name}`\n", "```text\n" + _fixed_width(sub).format_help().rstrip() + "\n```\n"]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    out = Path(argv[0]) if argv else DOC
    out.write_text(render(), encoding="utf-8")
    print(f"cli_reference: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
