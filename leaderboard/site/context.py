"""What every page reads: the store's connections with the site's named views (views.sql), the task labels, the
downloads the pages' tables add, and the helpers that format a value for a page, a CSV or a JSON file."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from leaderboard.site import claims_page, pages
from peeval.perplexity import TABLE_ENCODINGS
from peeval.records import fmt_number, task_label

VIEWS = Path(__file__).with_name("views.sql")
#: what a spreadsheet reads as the start of a formula (=, +, -, @, a tab or a carriage return: OWASP's list)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class Page:
    """One HTML file of the site: where it goes, its title, its text."""

    path: str
    title: str
    html: str


def fmt(v: Any) -> str:
    """Every number the site prints (:func:`peeval.records.fmt_number`, 4 significant digits)."""
    return fmt_number(v)


def natural_key(text: str) -> tuple:
    """Sort key reading the numbers inside a text as numbers: acc@256 before acc@1024, ppl@512 before ppl@4096."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


def jsonable(v: Any) -> Any:
    """A value JSON can hold: a non-finite float as its text, a date as ISO 8601."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def csv_cell(v: Any) -> Any:
    """A value as the site's CSV downloads hold it: a text from the store that a spreadsheet would run as a
    formula (an lm-eval model named ``=HYPERLINK(...)``) gets a leading ``'``, so it is shown as the text it is;
    numbers (``-inf`` included) are written as they are."""
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return jsonable(v)


class Statement(NamedTuple):
    """One CREATE statement of views.sql: ``kind`` "view" (a page reads it) or "macro" (used inside views)."""

    kind: str
    name: str
    sql: str


def view_sections(text: str) -> dict[str, list[Statement]]:
    """views.sql as {section: [Statement]}: ``-- @section <name>`` lines open a section, other ``--`` lines are
    comments, a statement ends with ``;`` at the end of a line."""
    sections: dict[str, list[Statement]] = defaultdict(list)
    section, lines = "any", []
    for line in text.splitlines():
        if line.startswith("-- @section "):
            section = line.split()[-1]
        elif line.strip() and not line.lstrip().startswith("--"):
            lines.append(line)
            if line.rstrip().endswith(";"):
                sql = "\n".join(lines).strip().removesuffix(";")
                name = re.match(r"CREATE TEMP (?:VIEW (site_\w+)|MACRO (\w+)\([^)]*\)) AS\b", sql)
                if name is None:
                    raise ValueError(
                        f"{VIEWS}: not a named view (CREATE TEMP VIEW site_<name> AS ...) "
                        f"or macro (CREATE TEMP MACRO <name>(args) AS ...): {sql[:60]}"
                    )
                kind = "view" if name[1] else "macro"
                sections[section].append(Statement(kind, name[1] or name[2], sql))
                lines = []
    return sections


class SiteStore:
    """The store as the pages read it: ``view(name)`` is ``SELECT * FROM site_<name>``, on the claims stage's
    database for the ``claims_*`` views. ``files``: the downloads (data/<table>.csv|json) and assets the pages add;
    ``table_ids``: the tables shown, listed on the data page."""

    def __init__(self, con, claims_con=None):
        """``claims_con``: the claims stage's database (tables claims, claim_values); default ``con``."""
        self.con = con
        self.claims_con = con if claims_con is None else claims_con
        self.files: dict[str, str | bytes] = {}
        self.table_ids: set[str] = set()
        sections = view_sections(VIEWS.read_text(encoding="utf-8"))
        self.views: dict[str, Any] = {}
        for c in dict.fromkeys([self.con, self.claims_con]):
            self._create(c, sections["any"])
        self._create(self.con, sections["store"])
        self.labels = self.task_labels()
        self._create(self.con, sections["labelled"])
        if self.has_table("claims", claims=True):
            self._create(self.claims_con, sections["claims"])
        self.hidden_pages = self._empty_family_pages()
        self.claims_html = claims_page.render_claims_page(self.claims_con, self.labels, hidden=self.hidden_pages)

    def _empty_family_pages(self) -> frozenset[str]:
        """The generic by-length pages (``leaderboard.site.pages``: RULER's) of families the store holds no run of:
        neither built nor in the navigation (a menu entry that opens on "no RULER runs" tells nothing)."""
        have = {r["family"] for r in self.view("families")}
        return frozenset(e.href for e in pages.PAGES if e.family is not None and e.family not in have)

    def nav(self) -> list[tuple[str, str]]:
        """The navigation of a page of this site (``pages.nav``)."""
        return pages.nav(bool(self.claims_html), self.hidden_pages)

    def _create(self, con, statements: list[Statement]) -> None:
        for st in statements:
            con.execute(st.sql)
            if st.kind == "view":  # a macro is only used inside the views
                self.views.setdefault(st.name, con)

    def view(self, name: str, where: str = "", params: list | None = None, order: str = "") -> list[dict]:
        """The rows of the view ``site_<name>`` (``where`` / ``order``: a filter and an order on its columns)."""
        view = f"site_{name}"
        con = self.views.get(view)
        if con is None and name.startswith("claims_"):
            return []  # a claims view where the claims stage wrote no claims table
        if con is None:
            raise KeyError(f"{VIEWS}: no view {view}")
        cur = con.execute(f"SELECT * FROM {view}" + (f" WHERE {where}" if where else "")
                          + (f" ORDER BY {order}" if order else ""), params or [])  # fmt: skip
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def columns(self, name: str) -> list[str]:
        """The column names of the view ``site_<name>`` (a table's headers, also when it has no rows)."""
        view = f"site_{name}"
        return [d[0] for d in self.views[view].execute(f"SELECT * FROM {view} LIMIT 0").description]

    def has_table(self, name: str, claims: bool = False) -> bool:
        con = self.claims_con if claims else self.con
        return bool(con.execute("SELECT * FROM site_tables WHERE table_name = ?", [name]).fetchall())

    def task_labels(self) -> dict[tuple[str, str], str]:
        """(run_id, task) -> what the site calls that task's numbers (``peeval.records.task_label``: a corpus by
        what was read, so a mirror run and a hub run of one task never share a column, chart or label); also
        registered as the relation ``task_labels`` (run_id, task, label) for the labelled views."""
        import pyarrow as pa

        reads: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for r in self.view("task_reads"):
            reads[(r["run_id"], r["task"])].append((r["source"], r["location"]))
        pairs = self.view("metric_tasks", order="run_id, task")
        labels = {(r["run_id"], r["task"]): task_label(r["task"], reads.get((r["run_id"], r["task"]), []))
                  for r in pairs}  # fmt: skip
        self.con.register("task_labels", pa.table({"run_id": [k[0] for k in labels], "task": [k[1] for k in labels],
                                                   "label": list(labels.values())}))  # fmt: skip
        return labels

    def training_length(self) -> int | None:
        """The context length the encodings were pretrained at (the most common one of the pretrain runs)."""
        r = self.view("training_length")
        return r[0]["L"] if r else None

    def position_tables(self) -> dict[str, int]:
        """The names whose encoding reads positions from a table (peeval.perplexity.TABLE_ENCODINGS), each with
        its rows as the store records them: a length past them has no cell by design ("n/a"), not "not run"."""
        return {r["name"]: r["rows"] for r in self.view("position_tables")
                if r["pe"] in TABLE_ENCODINGS and r["rows"] is not None}  # fmt: skip

    def data_files(self, tid: str, headers: list[str], rows: list[list[Any]], whole: bool = False) -> None:
        """``data/<tid>.csv`` and ``.json``: the rows as a download. ``whole``: a store table (the data page), written
        once, as ``data/<tid>.csv.gz`` (gzip, no timestamp: the same rows give the same bytes): its samples and
        training curves were 200 MB of a published site, half of it the same rows again as JSON."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\r\n")  # RFC 4180; and a text's lone \r is then quoted, never a row end
        w.writerow(headers)
        w.writerows([[csv_cell(v) for v in r] for r in rows])
        if whole:
            self.files[f"data/{tid}.csv.gz"] = gzip.compress(buf.getvalue().encode("utf-8"), mtime=0)
            return
        self.files[f"data/{tid}.csv"] = buf.getvalue()
        records = [{h: jsonable(v) for h, v in zip(headers, r)} for r in rows]
        # one record per line: readable, and the C encoder (``indent`` takes Python's: 3x slower on 100k rows)
        self.files[f"data/{tid}.json"] = "[\n" + ",\n".join(json.dumps(r, default=str) for r in records) + "\n]\n"
