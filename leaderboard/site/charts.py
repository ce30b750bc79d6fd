"""Small inline-SVG charts for the static site: line charts and heatmaps, no JavaScript library.

Every text that reaches the SVG goes through :func:`html.escape`; each mark carries a
``<title>`` so hovering shows its value. Charts have class ``chart`` and their marks class
``mark`` (the browser test counts them).
"""

from __future__ import annotations

import math
import re
import zlib
from html import escape

from peeval.records import size_of

#: one colour per encoding, the same on every chart and page (peeval's 13 encodings, then the hashed rest)
ENCODING_COLORS = {"rope": "#1f77b4", "tape": "#d62728", "pope": "#2ca02c", "cope": "#ff7f0e", "alibi": "#9467bd",
                   "fire": "#8c564b", "kerple": "#e377c2", "learned": "#7f7f7f", "nope": "#bcbd22",
                   "randpe": "#17becf", "sinusoidal": "#393b79", "t5": "#637939", "xpos": "#843c39"}  # fmt: skip
#: colours of names that are no known encoding (picked by a hash of the name, so fixed across charts too)
OTHER_COLORS = ("#000000", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#ad494a", "#8c6d31")
#: dash patterns: an encoding trained here is solid; an adapted model dashed; a model as shipped / other dotted
DASH_ADAPTED, DASH_OTHER = "7 3", "2 3"
#: an encoding trained at another model size than its profile's (a ladder rung): its colour, dash-dotted
DASH_SIZED = "8 3 2 3"


def series_style(name: str) -> tuple[str, str]:
    """(colour, SVG dash pattern) of a series, a function of its name alone so an encoding looks the same on
    every chart: ``learned(max_positions=4096)`` is ``learned``'s colour, solid; ``rope [4x32]`` rope's,
    dash-dotted; ``SmolLM2-135M + tape`` is tape's colour, dashed; anything else a hashed colour, dotted."""
    own = name.rsplit(" @", 1)[0] if " @" in name else name  # a published profile's run: its encoding's style
    if " + " in own:  # an adapted / extended model: the method's colour, dashed (``rope (256 tokens) + tape``)
        method = own.rsplit(" + ", 1)[1].split("(", 1)[0].strip().lower()
        if method in ENCODING_COLORS:
            return ENCODING_COLORS[method], DASH_ADAPTED
        return OTHER_COLORS[zlib.crc32(method.encode()) % len(OTHER_COLORS)], DASH_ADAPTED
    base = own.split("(", 1)[0].split(" [", 1)[0].strip().lower()  # a ladder rung (``rope [4x32]``): rope's colour
    if base in ENCODING_COLORS:
        return ENCODING_COLORS[base], DASH_SIZED if size_of(own) else ""
    return OTHER_COLORS[zlib.crc32(name.encode()) % len(OTHER_COLORS)], DASH_OTHER


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    a = abs(v)
    if a != 0 and (a >= 1e5 or a < 1e-3):
        return f"{v:.2e}"
    return f"{v:.4g}"


def _ticks(lo: float, hi: float, log: bool, n: int = 5, base: float = 10) -> list[float]:
    """Tick positions inside [lo, hi] (log: in log10 units; values 1-2-5 per decade, or plain 1-2-5 steps of the
    values when the range spans under two decades, so a 180-260 ppl axis still has labels)."""
    if log:
        if hi - lo < 2:
            return [math.log(v, base) for v in _ticks(base**lo, base**hi, False, n) if v > 0]
        a, b = math.floor(lo), math.ceil(hi)
        step = max(1, math.ceil((b - a) / n))
        return [float(x) for x in range(a, b + 1, step) if lo - 1e-9 <= x <= hi + 1e-9]
    if hi == lo:
        return [lo]
    raw = hi / n - lo / n  # never hi - lo: a range wider than float's (-1.7e308 .. 1.7e308) overflows
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    first = math.ceil(lo / step)
    out = [k * step for k in range(first, first + 2 * n + 2) if k * step <= hi + 1e-12 * abs(hi)]
    return out


#: dash patterns a series takes, in this order, when another series of its chart already has its colour and dash
SPARE_DASHES = ("1 2", "10 2 2 2 2 2", "4 1", "12 4", "3 6")


def distinct_styles(style: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """``style`` with no two series of one chart alike (issue 56: a local ``tape`` run drew in ``tape @cpu``'s
    colour and line, indistinguishable): the first by name keeps its style, a later one with the same (colour,
    dash) takes the first spare dash not used with that colour."""
    out, used = {}, set()
    for name in sorted(style):
        colour, dash = style[name]
        if (colour, dash) in used:
            dash = next((d for d in SPARE_DASHES if (colour, d) not in used), dash)
        used.add((colour, dash))
        out[name] = (colour, dash)
    return out


#: characters of a legend line (the 240 px legend column at 11 px) and the distance between its lines
LEGEND_CHARS, LEGEND_LINE = 31, 13


def line_chart(
    series: dict[str, list[tuple[float, float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    logy: bool = False,
    width: int = 640,
    height: int = 340,
    vlines: list[tuple[float, str]] | None = None,
    bands: dict[str, list[tuple[float, float, float]]] | None = None,
    styles: dict[str, tuple[str, str]] | None = None,
) -> str:
    """One polyline (+ points) per series, styled by :func:`series_style`; non-finite or non-positive-on-log
    values are dropped. ``vlines``: (x, label) marks such as the training length (a dashed vertical line);
    ``bands``: per series, (x, lo, hi) points of a shaded band around its line (e.g. the range over seeds);
    ``styles``: a series' (colour, dash) where its name is no encoding's (a chart of one encoding's lines)."""
    base = 2 if logx else None
    style = distinct_styles({**{n: series_style(n) for n in series}, **(styles or {})})

    def tx(v):
        return math.log(v, base) if logx else v

    def ty(v):
        return math.log10(v) if logy else v

    clean = {}
    for name, pts in series.items():
        ok = [(x, y) for x, y in pts if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)
              and (not logx or x > 0) and (not logy or y > 0)]  # fmt: skip
        if ok:
            clean[name] = sorted(ok)
    if not clean:
        return f'<p class="empty">{escape(title)}: no data</p>'
    bands = {n: sorted(b for b in pts if all(v is not None and math.isfinite(v) for v in b)
                       and (not logx or b[0] > 0) and (not logy or b[1] > 0))
             for n, pts in (bands or {}).items() if n in clean}  # fmt: skip
    xs = [tx(x) for pts in clean.values() for x, _ in pts]
    ys = [ty(y) for pts in clean.values() for _, y in pts] + [ty(v) for b in bands.values() for _, lo, hi in b
                                                             for v in (lo, hi)]  # fmt: skip
    vlines = [(x, lab) for x, lab in (vlines or []) if x is not None and (not logx or x > 0)]
    xs += [tx(x) for x, _ in vlines]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    width = max(width, 660)  # two charts side by side in the 1400 px page, legends of 31 characters
    shown = _wrap(title, (width - 16) // 8)  # the whole title, in as many lines as it needs (never cut)
    L, R, T, B = 64, 240, 28 + 15 * (len(shown) - 1), 44
    # every legend entry whole, over as many lines as it needs (the front page's rule: a cut made four SmolLM2
    # entries read "SmolLM2-135M-Instruct (…@cpu"), and every entry inside the picture
    legend = {name: wrap_name(name, LEGEND_CHARS) for name in clean}
    legend_h = sum(16 + LEGEND_LINE * (len(lines) - 1) for lines in legend.values())
    height = max(height, T + 12 + legend_h + 8)
    W, H = width - L - R, height - T - B

    def px(v):
        return L + (tx(v) - x0) / (x1 - x0) * W

    def py(v):
        return T + H - (ty(v) - y0) / (y1 - y0) * H

    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           *(f'<text x="8" y="{16 + 15 * i}" class="ctitle">{escape(line)}</text>' for i, line in enumerate(shown)),
           f'<rect x="{L}" y="{T}" width="{W}" height="{H}" class="frame"/>']  # fmt: skip
    for t in _ticks(x0, x1, logx, base=base or 10):
        v = base**t if logx else t
        x = L + (t - x0) / (x1 - x0) * W
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{T + H}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{T + H + 16}" class="tick" text-anchor="middle">{_fmt(v)}</text>')
    for t in _ticks(y0, y1, logy):
        v = 10**t if logy else t
        y = T + H - (t - y0) / (y1 - y0) * H
        out.append(f'<line x1="{L}" x2="{L + W}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{L - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{_fmt(v)}</text>')  # fmt: skip
    out.append(f'<text x="{L + W / 2}" y="{height - 6}" class="label" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text transform="translate(14 {T + H / 2}) rotate(-90)" class="label" text-anchor="middle">'
               f"{escape(ylabel)}</text>")  # fmt: skip
    for x, lab in vlines:
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{T}" y2="{T + H}" class="vline" stroke="#555" '
                   f'stroke-dasharray="4 3"><title>{escape(lab)}</title></line>'
                   f'<text x="{px(x) + 4:.1f}" y="{T + 12}" class="tick vlabel">{escape(lab)}</text>')  # fmt: skip
    for name, b in bands.items():
        if len(b) < 2:
            continue
        c, _ = style[name]
        ring = [(x, hi) for x, _, hi in b] + [(x, lo) for x, lo, _ in reversed(b)]
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(ring)) + " Z"
        out.append(f'<path d="{d}" class="band" fill="{c}" fill-opacity="0.15" stroke="none">'
                   f"<title>{escape(name)}: range</title></path>")  # fmt: skip
    ly = T + 12
    for name, pts in clean.items():
        c, dash = style[name]
        da = f' stroke-dasharray="{dash}"' if dash else ""
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(pts))
        out.append(f'<path d="{d}" class="mark line" stroke="{c}"{da} fill="none" data-series="{escape(name)}">'
                   f"<title>{escape(name)}</title></path>")  # fmt: skip
        for x, y in pts if len(pts) <= 40 else []:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}" class="mark">'
                       f"<title>{escape(name)}: {_fmt(x)} → {_fmt(y)}</title></circle>")  # fmt: skip
        lines = "".join(f'<tspan x="{L + W + 30}" dy="{0 if k == 0 else LEGEND_LINE}">{escape(line)}</tspan>'
                        for k, line in enumerate(legend[name]))  # fmt: skip
        out.append(f'<line x1="{L + W + 8}" x2="{L + W + 26}" y1="{ly - 3}" y2="{ly - 3}" stroke="{c}"{da} '
                   f'stroke-width="3"/><text x="{L + W + 30}" y="{ly + 1}" class="legend">'
                   f"{lines}<title>{escape(name)}</title></text>")  # fmt: skip
        ly += 16 + LEGEND_LINE * (len(legend[name]) - 1)
    out.append("</svg>")
    return "".join(out)


