"""Issue 56: the compare page paired a smoke run (a 384-token vocabulary) with `tape @cpu` (another tokenizer):
"19 documents (same targets)", ppl x9.097, though the same token positions covered 1,304 vs 1,696 bytes. Per-token
perplexities are paired only where the target blocks cover the same bytes; otherwise the page's data says why."""

from leaderboard.site.compare import compare_data


class _Store:
    """compare_data's reads: no samples or metrics, the perplexity blocks given."""

    labels: dict = {}

    def __init__(self, blocks):
        self.blocks = blocks

    def view(self, name, order=""):
        return [dict(r) for r in self.blocks] if name == "compare_blocks" else []


def _blocks(run, bytes_per_doc, ll=-10.0):
    return [{"run_id": run, "task": "peeval_ppl_pg19", "doc_id": d, "length": 256, "ll": ll - d, "tokens": 8,
             "bytes": b, "protocol": "targets", "target_start": 0, "target_end": 8}
            for d, b in enumerate(bytes_per_doc)]  # fmt: skip


def test_per_token_perplexity_is_paired_only_over_the_same_bytes():
    same = compare_data(_Store(_blocks("a", [30, 31, 32]) + _blocks("b", [30, 31, 32], ll=-12.0)))
    assert [p["n"] for p in same["ppl_pairs"]["a|b"]] == [3] and same["ppl_unpaired"] == {}
    other = compare_data(_Store(_blocks("a", [30, 31, 32]) + _blocks("c", [40, 41, 42], ll=-12.0)))
    assert other["ppl_pairs"] == {}
    why = other["ppl_unpaired"]["a|c"]
    assert "30 vs 40 bytes" in why and "another tokenizer" in why and "bits per byte" in why


def _store_of_two_setups(tmp_path):
    """A store of `tape` (a smoke run: 384-token vocabulary, trained at 64) and `tape @cpu` (2,048, at 256), each
    with its perplexity at 64 and 256 tokens."""
    import json

    from leaderboard.site.context import SiteStore
    from leaderboard.store import connect, insert_rows

    con = connect(tmp_path / "s.duckdb")
    runs, metrics, eff = [], [], []
    for run, name, vocab, L, ppl in (("a", "tape", 384, 64, 40.0), ("b", "tape @cpu", 2048, 256, 300.0)):
        ck = f"checkpoints/{run}"
        runs.append({"run_id": run, "name": name, "kind": "pretrain", "source": "local", "checkpoint": ck,
                     "training_length": L})  # fmt: skip
        eff.append({"checkpoint": ck, "pe": "tape", "summary": json.dumps({"settings": {"tokenizer": "bpe",
                    "vocab_size": vocab}})})  # fmt: skip
        for length in (64, 256):
            metrics.append({"run_id": run, "task": "peeval_ppl_pg19", "metric": f"ppl@{length}", "filter": "none",
                            "value": ppl * length / 64})  # fmt: skip
    insert_rows(con, "runs", runs)
    insert_rows(con, "metrics", metrics)
    insert_rows(con, "efficiency", eff)
    return SiteStore(con)


def test_every_perplexity_row_shows_its_own_training_length_and_tokenizer(tmp_path):
    """A run trained at 64 tokens was drawn under "training length 256" beside `tape @cpu`, in its colour and
    line: each row now carries its own training length and tokenizer, each tokenizer gets its own chart marked
    with its own training length, and no two lines of a chart look alike."""
    from leaderboard.charts import distinct_styles, series_style
    from leaderboard.site.ppl import here_groups

    store = _store_of_two_setups(tmp_path)
    rows = store.view("ppl_by_length", order="name, length")
    assert {(r["name"], r["training_length"], r["tokenizer"]) for r in rows} == {
        ("tape", 64, "bpe 384"), ("tape @cpu", 256, "bpe 2048")}  # fmt: skip
    groups = here_groups(rows, {"tape", "tape @cpu"}, 256)
    by_label = {label: ([n for n in ("tape", "tape @cpu") if member(n)], marks) for label, member, marks in groups}
    assert by_label == {
        "models trained here (bpe 2048 tokenizer)": (["tape @cpu"], [(256, "training length 256")]),
        "models trained here (bpe 384 tokenizer)": (["tape"], [(64, "training length 64")]),
    }
    assert series_style("tape") == series_style("tape @cpu")  # an encoding's colour on every chart ...
    styles = distinct_styles({n: series_style(n) for n in ("tape", "tape @cpu")})
    assert styles["tape"] != styles["tape @cpu"] and styles["tape"][0] == styles["tape @cpu"][0]  # ... not its line
    store.con.close()
