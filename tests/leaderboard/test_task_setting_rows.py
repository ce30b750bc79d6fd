"""A diagnostic model trained at another generator setting than its task's default (flip-flop at 256 instruction
pairs, counting with 3 variables) is its own leaderboard row, never one more seed of the default one: the
published cpu-claims site averaged CoPE's 1-, 3- and 5-variable counting runs as 15 seeds of one "cope" row."""

import json
import re
from pathlib import Path

import duckdb
from test_front_page import _checkpoint, _results, make_store

from leaderboard.ingest import ingest
from leaderboard.site import build_site
from peeval.records import task_setting, task_setting_label

FLIP = {0: 1.0, 1: 1.0, 2: 0.9}  # the 32-pair runs (the task's default at the cpu generator size)
FLIP_256 = {0: 0.5, 1: 0.6, 2: 0.7}  # the 256-pair runs of the same encoding
ROPE_256 = {0: 0.4, 1: 0.5, 2: 0.5}  # RoPE at 256 pairs: cope {n_instr=256} - rope {n_instr=256} = 0.6 - 0.4667


def test_label_names_only_what_differs_from_the_defaults():
    defaults = {"n_instr": 32, "p_i": 0.8}
    assert task_setting_label("cope", {}, defaults) == "cope"
    assert task_setting_label("cope", {"n_instr": 32}, defaults) == "cope"  # the default, said explicitly
    assert task_setting_label("cope", {"n_instr": 256, "p_i": 0.8}, defaults) == "cope {n_instr=256}"
    assert task_setting_label("t5", {"n_vars": 3, "a": 1}, None) == "t5 {a=1,n_vars=3}"  # unknown task: all named
    assert task_setting({"n_instr": 256, "p_i": 0.8}, defaults) == "n_instr=256"
    assert task_setting({"n_instr": 32}, defaults) is None and task_setting(None, defaults) is None


def _flip_run(root: Path, pe: str, seed: int, acc: float, task_params: dict) -> None:
    tag = "".join(f"-{v}" for v in task_params.values())
    ck = root / "checkpoints" / f"{pe}-flip{tag}-s{seed}"
    _checkpoint(ck, pe, {}, task="flip_flop", seed=seed, loss0=2.0)
    summary = json.loads((ck / "train_summary.json").read_text())
    summary["settings"] = {"task_params": task_params, "gen_profile": "cpu"}
    (ck / "train_summary.json").write_text(json.dumps(summary))
    res = {"peeval_diag_flip_flop_test": {"acc,none": acc, "acc_stderr,none": 0.01}}
    _results(root / "results" / f"{pe}-flip{tag}-s{seed}", ck, res)


def test_two_settings_are_two_rows(tmp_path):
    root = tmp_path / "store"
    for seed in FLIP:
        _flip_run(root, "cope", seed, FLIP[seed], {})
        _flip_run(root, "cope", seed, FLIP_256[seed], {"n_instr": 256})
        _flip_run(root, "rope", seed, ROPE_256[seed], {"n_instr": 256})
        _flip_run(root, "cope", seed, 0.9, {"n_instr": 128})  # no RoPE ran at 128 pairs
    db = make_store(root)  # the front page's store (rope, tape, pope, their flip-flop runs) around them
    ingest([root / "results", root / "checkpoints"], db, root=root)
    con = duckdb.connect(str(db), read_only=True)
    names = dict(con.execute("select name, count(*) from runs where pe = 'cope' group by name").fetchall())
    # the store says the setting in a column of its own: readers never parse it back out of the name
    settings = set(con.execute("select name, task_setting from runs where kind = 'diagnostic'").fetchall())
    con.close()
    assert names == {"cope": 3, "cope {n_instr=256}": 3, "cope {n_instr=128}": 3}
    assert {s for s in settings if s[0].startswith(("cope", "rope"))} == {
        ("cope", None), ("cope {n_instr=256}", "n_instr=256"), ("cope {n_instr=128}", "n_instr=128"),
        ("rope", None), ("rope {n_instr=256}", "n_instr=256")}  # fmt: skip
    site = build_site(db, tmp_path / "site").parent
    rows = {r["name"]: r for r in json.loads((site / "data" / "diagnostics_table.json").read_text())
            if r["task"] == "flip_flop" and r["cell"] == "all"}  # fmt: skip
    assert abs(rows["cope"]["acc"] - sum(FLIP.values()) / 3) < 1e-12
    assert abs(rows["cope {n_instr=256}"]["acc"] - sum(FLIP_256.values()) / 3) < 1e-12
    # the front page compares each setting with the RoPE of that setting, and a setting no RoPE ran not at all
    vs_rope = (site / "index.html").read_text().split('id="vs_rope"', 1)[1].split("</table>", 1)[0]
    rows = {re.match(r"<td[^>]*>([^<]*)</td>", r)[1]: r for r in re.findall(r"<tr>(.*?)</tr>", vs_rope, flags=re.S)
            if re.match(r"<td[^>]*>", r)}  # fmt: skip
    assert "cope" in rows and "n_instr=128" not in vs_rope
    assert "baseline" in rows["rope {n_instr=256}"] and "at this setting" in rows["rope {n_instr=256}"]
    diff = sum(FLIP_256.values()) / 3 - sum(ROPE_256.values()) / 3  # 0.1333
    assert f"+{diff:.3f}" in rows["cope {n_instr=256}"], rows["cope {n_instr=256}"]
