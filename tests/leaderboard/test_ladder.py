"""Issue 43's ladder of sizes: a model of another shape than its profile's is its own leaderboard row (never one
more seed of the default one), published folders keep their names, the claims judge the default shape only, and
the sizes page draws each encoding ÷ RoPE at every rung from the store (numbers chosen by hand)."""

import json
import math
from pathlib import Path

import pytest
from helpers.duck import query

from leaderboard.claims.matching import Store, matching_runs
from leaderboard.claims.schema import Variant
from leaderboard.ingest import ingest
from leaderboard.ingest.published import published_rows
from leaderboard.site import build_site

#: the cpu profile's shape (peeval/training/profiles.yaml) and the ladder's smaller rung (params/cpu-claims.yaml)
CPU = {"num_hidden_layers": 4, "hidden_size": 48, "num_attention_heads": 3, "num_key_value_heads": 3,
       "intermediate_size": 128, "vocab_size": 512}  # fmt: skip
D32 = {**CPU, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 86}
#: the cpu profile before issue 43 (the published cpu store's models)
OLD = {**CPU, "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 344,
       "vocab_size": 2048}  # fmt: skip
SMOKE = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4,
         "intermediate_size": 64, "vocab_size": 384}  # fmt: skip


def _run(root: Path, key: str, pe: str, seed: int, shape: dict | None, ppl: dict[int, float], params: int = 1000,
         profile: str = "cpu") -> Path:  # fmt: skip
    """A pretrained checkpoint's summary and its perplexity results (``ppl``: length -> value)."""
    ck = root / "checkpoints" / key
    ck.mkdir(parents=True)
    summary = {"pe": pe, "pe_options": {}, "task": None, "profile": profile, "seed": seed, "params": params,
               "steps": 10, "tokens": 40960, "training_length": 256}  # fmt: skip
    if shape is not None:
        summary["settings"] = {**shape, "steps": 10, "seq_len": 256}
    (ck / "train_summary.json").write_text(json.dumps(summary))
    (ck / "train_curve.csv").write_text("step,tokens,lr,train_loss,val_loss,elapsed_s\n10,40960,0.001,4.0,4.1,1.0\n")
    res = root / "results" / key
    res.mkdir(parents=True)
    prov = {"model": "peeval", "model_args": {"pretrained": f"checkpoints/{key}"}, "checkpoint": f"checkpoints/{key}",
            "pe": pe, "seed": seed, "date": "2026-11-27T06:00:00+00:00", "max_length": 4096, "training_length": 256,
            "run_kind": "pretrain", "protocol": {"ppl": "disjoint windows", "metadata": {}}}  # fmt: skip
    results = {"peeval_ppl_pg19": {f"ppl@{L},none": v for L, v in ppl.items()}
               | {f"tokens@{L},none": 1000 for L in ppl}}  # fmt: skip
    (res / "results.json").write_text(json.dumps({"results": results, "peeval": prov}))
    return res


def _names(db: Path) -> list[tuple]:
    return query(db, "SELECT name, count(*) FROM runs GROUP BY name ORDER BY name")


def test_two_shapes_of_one_encoding_are_two_rows_and_seeds_of_one_shape_one_row(tmp_path):
    for seed in (0, 1):
        _run(tmp_path, f"rope-s{seed}", "rope", seed, CPU, {256: 10.0})
        _run(tmp_path, f"rope-d32-s{seed}", "rope", seed, D32, {256: 20.0})
    _run(tmp_path, "rope-wide-heads", "rope", 0, {**D32, "num_attention_heads": 4, "num_key_value_heads": 4},
         {256: 20.0})  # fmt: skip
    ingest([tmp_path / "results"], tmp_path / "s.duckdb", root=tmp_path)
    assert _names(tmp_path / "s.duckdb") == [("rope", 2), ("rope [4x32, 4 heads, 4 kv heads]", 1), ("rope [4x32]", 2)]
    # the size is a column of its own (runs.size): what readers use, never parsed back out of the name
    sizes = query(tmp_path / "s.duckdb", "SELECT DISTINCT name, size FROM runs ORDER BY name")
    wide = "4x32, 4 heads, 4 kv heads"
    assert sizes == [("rope", None), (f"rope [{wide}]", wide), ("rope [4x32]", "4x32")]