def _color(v: float | None) -> str:
    """White -> blue for accuracies in [0, 1]; grey when missing."""
    if v is None or not math.isfinite(v):
        return "#dddddd"
    v = min(1.0, max(0.0, v))
    r, g, b = (int(255 + (t - 255) * v) for t in (8, 81, 156))
    return f"rgb({r},{g},{b})"


def cell_label(v: float | None) -> str:
    """The text of a heatmap cell: an accuracy in [0, 1) with two decimals, or three when two would round it to 1
    (0.9967 -> '.997', never '.00'; 0.9996 -> '>.999'), without the leading 0; 1 -> '1'; '' when missing."""
    if v is None or not math.isfinite(v):
        return ""
    if 0 <= v < 1:
        for digits in (2, 3):
            text = f"{v:.{digits}f}"
            if float(text) < 1:
                return text[1:]
        return ">.999"
    return f"{v:.0f}" if v == int(v) else _fmt(v)


def heatmap(
    rows: list,
    cols: list,
    values: dict[tuple, float | None],
    *,
    title: str,
    row_label: str,
    col_label: str,
    cell: int = 34,
) -> str:
    """Accuracy heatmap: ``values[(row, col)]`` in [0, 1], printed in each cell."""
    if not rows or not cols:
        return f'<p class="empty">{escape(title)}: no data</p>'
    L, T = min(220, 16 + 7 * max(len(str(r)) for r in rows)), 40
    width = max(L + cell * len(cols) + 20, 16 + 8 * len(title), 20 + 7 * (len(col_label) + len(row_label) + 14),
                KEY_WIDTH)  # fmt: skip
    height = T + cell * len(rows) + 40 + 22  # the colour key below the axes' names
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           f'<text x="4" y="16" class="ctitle">{escape(title)}</text>']  # fmt: skip
    for j, c in enumerate(cols):
        out.append(f'<text x="{L + j * cell + cell / 2}" y="{T - 6}" class="tick" text-anchor="middle">'
                   f"{escape(str(c))}</text>")  # fmt: skip
    for i, r in enumerate(rows):
        y = T + i * cell
        name = wrap_name(str(r), 30)  # whole, in lines of 30 characters (a cut read as another row)
        ty = y + cell / 2 + 4 - 11 * (len(name) - 1) / 2
        spans = "".join(f'<tspan x="{L - 6}" dy="{0 if k == 0 else 11}">{escape(line)}</tspan>'
                        for k, line in enumerate(name))  # fmt: skip
        out.append(f'<text x="{L - 6}" y="{ty:.1f}" class="tick" text-anchor="end">{spans}</text>')
        for j, c in enumerate(cols):
            v = values.get((r, c))
            x = L + j * cell
            fg = "#fff" if v is not None and math.isfinite(v) and v > 0.55 else "#222"
            label = cell_label(v)
            out.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="{_color(v)}" class="mark">'
                       f"<title>{escape(f'{row_label} {r}, {col_label} {c}: {_fmt(v)}')}</title></rect>"
                       f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" class="cell" fill="{fg}" '
                       f'text-anchor="middle">{label}</text>')  # fmt: skip
    axes = f"columns: {escape(col_label)}, rows: {escape(row_label)}"
    out.append(f'<text x="4" y="{height - 30}" class="label">{axes}</text>')
    out.append(_color_key(4, height - 8))
    out.append("</svg>")
    return "".join(out)


