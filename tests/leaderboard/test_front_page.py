"""Issue 31: the front page answers "better than RoPE, by how much, how sure" first; charts do not mislead
(one colour per encoding on every chart, the training length marked, seeds as a mean and a band); every
number shows its support; the store's efficiency.pe means what runs.pe means.

The store here: rope, tape, pope pretrained at 64 tokens (one seed, perplexity at 64 / 128 / 256 with the
scored tokens, passkey with lm-eval's stderr), and a flip-flop diagnostic with three seeds of rope and tape.
Expected numbers are worked out by hand (or by scipy, an independent implementation) from the inputs.
The new modules are imported inside the tests that need them, so the rest of this file runs (and fails) on
the code before issue 31."""

import json
import math
import re
from html import escape as html_escape
from pathlib import Path

import duckdb
import pytest
from helpers.browser import CHROMIUM, CHROMIUM_FLAGS

from leaderboard.ingest import ingest  # noqa: E402
from leaderboard.site import build_site  # noqa: E402
from leaderboard.site.charts import ENCODING_COLORS, OUTCOME_COLORS, heatmap, line_chart, ratio_chart  # noqa: E402
from leaderboard.store import table_ddl  # noqa: E402

TRAIN = 64
LENGTHS = (64, 128, 256)
#: name -> (pe_options, ppl at LENGTHS, passkey acc); hand-picked
PRETRAIN = {
    "rope": ({}, (40.0, 60.0, 400.0), 0.5),
    "tape": ({"equivariant": False}, (30.0, 33.0, 48.0), 0.75),
    "pope": ({}, (36.0, 42.0, 100.0), 0.25),
}
#: flip-flop test accuracy per seed
FLIP = {"rope": (0.60, 0.70, 0.80), "tape": (0.9960, 0.9967, 0.9974)}  # tape: mean 0.9967
TOKENS = {64: 252, 128: 508, 256: 1020}  # scored tokens per length
CLAIM = "tape-f3-passkey:tape-vs-rope"
OTHER_CLAIM = "tape-f3-passkey:tape-vs-nope"


def _prov(ckpt: Path) -> dict:
    return {"peeval_version": "0.1.0", "git_commit": "abc", "model": "peeval", "model_args": {"pretrained": str(ckpt)},
            "checkpoint": str(ckpt), "pe": "x", "max_length": 320, "training_length": TRAIN, "dtype": "torch.float32",
            "protocol": {"ppl": "disjoint windows"}, "seed": 0, "versions": {"lm_eval": "0.4.13"},
            "date": "2026-11-22T10:00:00+00:00"}  # fmt: skip


def _checkpoint(d: Path, pe: str, opts: dict, task=None, seed=0, loss0=6.0):
    d.mkdir(parents=True)
    (d / "train_summary.json").write_text(json.dumps({"pe": pe, "pe_options": opts, "task": task, "seed": seed,
        "params": 1000, "steps": 3, "tokens": 300, "train_time_s": 2.0, "tokens_per_s": 150.0,
        "flops_per_token": 6000.0, "final_val_loss": loss0 - 1, "final_val_ppl": math.exp(loss0 - 1),
        "training_length": TRAIN}))  # fmt: skip
    rows = "".join(f"{s},{100 * s},0.001,{loss0 - 0.4 * s - 0.1 * seed},{loss0 - 0.3 * s + 0.1 * seed},{s}\n"
                   for s in (1, 2, 3))  # fmt: skip
    (d / "train_curve.csv").write_text("step,tokens,lr,train_loss,val_loss,elapsed_s\n" + rows)


def _results(d: Path, ckpt: Path, results: dict):
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({"results": results, "peeval": _prov(ckpt)}))


