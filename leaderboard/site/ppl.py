"""The perplexity page: perplexity per tokenizer family on its own axes (models trained here share one 2k-token
vocabulary; adapted / external models have their own, so their perplexities are not comparable with ours); bits
per byte, which does not depend on the tokenizer, puts every model on one axis; the loss by position inside the
longest windows. The training length marked."""

from __future__ import annotations

from collections import defaultdict

from leaderboard.site.charts import line_charts
from leaderboard.site.context import Page, SiteStore
from leaderboard.site.tables import chart_page

NOTE = ("Fixed targets: the same target tokens of every document are scored at every length, each "
        "block of at most L/2 targets by one forward over the L tokens ending at the block's end, so only the "
        "context grows (docs/evaluating.md). Averaged over runs of the same name. Perplexity is per "
        "token of a model's own tokenizer, so models with different tokenizers get separate perplexity "
        "charts; bits per byte compares them all. The loss by position is the mean NLL per position bucket "
        "inside the longest windows. Each encoding keeps one colour (and dash) on every chart; the dashed "
        "vertical line is the training length. Infinite / exploding values are listed in the table and left "
        "off the charts.")  # fmt: skip


def loss_by_position_charts(store: SiteStore, corpus: str, groups) -> list[str]:
    """Issue 27 item 2: mean loss per position bucket inside the longest windows, per tokenizer group as the
    perplexity charts (each bucket averaged over runs of the same name), the training length marked."""
    rows = store.view("loss_by_position", "corpus = ?", [corpus], order="name, position")
    charts = []
    for group, member, marks in groups:
        series: dict[str, list] = defaultdict(list)
        for r in rows:
            if member(r["name"]):
                series[r["name"]].append((r["position"], r["nll"]))
        if series:
            xs = sorted({x for pts in series.values() for x, _ in pts})  # bucket starts: the last reaches a step on
            end = xs[-1] + (xs[-1] - xs[-2] if len(xs) > 1 else 0)
            inside = [m for m in marks if xs[0] <= m[0] <= end]
            charts += line_charts(series, title=f"{corpus}: loss by position in the longest windows, {group}",
                                  xlabel="position (tokens of context)", ylabel="mean NLL (nats)",
                                  vlines=inside)  # fmt: skip
    return charts


def tokenizer_groups(rows: list[dict], here: set[str], train_len: int | None) -> list[tuple]:
    """One perplexity chart per tokenizer (a per-token perplexity compares only within one): every row is keyed
    by the tokenizer its run recorded (its hash, else its training summary's kind and size), each chart marked
    with the training lengths of its rows (issue 56: a smoke run trained at 64 tokens with a 384-token
    vocabulary was drawn under "training length 256" beside the cpu profile's runs). A row that records no
    tokenizer is drawn on a chart of its own, never beside another's (issue 68: it joined the only known group).
    ``train_len``: the mark of the models trained here when no row of theirs records a length."""
    keys: dict[str, str | None] = {}
    labels: dict[str, str] = {}
    lengths: dict[str, list[int]] = {}
    for r in sorted(rows, key=lambda r: r["name"] not in here):  # a chart is named by the models trained here
        key = r.get("tokenizer_hash") or r.get("tokenizer")
        key = key if key is not None else f"\0{r['name']}"  # none recorded: its own chart
        keys.setdefault(r["name"], key)
        labels.setdefault(key, r.get("tokenizer") or "tokenizer not recorded")
        if r.get("training_length"):
            lengths.setdefault(key, []).append(r["training_length"])
    out = []
    for key in sorted(set(keys.values()), key=lambda k: (not any(n in here for n, v in keys.items() if v == k), k)):
        names = {n for n, k in keys.items() if k == key}
        mine = names & here
        who = "models trained here" if mine == names else "adapted / external models" if not mine else "models"
        seen = lengths.get(key) or ([train_len] if mine and train_len else [])
        if mine == names:  # the models trained here: their most common length (an extension's is its base's)
            marks = [max(set(seen), key=seen.count)] if seen else []
        else:
            marks = sorted(set(seen))
        label = f"{who} ({labels[key]} tokenizer)" if not key.startswith("\0") else f"{who} (tokenizer not recorded)"
        out.append((label, lambda n, names=names: n in names, [(L, f"training length {L:,}") for L in marks]))
    return out


def here_groups(rows: list[dict], here: set[str], train_len: int | None) -> list[tuple]:
    """The charts of the models trained here (:func:`tokenizer_groups` of their rows)."""
    return tokenizer_groups([r for r in rows if r["name"] in here], here, train_len)


def render(store: SiteStore) -> Page:
    rows = store.view("ppl_by_length", order="corpus, name, length")
    headers = store.columns("ppl_by_length")
    here = {r["name"] for r in store.view("here_names")}
    groups = tokenizer_groups(rows, here, store.training_length())
    charts = []
    for corpus in sorted({r["corpus"] for r in rows}):
        for group, member, marks in groups:
            series: dict[str, list] = defaultdict(list)
            for r in rows:
                if r["corpus"] == corpus and member(r["name"]):
                    series[r["name"]].append((r["length"], r["ppl"]))
            if series:
                xs = [x for pts in series.values() for x, _ in pts]
                inside = [m for m in marks if xs and min(xs) <= m[0] <= max(xs)]
                beyond = [f"{m[0]:,}" for m in marks if m not in inside]  # said, not drawn: squashes the axis
                title = f"{corpus}: ppl vs context length, {group}"
                if beyond:  # e.g. "pg19: ppl, adapted / external models (own tokenizer; trained at 8,192)"
                    title = f"{corpus}: ppl, {group[:-1]}; trained at {', '.join(beyond)})"
                charts += line_charts(series, title=title, xlabel="context length (tokens)", ylabel="ppl",
                                      logx=True, logy=True, vlines=inside)  # fmt: skip
        series = defaultdict(list)
        for r in rows:
            if r["corpus"] == corpus:
                series[r["name"]].append((r["length"], r["bpb"]))
        lengths = sorted(
            {m[0] for label, _, marks in groups if label.startswith("models trained here") for m in marks}
        )  # each group's own, on one axis
        bmark = [(L, f"training length {L} (models trained here)") for L in lengths]
        charts += line_charts(series, title=f"{corpus}: bits per byte vs context length (every model)",
                              xlabel="context length (tokens)", ylabel="bpb", logx=True, vlines=bmark)  # fmt: skip
        charts += loss_by_position_charts(store, corpus, groups)
    protocols = [r["p"] for r in store.view("ppl_protocols")]
    how = ("Protocol of these runs: " + "; ".join(sorted(protocols)) + ". ") if protocols else ""
    return chart_page(store, "ppl.html", "perplexity vs context length", charts, note=how + NOTE,
                      empty="no perplexity runs", tid="ppl_by_length_table", rows=rows, headers=headers)  # fmt: skip