def test_names_at_the_default_shape_or_without_settings_are_unchanged(tmp_path):
    _run(tmp_path, "smoke", "rope", 0, SMOKE, {64: 30.0}, profile="smoke")  # the smoke pipeline's models
    _run(tmp_path, "old", "tape", 0, None, {256: 30.0})  # a summary written before it recorded its settings
    _run(tmp_path, "other", "nope", 0, D32, {256: 30.0}, profile="no-such-profile")  # a profile unknown here
    ingest([tmp_path / "results"], tmp_path / "s.duckdb", root=tmp_path)
    assert _names(tmp_path / "s.duckdb") == [("nope", 1), ("rope", 1), ("tape", 1)]


def _published(root: Path, shapes: dict | None) -> Path:
    folder = root / "published" / "cpu"
    _run(folder, "rope", "rope", 0, OLD, {256: 10.0})
    _run(folder, "rope-d48", "rope", 0, CPU, {256: 12.0})
    src = {"profile": "cpu", "machine": "a test"}
    if shapes is not None:
        src["default_shapes"] = shapes
    (folder / "SOURCE.json").write_text(json.dumps(src))
    return folder


def test_a_published_folder_is_named_by_the_shapes_it_was_published_with(tmp_path):
    """The published cpu store's models are 4 x 128, today's cpu default is 4 x 48: a folder published before
    the ladder (no default_shapes) keeps its names; one that records its profiles' shapes names the others."""
    legacy = published_rows(_published(tmp_path / "a", None), tmp_path / "a")
    assert sorted(r["name"] for r in legacy["runs"]) == ["rope @cpu", "rope @cpu"]
    recorded = published_rows(_published(tmp_path / "b", {"cpu": OLD}), tmp_path / "b")
    assert sorted(r["name"] for r in recorded["runs"]) == [
        "rope @cpu", "rope [4x48, 3 heads, 3 kv heads, ffn 128, vocab 512] @cpu"]  # fmt: skip
    assert sorted((r["size"] or "") for r in recorded["runs"]) == ["", "4x48, 3 heads, 3 kv heads, ffn 128, vocab 512"]


def test_a_bad_default_shapes_names_the_file(tmp_path):
    from leaderboard.ingest import IngestError

    with pytest.raises(IngestError, match=r"SOURCE\.json: 'default_shapes' must map training profiles"):
        published_rows(_published(tmp_path, {"cpu": {"hidden_size": 48}}), tmp_path)


def test_the_claims_judge_the_default_shape_only():
    runs = {"a": {"run_id": "a", "name": "rope", "pe": "rope", "pe_options": {}, "kind": "pretrain", "seed": 0,
                  "checkpoint": "ck/a", "date": "2026-11-27"},
            "b": {"run_id": "b", "name": "rope [4x32]", "pe": "rope", "pe_options": {}, "kind": "pretrain",
                  "seed": 0, "checkpoint": "ck/b", "date": "2026-11-28", "size": "4x32"}}  # fmt: skip
    values = {("a", "t"): {"ppl@256": (10.0, None, 1)}, ("b", "t"): {"ppl@256": (20.0, None, 1)}}
    store = Store(runs=runs, values=values)
    assert matching_runs(store, Variant("rope", "rope"), {}, tasks=["t"]) == [["a"]]  # b is newer, same seed


#: (pe, shape, params, {length: ppl per seed}) chosen by hand: at 4 x 48 PoPE is sqrt(99/120) of RoPE in
#: distribution and 0.5 at 4,096; at 4 x 32 1.1 and 0.75
LADDER = [
    ("rope", CPU, 135600, {256: (10.0, 12.0), 4096: (100.0, 120.0)}),
    ("pope", CPU, 135792, {256: (9.0, 11.0), 4096: (50.0, 60.0)}),
    ("rope", D32, 66080, {256: (20.0, 22.0), 4096: (200.0, 240.0)}),
    ("pope", D32, 66208, {256: (22.0, 24.2), 4096: (150.0, 180.0)}),
]