def make_store(root: Path, learned: bool = False) -> Path:
    if learned:  # a learned table of TRAIN rows: peeval_ppl writes its cell at 64 and none past it (issue 43)
        ck = root / "checkpoints" / "learned"
        _checkpoint(ck, "learned", {})
        _results(root / "results" / "learned", ck, {"peeval_ppl_pg19": {"ppl@64,none": 45.0, "bpb@64,none": 1.3,
                                                                        "tokens@64,none": TOKENS[64]}})  # fmt: skip
        ck = root / "checkpoints" / "learned-128"  # a 128-row table trained at 64: cells at 64 and 128, none past
        _checkpoint(ck, "learned", {"max_positions": 128})
        _results(
            root / "results" / "learned-128",
            ck,
            {
                "peeval_ppl_pg19": {
                    f"{m}@{L},none": v
                    for L in (64, 128)
                    for m, v in (("ppl", 44.0), ("bpb", 1.3), ("tokens", TOKENS[L]))
                }
            },
        )
        for seed, acc in enumerate(FLIP["rope"]):  # and a flip-flop-only learned row: it read no perplexity
            ck = root / "checkpoints" / f"learned-flip-s{seed}"
            _checkpoint(ck, "learned", {"max_positions": 4096}, task="flip_flop", seed=seed, loss0=2.0)
            res = {"peeval_diag_flip_flop_test": {"acc,none": acc, "acc_stderr,none": 0.01}}
            _results(root / "results" / f"learned-flip-s{seed}", ck, res)
    for pe, (opts, ppl, pk) in PRETRAIN.items():
        ck = root / "checkpoints" / pe
        _checkpoint(ck, pe, opts)
        res = {
            "peeval_ppl_pg19": {f"ppl@{L},none": v for L, v in zip(LENGTHS, ppl)}
            | {f"bpb@{L},none": math.log2(v) / 4 for L, v in zip(LENGTHS, ppl)}
            | {f"tokens@{L},none": TOKENS[L] for L in LENGTHS},
            "peeval_passkey": {"acc,none": pk, "acc_stderr,none": 0.1}
            | {f"acc@{L}@{d},none": pk for L in LENGTHS for d in (0.0, 1.0)},
        }
        _results(root / "results" / pe, ck, res)
    for pe, accs in FLIP.items():
        for seed, acc in enumerate(accs):
            ck = root / "checkpoints" / f"{pe}-flip-s{seed}"
            _checkpoint(ck, pe, PRETRAIN[pe][0], task="flip_flop", seed=seed, loss0=2.0)
            res = {"peeval_diag_flip_flop_test": {"acc,none": acc, "acc_stderr,none": 0.01}}
            _results(root / "results" / f"{pe}-flip-s{seed}", ck, res)
    db = root / "peeval.duckdb"
    ingest([root / "results", root / "checkpoints"], db, root=root)
    # a decided claim resting on tape's passkey run (the claims stage's own file, beside the store)
    con = duckdb.connect(str(db), read_only=True)
    tape_pk = con.execute("select run_id from metrics join runs using (run_id) where kind = 'pretrain' and pe = "
                          "'tape' and task = 'peeval_passkey' limit 1").fetchone()[0]  # fmt: skip
    con.close()
    cc = duckdb.connect(str(root / "claims.duckdb"))
    cc.execute(table_ddl("claims"))
    cc.execute("insert into claims (claim_id, paper, ref, task, metric, compared, paper_value, peeval_value, stderr, "
               "n, seeds, verdict, test, setting_diff, run_ids) values (?, 'TAPE', 'fig 3', 'peeval_passkey', 'acc', "
               "'tape vs rope', 0.5, 0.25, 0.1, 10, 1, 'reproduced', 'se', '', ?)",
               [CLAIM, json.dumps([tape_pk])])  # fmt: skip
    cc.execute("insert into claims (claim_id, paper, ref, task, metric, compared, paper_value, peeval_value, stderr, "
               "n, seeds, verdict, test, setting_diff, run_ids) values (?, 'TAPE', 'fig 3', 'peeval_passkey', 'acc', "
               "'tape vs nope', 0.5, 0.25, 0.1, 10, 1, 'reproduced', 'se', '', ?)",
               [OTHER_CLAIM, json.dumps([tape_pk])])  # fmt: skip
    cc.close()
    return db


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("front")
    return build_site(make_store(root), root / "site")


def _row(html: str, table: str, name: str) -> str:
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    return next(r for r in rows if re.match(rf"<td[^>]*>{re.escape(name)}</td>", r))


def _cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", " ", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]


# ----------------------------------------------------------------------------- statistics
def test_t_quantile_is_students_not_the_normal():
    from peeval.records import t_quantile

    # printed t tables (two-sided 95%): df 1: 12.706, 2: 4.303, 4: 2.776, 10: 2.228; the normal's 1.960
    for df, want in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (math.inf, 1.960)):
        assert t_quantile(0.975, df) == pytest.approx(want, abs=5e-4)
    stats = pytest.importorskip("scipy.stats")
    for df in (1.47, 2.6, 7.3):
        assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-8)


def test_welch_interval_of_two_seed_estimates():
    from peeval.records import SeedEstimate, welch_difference

    stats = pytest.importorskip("scipy.stats")
    a = SeedEstimate(0.85, 0.05, 200, 2)
    b = SeedEstimate(0.60, 0.10, 200, 2)
    d = welch_difference(a, b)
    se = math.sqrt(0.05**2 + 0.10**2)
    df = se**4 / (0.05**4 / 1 + 0.10**4 / 1)
    half = stats.t.ppf(0.975, df) * se
    assert (d.value, d.df) == (pytest.approx(0.25), pytest.approx(df))
    assert (d.lo, d.hi) == (pytest.approx(0.25 - half), pytest.approx(0.25 + half))
    assert d.lo < 0 < d.hi  # with z = 2 the interval would wrongly exclude 0 (0.25 - 2 * 0.1118 > 0)
    # one seed against three: a spread over examples is no spread over seeds -> no interval
    assert welch_difference(SeedEstimate(0.9, 0.02, 100, 1), SeedEstimate(0.6, 0.05, 300, 3)) is None
    assert welch_difference(SeedEstimate(0.9, None, 100, 1), SeedEstimate(0.6, None, 100, 1)) is None