#: the accuracies the heatmap's colour key shows, and the width it needs
KEY_STEPS = (0.0, 0.25, 0.5, 0.75, 1.0)
KEY_WIDTH = 64 + 44 * len(KEY_STEPS) + 60


def _color_key(x: float, y: float) -> str:
    """The heatmap's legend: a swatch of the colour of each accuracy in ``KEY_STEPS``, and grey for no run."""
    out = [f'<text x="{x}" y="{y}" class="legend">accuracy</text>']
    for i, v in enumerate([*KEY_STEPS, None]):
        left = x + 60 + 44 * i
        shown = "none" if v is None else _fmt(v)
        out.append(f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{_color(v)}" stroke="#999"/>'
                   f'<text x="{left + 15}" y="{y}" class="legend">{shown}</text>')  # fmt: skip
    return "".join(out)


#: the colours of the front page's picture: an interval clear of parity on the encoding's side / RoPE's, or not
OUTCOME_COLORS = {"win": "#1a7f37", "loss": "#c62828", "within noise": "#777777", "no interval": "#bbbbbb"}


def ratio_chart(rows: list[dict], panels: list[str], *, title: str, width: int = 420) -> str:
    """The front page's picture: one row per encoding, one panel per column (``panels``: e.g. in distribution,
    16× the training length), each a dot at the encoding's perplexity ÷ RoPE's with its interval as a whisker, on
    a log axis around the parity line at 1; coloured by what the interval says (``OUTCOME_COLORS``). ``rows``:
    ``{"name": str, "cells": {panel: (ratio, lo, hi, outcome) or None}}``."""
    if not rows or not panels:
        return f'<p class="empty">{escape(title)}: no data</p>'
    vals = [v for r in rows for c in r["cells"].values() if c for v in c[:3] if v and v > 0 and math.isfinite(v)]
    lo_v, hi_v = min([*vals, 1.0]), max([*vals, 1.0])
    x0, x1 = math.log2(lo_v) - 0.15, math.log2(hi_v) + 0.15
    head = _wrap(title, (width - 8) // 8)
    names_w, gap, T, line_h = 172, 18, 14 + 15 * len(head), 13
    names = [wrap_name(r["name"], NAME_CHARS) for r in rows]  # whole names: "tape(…@cpu-claims" read as no encoding
    heights = [max(20, line_h * len(n) + 7) for n in names]
    tops = [T + sum(heights[:i]) for i in range(len(rows))]
    legend_h = 36
    pw = (width - names_w - gap * len(panels)) / len(panels)
    height = T + sum(heights) + 36 + legend_h

    def px(p: int, v: float) -> float:
        return names_w + p * (pw + gap) + (math.log2(v) - x0) / (x1 - x0) * pw

    out = [f'<svg class="chart ratio-chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']  # fmt: skip
    out += [f'<text x="4" y="{15 + 15 * i}" class="ctitle">{escape(line)}</text>' for i, line in enumerate(head)]
    bottom = T + sum(heights)
    ticks = [t for t in (0.125, 0.25, 0.5, 1, 2, 4, 8) if lo_v / 1.12 <= t <= hi_v * 1.12]
    for p, panel in enumerate(panels):
        left = names_w + p * (pw + gap)
        if len(panels) > 1:  # one panel: the title names it
            out.append(f'<text x="{left + pw / 2:.1f}" y="{T - 6}" class="label" text-anchor="middle">'
                       f"{escape(panel)}</text>")  # fmt: skip
        out.append(f'<rect x="{left:.1f}" y="{T}" width="{pw:.1f}" height="{bottom - T}" class="frame"/>')
        for t in ticks:
            x = px(p, t)
            cls = "parity" if t == 1 else "grid"
            stroke = ' stroke="#333" stroke-dasharray="4 3"' if t == 1 else ""
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{bottom}" class="{cls}"{stroke}/>'
                f'<text x="{x:.1f}" y="{bottom + 14}" class="tick" text-anchor="middle">×{_fmt(t)}</text>'
            )
        for i, r in enumerate(rows):
            cell = r["cells"].get(panel)
            y = tops[i] + heights[i] / 2
            if not cell:
                out.append(f'<text x="{left + 6:.1f}" y="{y + 4:.1f}" class="tick">not run</text>')
                continue
            ratio, lo, hi, outcome = cell
            c = OUTCOME_COLORS.get(outcome, "#777777")
            tip = escape(f"{r['name']}, {panel}: ×{ratio:.3f}" + (f" (×{lo:.3f} to ×{hi:.3f})" if lo else "")
                         + f": {outcome}")  # fmt: skip
            if lo and hi:
                out.append(f'<line x1="{px(p, lo):.1f}" x2="{px(p, hi):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                           f'stroke="{c}" stroke-width="2" class="mark"><title>{tip}</title></line>')  # fmt: skip
            out.append(f'<circle cx="{px(p, ratio):.1f}" cy="{y:.1f}" r="4" fill="{c}" class="mark">'
                       f"<title>{tip}</title></circle>")  # fmt: skip
    for i, r in enumerate(rows):
        y = tops[i] + heights[i] / 2 + 4 - line_h * (len(names[i]) - 1) / 2
        lines = "".join(f'<tspan x="{names_w - 6}" dy="{0 if k == 0 else line_h}">{escape(line)}</tspan>'
                        for k, line in enumerate(names[i]))  # fmt: skip
        out.append(f'<text x="{names_w - 6}" y="{y:.1f}" class="legend" text-anchor="end">'
                   f"{lines}<title>{escape(r['name'])}</title></text>")  # fmt: skip
    out.append(
        f'<text x="{width / 2:.1f}" y="{bottom + 30}" class="label" text-anchor="middle">'
        "perplexity ÷ RoPE's (log scale; left of ×1: better)</text>"
    )
    for i, (outcome, c) in enumerate(OUTCOME_COLORS.items()):  # two legend entries a line
        label = {"win": "better: interval clear of ×1", "loss": "worse: interval clear of ×1"}.get(outcome, outcome)
        x, ly = 4 + (i % 2) * (width / 2), height - 24 + 15 * (i // 2)
        out.append(f'<circle cx="{x + 5:.1f}" cy="{ly - 4}" r="4" fill="{c}"/>'
                   f'<text x="{x + 13:.1f}" y="{ly}" class="legend">{escape(label)}</text>')  # fmt: skip
    out.append("</svg>")
    return "".join(out)


#: characters of a row name per line in the front page's picture (11 px text in its 166 px name column)
NAME_CHARS = 23


def wrap_name(name: str, n: int) -> list[str]:
    """``name`` whole, in lines of at most ``n`` characters broken after a space, ``=``, ``,`` or a ``(`` that ends
    a word (``tape(equivariant=`` / ``False) @cpu-claims``; never ``books (`` / ``PG-19``); a longer run of
    characters is broken every ``n``."""
    words = [w for w in re.split(r"(?<=[ =,])|(?<=[^ ]\()", name) if w]
    lines: list[str] = []
    for word in words:
        while len(word) > n:
            if lines and len(lines[-1]) < n:
                room = n - len(lines[-1])
                lines[-1] += word[:room]
                word = word[room:]
            else:
                lines.append(word[:n])
                word = word[n:]
        if lines and len(lines[-1]) + len(word) <= n:
            lines[-1] += word
        elif word:
            lines.append(word)
    lines = [line.strip() for line in lines]
    return [line for line in lines if line] or [""]


def _wrap(text: str, n: int) -> list[str]:
    """``text`` in lines of at most ``n`` characters, broken between words (a chart title is never cut)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= n:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


#: at most this many lines on one chart (colours stay apart); more become small multiples
MAX_SERIES = 8


def _is_rope(name: str) -> bool:
    """RoPE's own line: ``rope``, ``rope @cpu``, ``rope (mean of 3 seeds)`` (not an extension of a rope model)."""
    return re.fullmatch(r"rope(?: \(mean of \d+ seeds\))?(?: @\S+)?", name) is not None


def line_charts(series: dict[str, list[tuple[float, float]]], *, title: str, **kw) -> list[str]:
    """:func:`line_chart`, as small multiples of at most ``MAX_SERIES`` lines each when there are more (25 lines
    shared a few colours): RoPE, the reference, on every panel; the others in name order, 7 a panel; each panel
    titled with its place ("2 of 4") and its bands kept with their lines."""
    if len(series) <= MAX_SERIES:
        return [line_chart(series, title=title, **kw)]
    ref = [n for n in series if _is_rope(n)][:1]
    rest = [n for n in series if n not in ref]
    per = MAX_SERIES - len(ref)
    chunks = [rest[i : i + per] for i in range(0, len(rest), per)]
    out = []
    for i, chunk in enumerate(chunks, 1):
        names = [*ref, *chunk]
        part = {n: series[n] for n in names}
        extra = dict(kw)
        if kw.get("bands"):
            extra["bands"] = {n: b for n, b in kw["bands"].items() if n in part}
        if kw.get("styles"):
            extra["styles"] = {n: s for n, s in kw["styles"].items() if n in part}
        out.append(line_chart(part, title=f"{title} ({i} of {len(chunks)})", **extra))
    return out