def test_the_sizes_page_draws_each_encoding_over_rope_at_every_rung(tmp_path):
    for pe, shape, params, ppl in LADDER:
        for seed in (0, 1):
            key = f"{pe}-{shape['hidden_size']}-s{seed}"
            _run(tmp_path, key, pe, seed, shape, {L: v[seed] for L, v in ppl.items()}, params)
    ingest([tmp_path / "results", tmp_path / "checkpoints"], tmp_path / "s.duckdb", root=tmp_path)
    site = build_site(tmp_path / "s.duckdb", tmp_path / "site").parent
    rows = json.loads((site / "data" / "ladder_table.json").read_text())
    got = {(r["encoding"], r["rung"], r["length"]): (r["parameters"], r["ratio"]) for r in rows}
    assert got.keys() == {("pope", rung, length) for rung in ("4x48 (the profile's)", "4x32")
                          for length in ("256 (in distribution)", "4096 (longest)")}  # fmt: skip
    assert got["pope", "4x48 (the profile's)", "256 (in distribution)"] == (135600, pytest.approx(math.sqrt(99 / 120)))
    assert got["pope", "4x48 (the profile's)", "4096 (longest)"] == (135600, pytest.approx(0.5))
    assert got["pope", "4x32", "256 (in distribution)"] == (66080, pytest.approx(1.1))
    assert got["pope", "4x32", "4096 (longest)"] == (66080, pytest.approx(0.75))
    assert all(r["CI low"] is not None and r["CI low"] < r["ratio"] < r["CI high"] for r in rows)  # 2 seeds a side
    html = (site / "ladder.html").read_text()
    assert html.count('<svg class="chart"') == 1 and "pope ÷ rope by model size" in html
    assert "No ladder runs" not in html
    # the training page draws each rung's curves apart (old code: 4 x 32 and 4 x 48 averaged as one "rope")
    shown = json.loads((site / "data" / "training_summary.json").read_text())
    ropes = sorted((r["checkpoint"], r["shown as"]) for r in shown if r["checkpoint"].startswith("checkpoints/rope"))
    assert ropes == [
        ("checkpoints/rope-32-s0", "rope [4x32]"), ("checkpoints/rope-32-s1", "rope [4x32]"),
        ("checkpoints/rope-48-s0", "rope"), ("checkpoints/rope-48-s1", "rope")]  # fmt: skip
    # the front page compares the default rung only: no "pope [4x32]" row against the 4 x 48 RoPE
    index = (site / "index.html").read_text()
    vs = index[index.index('id="vs_rope"') :]
    assert "pope [4x32]" not in vs[: vs.index("</table>")]


def test_without_ladder_runs_the_sizes_page_says_so_in_one_line(tmp_path):
    for pe, shape, params, ppl in LADDER[:2]:
        _run(tmp_path, pe, pe, 0, shape, {L: v[0] for L, v in ppl.items()}, params)
    ingest([tmp_path / "results", tmp_path / "checkpoints"], tmp_path / "s.duckdb", root=tmp_path)
    html = (build_site(tmp_path / "s.duckdb", tmp_path / "site").parent / "ladder.html").read_text()
    assert '<svg class="chart"' not in html and html.count("No ladder runs in this store") == 1


def test_a_rung_keeps_its_encodings_colour_in_another_dash():
    from leaderboard.site.charts import series_style

    assert series_style("rope") == ("#1f77b4", "")  # leaderboard/site/charts.py ENCODING_COLORS
    assert series_style("rope [4x32]") == series_style("rope [4x32] @cpu-claims") == ("#1f77b4", "8 3 2 3")
    assert series_style("pope [4x32, 4 heads]")[0] == "#2ca02c"