def test_compare_perplexity_without_seeds_says_so():
    from leaderboard.site import front

    col = front.Column("peeval_ppl_pg19", "ppl@64", "pg19 ppl@64", "ppl", 64)
    c = front.compare(col, [front.Run(30.0, None, None, 252, "x")], [front.Run(40.0, None, None, 252, "r")])
    assert c.text == "×0.750" and c.better is True and c.diff is None and not c.beyond
    assert "no interval" in c.sub and "252" in c.sub and "1 seed" in c.sub
    # several seeds each: an interval on the log scale
    c = front.compare(col, [front.Run(v) for v in (30.0, 31.0, 29.0)], [front.Run(v) for v in (40.0, 41.0, 39.0)])
    assert c.diff is not None and "CI" in c.sub and c.beyond  # 0.75 with that little spread: clearly better


def test_win_rate_counts_only_what_an_interval_decides():
    """A win or a loss only where the interval excludes parity; the sign of a point estimate decides nothing."""
    from leaderboard.site import front
    from peeval.records import Difference

    assert not hasattr(front, "mean_ranks")  # a rank averaged over different columns per encoding: dropped
    up, down, around = (Difference(0.2, 0.1, 0.3, 8.0), Difference(-0.2, -0.3, -0.1, 8.0),
                        Difference(0.2, -0.1, 0.5, 8.0))  # fmt: skip
    cells = [front.VsCell("", "", True, True, diff=up), front.VsCell("", "", False, True, diff=down),
             front.VsCell("", "", True, False, diff=around), front.VsCell("", "", True, False), None]  # fmt: skip
    assert [c.outcome for c in cells if c] == ["win", "loss", "within noise", "no interval"]
    wr = front.win_rate(cells)
    assert (wr.wins, wr.losses, wr.noise, wr.no_interval, wr.compared) == (1, 1, 1, 1, 4)
    assert wr.text == "1 won, 1 lost" and "1 within noise, 1 no interval" in wr.sub
    # compare(): a ratio below 1 whose interval includes 1 is within noise, not a win
    col = front.Column("t", "ppl@64", "ppl@64", "ppl", 64)
    c = front.compare(col, [front.Run(v) for v in (29.0, 39.0, 48.5)], [front.Run(v) for v in (30.0, 40.0, 50.0)])
    assert c.better is True and c.diff.lo < 0 < c.diff.hi and c.outcome == "within noise"
    # CoPE "+0.000": no difference at all is never a win
    col = front.Column("t", "acc", "acc", "acc")
    c = front.compare(col, [front.Run(v) for v in (1.0, 1.0, 1.0)], [front.Run(v) for v in (1.0, 1.0, 1.0)])
    assert c is not None and c.outcome != "win"


# ----------------------------------------------------------------------------- charts
def test_heatmap_prints_values_near_one():
    svg = heatmap(["a"], ["x", "y", "z"], {("a", "x"): 0.9967, ("a", "y"): 0.5, ("a", "z"): 1.0}, title="t",
                  row_label="r", col_label="c")  # fmt: skip
    labels = re.findall(r'class="cell"[^>]*>([^<]*)</text>', svg)
    assert labels == [".997", ".50", "1"]  # 0.9967 was printed '.00'


def _strokes(svg: str) -> dict[str, tuple[str, str]]:
    out = {}
    for m in re.finditer(r"<path d=\"[^\"]*\" class=\"mark line\" stroke=\"([^\"]+)\"( stroke-dasharray=\"([^\"]+)\")?"
                         r"[^>]*><title>([^<]*)</title>", svg):  # fmt: skip
        out[m[4]] = (m[1], m[3] or "")
    return out


def test_an_encoding_keeps_its_colour_across_charts_and_no_two_share_one():
    pts = [(1, 1.0), (2, 2.0)]
    one = _strokes(line_chart({"alibi": pts, "rope": pts}, title="a", xlabel="x", ylabel="y"))
    two = _strokes(line_chart({"cope": pts, "tape": pts, "alibi": pts}, title="b", xlabel="x", ylabel="y"))
    assert one["alibi"] == two["alibi"]  # was palette[0] on one chart, palette[2] on the other
    smol = [f"SmolLM2-135M-Instruct (GGUF Q4_1) {s}" for s in ("as shipped", "+ lora", "+ tape", "+ yarn")]
    names = ["alibi", "cope", "fire", "kerple", "learned(max_positions=4096)", "nope", "pope", "rope", "sinusoidal",
             "randpe(eval_length=4096,max_positions=8192)", "t5", "tape", "xpos", *smol]  # fmt: skip

    styles = _strokes(line_chart({n: pts for n in names}, title="c", xlabel="x", ylabel="y"))
    assert len(styles) == 17 and len(set(styles.values())) == 17  # 16 colours for 17 lines shared one before


