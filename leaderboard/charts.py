"""Small inline-SVG charts for the static site: line charts and heatmaps, no JavaScript library.

Every text that reaches the SVG goes through :func:`html.escape`; each mark carries a
``<title>`` so hovering shows its value. Charts have class ``chart`` and their marks class
``mark`` (the browser test counts them).
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")  # fmt: skip


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    a = abs(v)
    if a != 0 and (a >= 1e5 or a < 1e-3):
        return f"{v:.2e}"
    return f"{v:.4g}"


def _ticks(lo: float, hi: float, log: bool, n: int = 5) -> list[float]:
    if log:
        a, b = math.floor(lo), math.ceil(hi)
        step = max(1, math.ceil((b - a) / n))
        return [float(x) for x in range(a, b + 1, step)]
    if hi == lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out, x = [], start
    while x <= hi + 1e-12:
        out.append(x)
        x += step
    return out


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
) -> str:
    """One polyline (+ points) per series; non-finite or non-positive-on-log values are dropped."""
    base = 2 if logx else None

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
    xs = [tx(x) for pts in clean.values() for x, _ in pts]
    ys = [ty(y) for pts in clean.values() for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    L, R, T, B = 64, 190, 28, 44
    W, H = width - L - R, height - T - B

    def px(v):
        return L + (tx(v) - x0) / (x1 - x0) * W

    def py(v):
        return T + H - (ty(v) - y0) / (y1 - y0) * H

    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           f'<text x="{L}" y="16" class="ctitle">{escape(title)}</text>',
           f'<rect x="{L}" y="{T}" width="{W}" height="{H}" class="frame"/>']  # fmt: skip
    for t in _ticks(x0, x1, logx):
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
    for i, (name, pts) in enumerate(clean.items()):
        c = PALETTE[i % len(PALETTE)]
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(pts))
        out.append(f'<path d="{d}" class="mark line" stroke="{c}" fill="none"><title>{escape(name)}</title></path>')
        for x, y in pts if len(pts) <= 40 else []:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}" class="mark">'
                       f"<title>{escape(name)}: {_fmt(x)} → {_fmt(y)}</title></circle>")  # fmt: skip
        ly = T + 12 + i * 16
        out.append(f'<rect x="{L + W + 12}" y="{ly - 8}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{L + W + 26}" y="{ly + 1}" class="legend">{escape(name[:28])}</text>')  # fmt: skip
    out.append("</svg>")
    return "".join(out)


def _color(v: float | None) -> str:
    """White -> blue for accuracies in [0, 1]; grey when missing."""
    if v is None or not math.isfinite(v):
        return "#dddddd"
    v = min(1.0, max(0.0, v))
    r, g, b = (int(255 + (t - 255) * v) for t in (8, 81, 156))
    return f"rgb({r},{g},{b})"


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
    width = max(L + cell * len(cols) + 20, 16 + 8 * len(title), 20 + 7 * (len(col_label) + len(row_label) + 14))
    height = T + cell * len(rows) + 40
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           f'<text x="4" y="16" class="ctitle">{escape(title)}</text>']  # fmt: skip
    for j, c in enumerate(cols):
        out.append(f'<text x="{L + j * cell + cell / 2}" y="{T - 6}" class="tick" text-anchor="middle">'
                   f"{escape(str(c))}</text>")  # fmt: skip
    for i, r in enumerate(rows):
        y = T + i * cell
        out.append(
            f'<text x="{L - 6}" y="{y + cell / 2 + 4}" class="tick" text-anchor="end">{escape(str(r)[:30])}</text>'
        )
        for j, c in enumerate(cols):
            v = values.get((r, c))
            x = L + j * cell
            fg = "#fff" if v is not None and math.isfinite(v) and v > 0.55 else "#222"
            label = "" if v is None else f"{v:.2f}"[1:] if 0 <= v < 1 else f"{v:.0f}"
            out.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="{_color(v)}" class="mark">'
                       f"<title>{escape(f'{row_label} {r}, {col_label} {c}: {_fmt(v)}')}</title></rect>"
                       f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" class="cell" fill="{fg}" '
                       f'text-anchor="middle">{label}</text>')  # fmt: skip
    axes = f"columns: {escape(col_label)}, rows: {escape(row_label)}"
    out.append(f'<text x="4" y="{height - 8}" class="label">{axes}</text>')
    out.append("</svg>")
    return "".join(out)
