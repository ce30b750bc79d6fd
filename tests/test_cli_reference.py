"""docs/cli.md is the parsers' own help (peeval.cli_reference): a changed option without a regenerated file fails."""

from __future__ import annotations

from peeval import cli_reference


def test_docs_cli_md_matches_the_parsers():
    on_disk = cli_reference.DOC.read_text(encoding="utf-8")
    assert on_disk == cli_reference.render(), "docs/cli.md is stale: run `python -m peeval.cli_reference`"


def test_the_reference_holds_every_subcommand_and_its_options():
    text = cli_reference.render()
    for cmd in ("eval", "train", "tokenizer", "adapt", "data", "export", "bench"):
        assert f"## `peeval {cmd}`" in text
    assert "--compile" in text and "--like" in text


def test_help_states_the_codes_numbers_and_every_profile():
    """--compile auto's threshold is speed.AUTO_MIN_STEPS (it once said 100 where the code said 1,000) and
    --profile lists every profile of profiles.yaml (it once omitted gpu and paper_pope)."""
    import yaml

    from peeval.training.profiles import PROFILES

    text = " ".join(cli_reference.render().split())
    source = (cli_reference.DOC.parent.parent / "peeval" / "training" / "speed.py").read_text()
    steps = int(next(line for line in source.splitlines() if line.startswith("AUTO_MIN_STEPS")).split("=")[1])
    assert f">= {steps:,} steps" in text
    assert yaml is not None
    for kind in ("train", "diag", "adapt"):
        for name in PROFILES[kind]:
            assert name in text, (kind, name)