# ----------------------------------------------------------------------------- the site
def test_front_page_states_training_length_budget_and_papers(site):
    html = site.read_text()
    budget = re.search(r'id="budget">(.*?)</p>', html, flags=re.S)[1]
    assert f"context length {TRAIN} tokens" in budget and "300 training tokens in 3 steps" in budget
    assert "1 seed" in budget and "flip_flop" in budget and "3 seeds" in budget
    for arxiv in ("2501.00712", "2405.18719", "2509.10534"):  # TAPE, CoPE, PoPE
        assert f'href="https://arxiv.org/abs/{arxiv}"' in html


def test_front_page_differences_against_rope(site):
    html = site.read_text()
    tape = _cells(_row(html, "vs_rope", "tape(equivariant=False)"))
    # pg19 ppl at the training length (64) and at 4x (256): 30 / 40 and 48 / 400; one seed each: no interval
    assert "×0.750" in tape[1] and "no interval" in tape[1] and "252 tokens" in tape[1]
    assert "×0.120" in tape[2] and "no interval" in tape[2] and "1,020 tokens" in tape[2]
    # passkey: 0.75 - 0.5, one run each with lm-eval's stderr 0.1: normal interval over examples
    assert "+0.250" in tape[3] and "normal" in tape[3]
    lo, hi = 0.25 - 1.959964 * math.hypot(0.1, 0.1), 0.25 + 1.959964 * math.hypot(0.1, 0.1)
    assert f"{lo:+.3f} to {hi:+.3f}" in tape[3]
    # flip-flop with 3 seeds each: Welch, t not z
    a, b = FLIP["tape"], FLIP["rope"]
    ma, mb = sum(a) / 3, sum(b) / 3
    sa = math.sqrt(sum((x - ma) ** 2 for x in a) / 2 / 3)
    sb = math.sqrt(sum((x - mb) ** 2 for x in b) / 2 / 3)
    df = (sa**2 + sb**2) ** 2 / (sa**4 / 2 + sb**4 / 2)
    assert f"{ma - mb:+.3f}" in tape[4] and "3 vs 3 seeds" in tape[4] and f"df {df:.1f}" in tape[4]
    # the claim decided on tape's passkey run is linked from that cell
    assert f'href="claims.html#{CLAIM}"' in _row(html, "vs_rope", "tape(equivariant=False)")
    # a claim on the same run against another encoding is not shown in a column about RoPE
    assert OTHER_CLAIM not in _row(html, "vs_rope", "tape(equivariant=False)")
    # pope has no flip-flop runs; pope is below rope's perplexity at 64 and 256 (one seed: no interval) and
    # below its passkey (an interval that includes 0): no win, no loss (was "2/3" on the point estimates)
    pope = _cells(_row(html, "vs_rope", "pope"))
    assert "not run" in pope[4] and "0 won, 0 lost" in pope[5] and "1 within noise, 2 no interval" in pope[5]
    assert "no interval" in pope[1] and "within noise" in pope[3]


def test_numbers_show_their_support_and_no_unsupported_best(site):
    html = site.read_text()
    body = html.split('id="leaderboard"', 1)[1].split("</table>", 1)[0]
    head = re.findall(r"<th>(.*?)</th>", body)
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)[1:]
    for row in rows:
        tds = re.findall(r"<td([^>]*)>(.*?)</td>", row, flags=re.S)
        for h, (attrs, text) in zip(head, tds):
            if " ppl@" in h and "–" not in text:
                assert "tokens" in text and "no stderr" in text, (h, text)
                assert "best" not in attrs, (h, text)  # a perplexity without an error is never 'best'
            if h.startswith("passkey"):
                assert "±" in text, (h, text)
            if "best" in attrs:  # only where there is an error: passkey (lm-eval's) and flip-flop (3 seeds)
                assert h.startswith(("passkey", "flip_flop")) and "±" in text, (h, text)
    assert "best" in body


def test_run_page_sorts_lengths_as_numbers(site):
    run = next(p for p in (site.parent / "runs").glob("*.html") if "<td>peeval_passkey</td>" in p.read_text())
    metrics = re.findall(r"<td>(acc@\d+@[\d.]+)</td>", run.read_text())
    lengths = [int(m.split("@")[1]) for m in metrics]
    assert lengths and lengths == sorted(lengths)  # acc@128 before acc@64 before


