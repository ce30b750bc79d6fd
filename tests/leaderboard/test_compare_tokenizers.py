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
    assert (why["task"], why["length"], why["why"], why["doc"], why["a_bytes"], why["b_bytes"]) == (
        "peeval_ppl_pg19", 256, "tokenizer", 0, 30, 40)  # fmt: skip
    assert "30 vs 40 bytes" in why["text"] and "another tokenizer" in why["text"] and "bits per byte" in why["text"]


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
    store = _store_of_two_setups(tmp_path)
    rows = store.view("ppl_by_length", order="name, length")
    assert {(r["name"], r.get("training_length"), r.get("tokenizer")) for r in rows} == {
        ("tape", 64, "bpe 384"), ("tape @cpu", 256, "bpe 2048")}  # fmt: skip
    from leaderboard.site.charts import distinct_styles, series_style
    from leaderboard.site.ppl import here_groups

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


def _unpaired_store(tmp_path):
    """A store of two runs of the same 2 documents at 64 tokens under two tokenizers: the same target tokens
    (0..8 of each document) cover 30 and 31 bytes under the first, 40 and 41 under the second. Their cells
    worked out by hand: A ll -10, -14 (sum -24 over 16 tokens, 61 bytes): ppl e^1.5, bpb 24 / (61 ln 2); B ll
    -12, -12 (sum -24 over 16 tokens, 81 bytes): ppl e^1.5, bpb 24 / (81 ln 2): the same perplexity, though B
    spends fewer bits on each byte."""
    import math

    from leaderboard.store import connect, insert_rows

    con = connect(tmp_path / "s.duckdb")
    runs, metrics, blocks = [], [], []
    for run, name, ll, nbytes in (("a", "rope", [-10.0, -14.0], [30, 31]), ("b", "rope @cpu", [-12.0, -12.0],
                                                                           [40, 41])):  # fmt: skip
        runs.append({"run_id": run, "name": name, "kind": "pretrain", "source": "local", "seed": 0,
                     "checkpoint": f"checkpoints/{run}", "results_path": f"results/{run}/results.json"})  # fmt: skip
        blocks += [{"run_id": run, "task": "peeval_ppl_pg19", "doc_id": d, "length": 64, "ll": x, "tokens": 8,
                    "bytes": b, "protocol": "targets", "target_start": 0, "target_end": 8}
                   for d, (x, b) in enumerate(zip(ll, nbytes))]  # fmt: skip
        cells = {"ppl@64": math.exp(1.5), "bpb@64": 24 / (sum(nbytes) * math.log(2)), "tokens@64": 16.0}
        metrics += [{"run_id": run, "task": "peeval_ppl_pg19", "metric": m, "filter": "none", "value": v}
                    for m, v in cells.items()]  # fmt: skip
    insert_rows(con, "runs", runs)
    insert_rows(con, "metrics", metrics)
    insert_rows(con, "ppl_blocks", blocks)
    return con


def test_the_compare_page_says_why_perplexity_is_not_paired_and_shows_bits_per_byte(tmp_path):
    """Issue 56 item 2, the page itself: for two runs under two tokenizers compare.html (driven in Chromium) shows
    no perplexity ratio but the reason, with A's and B's bytes of the same target tokens in the order picked, and
    each run's bits per byte; the same runs swapped swap their numbers."""
    import math
    from pathlib import Path

    import pytest
    from helpers.browser import CHROMIUM
    from test_compare_page import compare_page

    from leaderboard.site import compare as page
    from leaderboard.site.build import ASSETS
    from leaderboard.site.context import SiteStore

    con = _unpaired_store(tmp_path)
    store = SiteStore(con)
    data = page.compare_data(store)
    assert data["ppl_pairs"] == {} and data["ppl_unpaired"]["a|b"]["why"] == "tokenizer"
    (corpus,) = data["metrics"]["a"]  # the corpus as named by what it read
    assert data["metrics"]["a"][corpus]["bpb@64"][0] == pytest.approx(24 / (61 * math.log(2)), rel=1e-15)
    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "compare.html").write_text(page.render(store).html, encoding="utf-8")
    for name, text in store.files.items():  # compare/<run>.js: each run's pairs, loaded when it is picked
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text, encoding="utf-8")
    for name in ("site.css", "site.js"):
        (site / "assets" / name).write_text((ASSETS / name).read_text(encoding="utf-8"), encoding="utf-8")
    con.close()
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    with compare_page(site) as (p, errors):
        p.select_option("#run-a", "a")
        p.select_option("#run-b", "b")
        why = p.locator("#ppl-unpaired").inner_text()
        assert "Perplexity not paired" in why and "A 30 bytes, B 40 bytes of document 0" in why, why
        assert "another tokenizer" in why and "bits per byte" in why
        assert not any(c.startswith("×") for c in p.locator("#paired td").all_inner_texts())  # no ratio
        cells = p.locator("#paired tbody tr").first.locator("td").all_inner_texts()
        assert cells[1] == "64" and float(cells[2]) == pytest.approx(24 / (61 * math.log(2)), rel=1e-3), cells
        assert float(cells[3]) == pytest.approx(24 / (81 * math.log(2)), rel=1e-3), cells
        p.select_option("#run-a", "b")
        p.select_option("#run-b", "a")
        assert "A 40 bytes, B 30 bytes" in p.locator("#ppl-unpaired").inner_text()
        swapped = p.locator("#paired tbody tr").first.locator("td").all_inner_texts()
        assert swapped[2:] == cells[2:][::-1], (cells, swapped)
    assert not errors, errors
