"""Issue 41 item 1: each folder under peeval/tasks declares one task family, and every family's metric-cell
grammar reads back what it writes."""

from pathlib import Path

import pytest

import peeval
from peeval import registry
from peeval.tasks.family import Family, families, family_of

TASKS = Path(peeval.__file__).parent / "tasks"

#: per family with a cell grammar: cells it formats (format_cell's arguments), and metric names that are no cell
CELLS = {
    "ppl": ([("ppl", 512), ("bpb", 2), ("windows", 4096)], ["acc", "ppl@x", "nll_pos@128", "ppl@512@1"]),
    "passkey": ([(512, 0.5), (64, 0.0), (1, 1.0)], ["acc", "acc@512", "ppl@512"]),
    "diagnostics": ([("all",), ("3x5",), ("read_acc",)], ["acc", "read_acc", "ppl@3"]),
}


def test_the_registered_families_are_the_folders_each_declaring_one():
    folders = {p.parent.name for p in TASKS.glob("*/family.py")}
    assert folders == set(registry.TASK_FAMILIES) == {f.name for f in families()}
    assert [f.name for f in families()] == list(registry.TASK_FAMILIES)  # the registry's order
    assert all(isinstance(f, Family) for f in families())


def test_no_task_name_is_claimed_by_two_families():
    tasks = ["peeval_ppl_pg19", "peeval_passkey", "peeval_diag_flip_flop_ood_dense", "peeval_scrolls_qasper",
             "peeval_cbt_cn", "peeval_hellaswag", "peeval_zeroshot", "peeval_tape_suite"]  # fmt: skip
    expected = ["ppl", "passkey", "diagnostics", "scrolls", "cbt", "hellaswag", "groups", "groups"]
    for task, name in zip(tasks, expected, strict=True):
        assert [f.name for f in families() if f.owns(task)] == [name], task
    assert family_of("hellaswag") is None and family_of("peeval_passkeys") is None


@pytest.mark.parametrize("name", sorted(CELLS))
def test_each_grammar_round_trips(name):
    (fam,) = [f for f in families() if f.name == name]
    cells, not_cells = CELLS[name]
    for cell in cells:
        metric = fam.format_cell(*cell)
        parsed = fam.parse_cell(metric)
        assert parsed is not None and fam.format_cell(*_typed(name, parsed)) == metric, (cell, metric, parsed)
    for metric in not_cells:
        assert fam.parse_cell(metric) is None, metric


def _typed(name: str, parsed: tuple | str) -> tuple:
    """passkey parses its cell's texts (the range check names them), diagnostics the cell alone."""
    if name == "passkey":
        return int(parsed[0]), float(parsed[1])
    return (parsed,) if isinstance(parsed, str) else parsed


def test_families_that_read_lengths_say_the_length_of_their_cells():
    by_length = {f.name: f for f in families() if f.length_cells}
    assert {"ppl", "passkey"} <= set(by_length)
    assert by_length["ppl"].cell_length("bpb@1024") == 1024 and by_length["ppl"].cell_length("acc") is None
    assert by_length["passkey"].cell_length("acc@2048@0.25") == 2048
    assert all(f.cell_length is not None for f in by_length.values())


def test_cell_checks_name_where_and_refuse_what_is_no_cell():
    (ppl,) = [f for f in families() if f.name == "ppl"]
    (pk,) = [f for f in families() if f.name == "passkey"]
    ppl.check_cell("ppl@2", "here")
    with pytest.raises(ValueError, match=r"^here: the length must be a whole number >= 2"):
        ppl.check_cell("ppl@1", "here")
    with pytest.raises(ValueError, match=r"^there: the depth"):
        pk.check_cell("acc@64@1.5", "there")