def test_charts_mark_training_length_and_draw_seeds_as_a_band(site):
    ppl = (site.parent / "ppl.html").read_text()
    assert f"training length {TRAIN}" in ppl and 'class="vline"' in ppl
    training = (site.parent / "training.html").read_text()
    flip = next(s for s in re.findall(r"<svg.*?</svg>", training, flags=re.S) if "flip_flop: val_loss" in s)
    lines = _strokes(flip)
    assert set(lines) == {"rope (mean of 3 seeds)", "tape(equivariant=False) (mean of 3 seeds)"}  # not one zig-zag
    assert flip.count('class="band"') == 2


def test_the_front_page_opens_with_each_encodings_ratio_to_rope_as_a_picture(site):
    """Issue 58: a picture before any table: per encoding (one row each, RoPE the baseline, not drawn) its
    perplexity ÷ RoPE's at the training length and at the longest length, the point where the table says it is
    and coloured by the table's outcome word, then one sentence counting what the picture shows."""
    html = site.read_text()
    fig = html.split('<figure id="picture"', 1)[1].split("</figure>", 1)[0]
    assert html.index('<figure id="picture"') < html.index('id="budget"') < html.index('id="vs_rope"')
    svgs = re.findall(r"<svg.*?</svg>", fig, flags=re.S)
    assert len(svgs) == 2 and f"at {TRAIN} tokens (in distribution)" in svgs[0] and "training length" in svgs[1]
    table = html.split('id="vs_rope"', 1)[1].split("</table>", 1)[0]
    names = [re.sub(r"<[^>]+>", "", n) for n in re.findall(r"<tr><td[^>]*>(.*?)<", table)]
    drawn = [n for n in names if n != "rope"]
    colour = OUTCOME_COLORS  # the declared palette: the dot wears the colour of the table's word
    counted = {"win": 0, "loss": 0}
    for name in drawn:
        cell = _cells(_row(html, "vs_rope", name))[1]  # ppl ÷ RoPE at the training length
        if "×" not in cell:
            continue
        ratio = re.search(r"×(\d\.\d{3})", cell)[1]
        outcome = next(w for w in ("win", "loss", "within noise", "no interval") if w in cell)
        counted[outcome] = counted.get(outcome, 0) + 1
        dot = re.search(rf'<circle [^>]*fill="([^"]+)" class="mark"><title>{re.escape(html_escape(name))}, '
                        rf'[^:]*: ×{ratio}[^<]*: {outcome}</title>', svgs[0])  # fmt: skip
        assert dot and dot[1] == colour[outcome], (name, ratio, outcome)
    assert sum(counted.values()) >= 2, counted
    caption = re.sub(r"<[^>]+>", "", fig.split("<figcaption>", 1)[1])
    assert f"{counted['win']} of " in caption and f"beat RoPE and {counted['loss']} lose" in caption, caption


def test_the_pictures_row_names_are_whole():
    """Issue 58: the picture cut "tape(equivariant=False) @cpu-claims" to "tape(…@cpu-claims" (23 characters), so
    TAPE without its equivariance read as no encoding at all. Each name is now written whole, over as many lines as
    it needs (at most 23 characters each: what the 166 px name column holds at 11 px), and no two rows overlap."""
    names = ["tape @cpu-claims", "tape(equivariant=False) @cpu-claims",
             "randpe(eval_length=4096,max_positions=8192) @cpu-claims", "a" * 50]  # fmt: skip
    rows = [{"name": n, "cells": {"p": (1.0 + i / 10, 0.9, 1.5, "within noise")}} for i, n in enumerate(names)]
    svg = ratio_chart(rows, ["p"], title="t")
    labels = re.findall(r'<text x="[\d.]+" y="([\d.]+)" class="legend" text-anchor="end">(.*?)<title>', svg)
    assert len(labels) == len(names) and "…" not in svg
    last = 0.0
    for (y, body), name in zip(labels, names):
        lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", body)
        assert "".join(lines).replace(" ", "") == name.replace(" ", ""), (lines, name)  # every character, in order
        assert all(len(x) <= 23 for x in lines), lines
        dys = [float(d) for d in re.findall(r'dy="([\d.]+)"', body)]
        top, bottom = float(y) - 11, float(y) + sum(dys)  # the first line's cap height to the last line's baseline
        assert top > last, (name, top, last)  # below the row above
        last = bottom
    assert [len(re.findall("<tspan", b)) for _, b in labels] == [1, 2, 3, 3]
    height = float(re.search(r'viewBox="0 0 [\d.]+ ([\d.]+)"', svg)[1])
    assert last < height - 36  # above the axis label and the legend


def test_efficiency_pe_is_the_encodings_name(site):
    """``where pe = 'tape'`` finds the same checkpoints in efficiency as in runs (options live in pe_options)."""
    con = duckdb.connect(str(site.parent.parent / "peeval.duckdb"), read_only=True)
    try:
        runs = con.execute("select count(distinct checkpoint) from runs where pe = 'tape'").fetchone()[0]
        eff = con.execute("select count(*) from efficiency where pe = 'tape'").fetchone()[0]
        assert runs == eff == 4  # pretrain + 3 flip-flop seeds; was 0 (pe held 'tape(equivariant=False)')
        opts = con.execute("select distinct pe_options from efficiency where pe = 'tape'").fetchall()
    finally:
        con.close()
    assert [json.loads(o) for (o,) in opts] == [{"equivariant": False}]


def test_first_screen_at_1400px(site):
    """What a visitor sees without scrolling: the differences against RoPE and the training length, the
    encoding column in view after scrolling the table sideways; a heatmap value of 0.9967 printed; rope drawn
    in one colour on two charts."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(site.as_uri())
            for width, height in ((1400, 900), (390, 844)):  # the picture opens the page, on a phone too
                page.set_viewport_size({"width": width, "height": height})
                first = page.locator("#picture svg.chart").first.bounding_box()
                assert first and first["y"] < height / 2 and first["x"] + first["width"] <= width, (width, first)
            page.set_viewport_size({"width": 1400, "height": 900})
            pic = page.locator("#picture").bounding_box()
            assert pic["y"] + pic["height"] <= 900, pic  # the whole picture and its reading on the first screen
            budget = page.locator("#budget")
            assert budget.is_visible() and f"context length {TRAIN}" in budget.inner_text()
            assert budget.bounding_box()["y"] + budget.bounding_box()["height"] <= 900
            cell = page.locator("#vs_rope tbody tr", has_text="tape(equivariant=False)").locator("td").nth(1)
            box = cell.bounding_box()
            assert box and box["y"] + box["height"] <= 900 and box["x"] + box["width"] <= 1400
            assert "×0.750" in cell.inner_text()
            # the seed papers and their encodings: named with their verdicts, and their rows start on this screen
            papers = page.locator("#papers")
            assert papers.bounding_box()["y"] + papers.bounding_box()["height"] <= 900
            assert all(short in papers.inner_text() for short in ("TAPE", "CoPE", "PoPE"))
            for name in ("tape(equivariant=False)", "pope"):
                row = page.locator("#vs_rope tbody tr", has_text=name).first.bounding_box()
                assert row and row["y"] < 900, name
            for tid in ("vs_rope", "leaderboard"):  # wide tables: the encoding column stays in view
                wrap = page.locator(f"#{tid}").locator("xpath=..")
                wrap.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
                first = page.locator(f"#{tid} tbody tr td:first-child").first.bounding_box()
                outer = wrap.bounding_box()
                assert first and first["x"] >= outer["x"] - 1, tid
            page.goto((site.parent / "diagnostics.html").as_uri())
            texts = page.evaluate(
                "() => Array.from(document.querySelectorAll('svg.chart text.cell'), t => t.textContent)"
            )
            assert ".997" in texts, texts
            page.goto((site.parent / "ppl.html").as_uri())
            strokes = page.evaluate(
                "() => Array.from(document.querySelectorAll('svg.chart')).map(s => "
                "Array.from(s.querySelectorAll('path.line')).filter(p => p.dataset.series === 'rope')"
                ".map(p => getComputedStyle(p).stroke)).filter(a => a.length)"
            )
            assert len(strokes) >= 2 and len({s[0] for s in strokes}) == 1, strokes
        finally:
            browser.close()


def test_training_page_table_is_one_row_per_checkpoint_at_its_last_step(site):
    """Every step of every curve stays a download (data page); the page's table is each checkpoint's last point."""
    con = duckdb.connect(str(site.parent.parent / "peeval.duckdb"), read_only=True)
    try:
        last = dict(con.execute("select checkpoint, max(step) from training_curves group by 1").fetchall())
        points = con.execute("select count(*) from training_curves").fetchone()[0]
    finally:
        con.close()
    rows = json.loads((site.parent / "data" / "training_summary.json").read_text())
    assert {r["checkpoint"]: r["steps"] for r in rows} == last and points > len(rows)
    assert "training_curves.csv" in (site.parent / "data.html").read_text()


def test_a_column_rope_never_ran_is_left_out_of_the_rope_table_and_said_so(tmp_path):
    """CoPE's counting compares absolute and relative encodings, not RoPE: its column would read "not run" on
    every row of the comparison with RoPE; it stays in the encodings table and a line under the first says so."""
    db = make_store(tmp_path)
    for seed in (0, 1):
        ck = tmp_path / "checkpoints" / f"tape-count-s{seed}"
        _checkpoint(ck, "tape", PRETRAIN["tape"][0], task="counting", seed=seed, loss0=2.0)
        res = {"peeval_diag_counting_test": {"acc,none": 0.5 + 0.1 * seed, "acc_stderr,none": 0.01}}
        _results(tmp_path / "results" / f"tape-count-s{seed}", ck, res)
    ingest([tmp_path / "results", tmp_path / "checkpoints"], db, root=tmp_path)
    html = build_site(db, tmp_path / "site").read_text()
    vs = json.loads((tmp_path / "site" / "data" / "vs_rope.json").read_text())
    assert vs and not any("counting" in k for k in vs[0]) and any("flip flop" in k for k in vs[0])
    assert "No RoPE run for counting_test acc" in html
    board = json.loads((tmp_path / "site" / "data" / "leaderboard.json").read_text())
    assert any("counting" in k for k in board[0])


def test_an_interval_that_includes_parity_is_no_win_no_colour_and_no_rank(tmp_path):
    """Issue 43 item 5: a cell is a win or a loss only when its interval excludes parity. pope's perplexity is
    below rope's on every seed's mean (×0.971) but the seeds spread so much that the 95% interval includes 1: the
    front page said "win" in green, counted it in "wins" and ranked pope above rope. tape has one seed (no
    interval): no win either. The claim that rests on pope's runs ("not decidable here") is linked from the cell."""
    rope, pope = (30.0, 40.0, 50.0), (29.0, 39.0, 48.5)
    for pe, ppls in (("rope", rope), ("pope", pope), ("tape", (20.0,))):
        for seed, v in enumerate(ppls):
            ck = tmp_path / "checkpoints" / f"{pe}-s{seed}"
            _checkpoint(ck, pe, PRETRAIN[pe][0], seed=seed)
            res = {"peeval_ppl_pg19": {"ppl@64,none": v, "bpb@64,none": math.log2(v) / 4, "tokens@64,none": 252}}
            _results(tmp_path / "results" / f"{pe}-s{seed}", ck, res)
    db = tmp_path / "peeval.duckdb"
    ingest([tmp_path / "results", tmp_path / "checkpoints"], db, root=tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    pope_ids = [r for (r,) in con.execute("select run_id from runs where pe = 'pope'").fetchall()]
    con.close()
    cc = duckdb.connect(str(tmp_path / "claims.duckdb"))
    cc.execute(table_ddl("claims"))
    cc.execute("insert into claims (claim_id, paper, ref, task, metric, compared, verdict, setting_diff, run_ids) "
               "values ('pope-f2:pope-vs-rope', 'PoPE', 'fig 2', 'peeval_ppl_pg19', 'ppl@64', 'pope vs rope', "
               "'not decidable here', 'not decidable at this scale: 0.30 tokens per parameter', ?)",
               [json.dumps(pope_ids)])  # fmt: skip
    cc.close()
    html = build_site(db, tmp_path / "site").read_text()

    row = _row(html, "vs_rope", "pope")
    cells = _cells(row)
    assert "×0.971" in cells[1] and "CI" in cells[1]  # the point estimate is below 1 ...
    lo, hi = re.search(r"CI ×([\d.]+) to ×([\d.]+)", cells[1]).groups()
    assert float(lo) < 1 < float(hi)  # ... and the interval includes parity
    assert "within noise" in cells[1] and "win" not in re.sub("within", "", cells[1])
    tds = re.findall(r"<td([^>]*)>", row)
    assert not any(re.search(r'class="[^"]*\b(win|lose)\b', a) for a in tds), tds  # no colour
    assert "0 won, 0 lost" in cells[2]  # no win counted (was "1/1")
    assert 'href="claims.html#pope-f2:pope-vs-rope"' in row and "not decidable here" in cells[1]
    tape = _row(html, "vs_rope", "tape(equivariant=False)")
    assert "no interval" in _cells(tape)[1] and not re.search(r'class="[^"]*\b(win|lose)\b', tape)
    assert "0 won, 0 lost" in _cells(tape)[2]
    # no rank advantage: no rank column, and no row above the baseline on a point estimate
    vs = json.loads((tmp_path / "site" / "data" / "vs_rope.json").read_text())
    assert not any("rank" in k for k in vs[0]), list(vs[0])
    assert [r["encoding"] for r in vs] == [
        "rope",
        "tape(equivariant=False)",
        "pope",
    ]  # the baseline, then the papers' order
    # the first screen states the scale and what the claims page says about it
    budget = re.search(r'id="budget">(.*?)</p>', html, flags=re.S)[1]
    assert "0.30 tokens per parameter" in budget and "3 seeds" in budget and "0.00M parameters" not in budget
    assert 'href="claims.html#PoPE"' in html and "1 not decidable here" in html
    assert re.search(r'id="scale"><b>1 language-model pairs? (is|are) "not decidable at this scale"', html)


def test_axes_and_legends_stay_inside_the_chart_and_read_apart():
    """Issue 41: a log axis spanning under a decade drew its labels outside the picture (y = -72.7 in a 340-high
    viewBox) or none at all; legends cut four SmolLM2 entries to one prefix and ran past the bottom; a published
    profile's runs (``tape @cpu``) lost their encoding's colour and six rope extensions shared rope's blue."""
    pts = {n: [(256, 180.0 + i), (4096, 260.0 - i)] for i, n in enumerate(
        ["rope @cpu", "tape @cpu", *(f"rope (256 tokens) + {m} @cpu" for m in ("tape", "lora", "pi", "yarn", "theta")),
         *(f"SmolLM2-135M-Instruct (GGUF Q4_1) {s}" for s in ("as shipped", "+ lora", "+ tape", "+ yarn")),
         *(f"enc{i}" for i in range(12))])}  # fmt: skip
    svg = line_chart(pts, title="t", xlabel="x", ylabel="ppl", logx=True, logy=True)
    height = float(re.search(r'viewBox="0 0 [\d.]+ ([\d.]+)"', svg)[1])
    ys = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([-\d.]+)" class="tick" text-anchor="end">', svg)]
    assert len(ys) >= 3 and all(0 < y < height for y in ys), ys
    legend = [
        " ".join(re.findall(r"<tspan[^>]*>([^<]*)</tspan>", b)) for b in re.findall(r'class="legend">(.*?)<title>', svg)
    ]  # whole, over lines (issue 68 item 7)
    assert len(legend) == len(pts) == len(set(legend)) and "…" not in svg
    ly = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" class="legend"', svg)]
    assert max(ly) < height
    styles = _strokes(svg)
    # a published run is drawn in its encoding's own colour, solid (the palette is the declared one)
    assert styles["tape @cpu"] == (ENCODING_COLORS["tape"], "") and styles["rope @cpu"] == (ENCODING_COLORS["rope"], "")
    # series of different encodings or methods read apart: no two of them share a colour and dash
    methods = ("tape", "lora", "pi", "yarn", "theta")
    apart = ["rope @cpu", "tape @cpu", *(f"rope (256 tokens) + {m} @cpu" for m in methods),
             "SmolLM2-135M-Instruct (GGUF Q4_1) as shipped"]  # fmt: skip
    shared = [(a, b) for i, a in enumerate(apart) for b in apart[i + 1 :] if styles[a] == styles[b]]
    assert shared == [], shared
    # an adaptation with a method keeps the method's colour whatever the base (tape's red, dashed)
    assert styles["SmolLM2-135M-Instruct (GGUF Q4_1) + tape"][0] == styles["rope (256 tokens) + tape @cpu"][0]
    assert styles["rope (256 tokens) + tape @cpu"][0] == ENCODING_COLORS["tape"]


def test_cells_past_a_learned_table_say_not_applicable(tmp_path):
    """The learned model has no cell past its training length: "n/a" with the reason, not "not run" (its
    other columns are measured or not run as for any encoding), and it is no win or loss."""
    html = build_site(make_store(tmp_path, learned=True), tmp_path / "site").read_text()
    learned = _cells(_row(html, "vs_rope", "learned"))
    assert "×1.125" in learned[1]  # 45 / 40 at the training length
    assert "n/a" in learned[2] and "no position row past 64" in learned[2]  # ppl @256 (4x)
    assert "not run" in learned[3] and "n/a" not in learned[3]  # passkey: simply not run
    assert "0 won, 0 lost" in learned[-1]
    # the table's rows as the store records them (pe_options max_positions), not the training length
    wide = _cells(_row(html, "vs_rope", "learned(max_positions=128)"))
    assert "×1.1" in wide[1] and "no position row past 128" in wide[2] and "n/a" not in wide[3], wide
    # a learned row that read no perplexity at all (flip-flop runs only) is "not run", not n/a
    assert "n/a" not in _row(html, "vs_rope", "learned(max_positions=4096)")
    board = _cells(_row(html, "leaderboard", "learned"))
    assert board[2].startswith("n/a") and "n/a" not in "".join(board[3:]), board  # ppl @256; not passkey, flip-flop


def test_pages_do_not_depend_on_the_order_runs_were_ingested(tmp_path):
    """The same runs ingested in another order give byte-identical pages and downloads: seeds are summed in
    run-id order (rope's flip-flop accuracies 0.6 + 0.7 + 0.8 and 0.8 + 0.7 + 0.6 differ in the last bit)."""
    root = tmp_path / "a"
    db = make_store(root)
    other = tmp_path / "b"
    other.mkdir()
    (other / "claims.duckdb").write_bytes((root / "claims.duckdb").read_bytes())
    for d in sorted((root / "results").iterdir(), reverse=True):  # one run at a time, in reverse order
        ingest([d], other / "peeval.duckdb", root=root)
    ingest([root / "checkpoints"], other / "peeval.duckdb", root=root)
    a, b = build_site(db, tmp_path / "site-a").parent, build_site(other / "peeval.duckdb", tmp_path / "site-b").parent
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    differ = [str(f) for f in files if (a / f).read_bytes() != (b / f).read_bytes()]
    assert differ == []
