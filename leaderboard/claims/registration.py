"""A profile's registration (issue 67 item 4): everything that decides its verdicts, written down before its runs.

A verdict is pre-registered only when what decides it was fixed before the data existed. The registration of a
profile is read from the files that hold it (:data:`FILES`), never restated here:

- claims.yaml: the profile's Holm families (``families.<profile>``, sorted: their order decides nothing) and every
  top-level scalar key (``learned_margin``, ``converge_tolerance``, ``extension_margin``, ... any added later);
- decision.py: every module-level constant (``ALPHA``, ``MIN_RUNS``, ``MIN_TOKENS_PER_PARAM``, ...) and the sha256
  of its code without docstrings and comments (``ast.unparse``: the p-values, Holm, the verdict rule; a changed rule
  is a new registration, a reworded docstring or a reformatting is not);
- replication.py: the test over runs (``TEST`` and the test ``compare`` uses by default: Welch's t).

:func:`canonical` is its one serialisation (JSON, sorted keys, no spaces, ASCII) and :func:`digest` its sha256.
:func:`first_committed` finds in git the commit from which the registration has held unchanged;
``python -m leaderboard.publish`` records it in SOURCE.json (``registration``) and refuses a registration with
uncommitted changes; the claims stage compares it with the registration now (:func:`status`).
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import hashlib
import json
import subprocess
from pathlib import Path

import yaml

#: the repository this package lies in: where the registration's files are read and dated
ROOT = Path(__file__).resolve().parents[2]
#: the files that hold a registration (relative to the repository root), in :func:`content`'s argument order
FILES = ("leaderboard/claims/claims.yaml", "leaderboard/claims/decision.py", "leaderboard/claims/replication.py")
#: the registration's format (a new field or meaning of one is a new format, so a new hash)
FORMAT = 1
#: the statuses :func:`status` gives (the claims page's words)
BEFORE, AFTER, CHANGED, NOT_RECORDED = "before", "after: exploratory", "changed since publication", "not recorded"


class RegistrationError(ValueError):
    """The registration cannot be read or dated (not committed, no git history): one line."""


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _constants(tree: ast.Module) -> dict:
    """Every module-level ``NAME = <literal>`` (upper case) of a module."""
    out = {}
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else getattr(node, "target", None)
        )
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id.isupper() and value is not None:
            try:
                out[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError):
                continue
    return out


def _test(replication_py: str) -> str:
    """``<TEST>: <the test compare() runs by default>`` of replication.py (e.g. ``runs-t: D.welch_t``)."""
    tree = ast.parse(replication_py)
    name = _constants(tree).get("TEST")
    default = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "compare":
            args = node.args.args[len(node.args.args) - len(node.args.defaults) :]
            default = next(
                (ast.unparse(d) for a, d in zip(args, node.args.defaults, strict=True) if a.arg == "test"), None
            )
    return f"{name}: {default}"


def _scalars(data: dict) -> dict:
    """Every top-level scalar of claims.yaml (a date as its ISO text): a key added later is registered unnamed."""
    out = {}
    for k, v in data.items():
        if v is None or isinstance(v, (bool, int, float, str)):
            out[str(k)] = v
        elif isinstance(v, dt.date):
            out[str(k)] = v.isoformat()
    return out


def content(profile: str, claims_yaml: str | None, decision_py: str | None, replication_py: str | None) -> dict:
    """The registration of ``profile`` from the texts of :data:`FILES` (YAML and ast only); a file that is missing
    or unreadable (None, or an old version that does not parse) leaves its fields None."""
    try:
        data = yaml.load(claims_yaml, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if claims_yaml else None
    except yaml.YAMLError:
        data = None
    data = data if isinstance(data, dict) else None
    fams = data.get("families") if data else None
    try:
        tree = ast.parse(decision_py) if decision_py is not None else None
        code = ast.unparse(_strip_docstrings(ast.parse(decision_py))) if tree else None
    except SyntaxError:
        tree = code = None
    try:
        test = _test(replication_py) if replication_py is not None else None
    except SyntaxError:
        test = None
    return {
        "format": FORMAT,
        "profile": profile,
        "families": sorted(str(p) for p in (fams.get(profile) or [])) if isinstance(fams, dict) else None,
        "claims_yaml": _scalars(data) if data else None,
        "decision": _constants(tree) if tree else None,
        "decision_code_sha256": hashlib.sha256(code.encode()).hexdigest() if code else None,
        "test": test,
    }


def canonical(registration: dict) -> str:
    """The one serialisation that is hashed: JSON with sorted keys, no spaces, ASCII only."""
    return json.dumps(registration, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def digest(registration: dict) -> str:
    return hashlib.sha256(canonical(registration).encode("ascii")).hexdigest()


def current(profile: str, root: Path = ROOT, claims: Path | None = None) -> dict:
    """The registration of ``profile`` in the working tree of ``root`` (``claims``: another claims.yaml, e.g. the
    claims stage's ``--claims``, read in place of the repository's)."""
    paths = [Path(claims) if claims is not None else root / FILES[0], *(root / f for f in FILES[1:])]
    try:
        texts = [p.read_text(encoding="utf-8") for p in paths]
    except OSError as e:
        raise RegistrationError(f"{e.filename}: {e.strerror}") from None
    reg = content(profile, *texts)
    if None in reg.values():
        raise RegistrationError(
            f"{root}: {', '.join(k for k, v in reg.items() if v is None)} not readable from {', '.join(FILES)}"
        )
    return reg


def _git(root: Path, *args: str) -> str:
    try:
        got = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RegistrationError(f"git {args[0]} in {root}: {e}") from None
    if got.returncode:
        raise RegistrationError(f"git {args[0]} in {root}: {' '.join(got.stderr.split())[:200]}")
    return got.stdout


def uncommitted(root: Path = ROOT) -> list[str]:
    """The registration's files with changes not committed in ``root`` (staged, unstaged or untracked)."""
    out = _git(root, "status", "--porcelain", "--untracked-files=all", "--", *FILES)
    return sorted({line[3:].strip() for line in out.splitlines() if line.strip()})


def _versions(root: Path) -> list[tuple[str, str, dict[str, list[str]]]]:
    """(commit, committer date, {file: its paths across renames}) of every commit that touched a registration
    file, newest first by committer date."""
    paths: dict[str, list[str]] = {}
    commits: set[str] = set()
    for f in FILES:
        out = _git(root, "log", "--follow", "--format=%x00%H", "--name-only", "--", f)
        seen = [f]
        for block in out.split("\x00")[1:]:
            lines = [s for s in block.splitlines() if s.strip()]
            commits.add(lines[0])
            seen += [p for p in lines[1:] if p not in seen]
        paths[f] = seen
    if not commits:
        return []
    dated = _git(root, "show", "-s", "--format=%H %cI", *sorted(commits)).split()
    order = sorted(zip(dated[::2], dated[1::2], strict=True), key=lambda c: c[1], reverse=True)
    return [(c, d, paths) for c, d in order]


class _Blobs:
    """Files at commits through one ``git cat-file --batch`` (a process per file read is seconds per profile)."""

    def __init__(self, root: Path):
        self.proc = subprocess.Popen(["git", "-C", str(root), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip

    def at(self, commit: str, paths: list[str]) -> str | None:
        """The text of the first of ``paths`` (one file's names across renames) that exists at ``commit``."""
        for p in paths:
            self.proc.stdin.write(f"{commit}:{p}\n".encode())
            self.proc.stdin.flush()
            header = self.proc.stdout.readline().split()
            if len(header) == 3 and header[1] == b"blob":
                data = self.proc.stdout.read(int(header[2]) + 1)[:-1]
                return data.decode("utf-8", errors="replace")
        return None

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@functools.lru_cache(maxsize=32)
def _since(root: Path, head: str, profile: str, want: str) -> tuple[tuple[str, str, str], ...]:
    """((part, commit, date), ...): for the whole registration (part '') and each of its fields, the oldest commit
    of the newest run of commits whose value equals the committed one (``want``: the committed registration)."""
    now, found, open_ = json.loads(want), {}, {"", *json.loads(want)} - {"format", "profile"}
    blobs = _Blobs(root)
    try:
        for commit, date, paths in _versions(root):
            then = content(profile, *(blobs.at(commit, paths[f]) for f in FILES))
            for part in sorted(open_):
                if (digest(then) == digest(now)) if part == "" else then.get(part) == now[part]:
                    found[part] = (commit, date)
                else:
                    open_.discard(part)
            if not open_:
                break
    finally:
        blobs.close()
    if "" not in found:
        raise RegistrationError(f"the registration of {profile} is in no commit of {root} (commit {', '.join(FILES)})")
    return tuple((part, *found[part]) for part in sorted(found))


def held_since(profile: str, root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """{part: (commit, committer date ISO)} from which ``profile``'s committed registration (part '') and each of
    its fields have held unchanged: the oldest of the newest run of commits touching :data:`FILES` with that value
    (a commit in between with another value, on any branch merged, ends the run: a date is never earlier than it
    was). Refused while the registration's files have uncommitted changes."""
    if bad := uncommitted(root):
        raise RegistrationError(f"the registration has uncommitted changes ({', '.join(bad)}): commit them first, so "
                                "that it is dated by its commit")  # fmt: skip
    head = _git(root, "rev-parse", "HEAD").strip()
    return {part: (c, d) for part, c, d in _since(root, head, profile, canonical(current(profile, root)))}


def first_committed(profile: str, root: Path = ROOT) -> tuple[str, str]:
    """(commit, committer date ISO) from which ``profile``'s whole registration has held unchanged."""
    return held_since(profile, root)[""]


def record(profile: str, data_from: str | None, root: Path = ROOT) -> dict:
    """What SOURCE.json keeps (``registration``): the hash, the commit and date from which it held, the date of the
    profile's earliest run data (``data_from``), the registration itself (its hash re-checked on reading), and since
    which commit each of its fields held (``held_since``: when the families were declared, the test chosen)."""
    reg = current(profile, root)
    since = held_since(profile, root)
    commit, date = since.pop("")
    return {
        "sha256": digest(reg),
        "commit": commit,
        "committed": date,
        "data_from": data_from,
        "content": reg,
        "held_since": {part: {"commit": c, "date": d} for part, (c, d) in sorted(since.items())},
    }


def earliest(dates) -> str | None:
    """The earliest of ISO 8601 dates (None when there is none): when a profile's run data begins."""
    parsed = [_parse(d) for d in dates if d]
    return min(parsed).isoformat(timespec="seconds") if parsed else None


def _parse(date: str) -> dt.datetime:
    d = dt.datetime.fromisoformat(str(date))
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)


def status(recorded: dict | None, now: dict) -> tuple[str, str]:
    """(status, the sentence the claims page shows) of a profile's verdicts from SOURCE.json's ``registration``
    (``recorded``; None: none) and the registration now (``now``, :func:`current`)."""
    if not isinstance(recorded, dict):
        return NOT_RECORDED, (f"no registration recorded for this data (registration now {digest(now)[:12]}): "
                              "its verdicts are not pre-registered, exploratory")  # fmt: skip
    held = recorded.get("content")
    if not isinstance(held, dict) or digest(held) != recorded.get("sha256"):
        return CHANGED, "the recorded registration does not match its own hash: its verdicts are not pre-registered"
    day = str(recorded.get("committed"))[:10]
    data = str(recorded.get("data_from"))[:10]
    when = (
        BEFORE if recorded.get("data_from") and _parse(recorded["committed"]) < _parse(recorded["data_from"]) else AFTER
    )
    said = f"registered {day} (commit {str(recorded.get('commit'))[:8]}), data from {data}: {when}"
    parts = recorded.get("held_since") if isinstance(recorded.get("held_since"), dict) else {}
    if dates := [f"{k} since {str(v.get('date'))[:10]}" for k, v in sorted(parts.items()) if isinstance(v, dict)]:
        said += f" ({', '.join(dates)})"
    if digest(now) != recorded["sha256"]:
        changed = sorted(k for k in set(now) | set(held) if now.get(k) != held.get(k))
        return CHANGED, (
            f"{said}; the registration changed since publication ({', '.join(changed)}: "
            f"{recorded['sha256'][:12]} -> {digest(now)[:12]}): these verdicts are not pre-registered"
        )
    return when, said


def board_rows(profiles, recorded_for, root: Path = ROOT, claims: Path | None = None) -> list[dict]:
    """The ``claims_registration`` rows: per profile judged, its status against ``recorded_for(profile)`` (SOURCE.json's
    ``registration``, or None) and the registration of ``root``'s working tree now (``claims``: the claims file
    the verdicts were computed from)."""
    out = []
    for profile in sorted(set(profiles)):
        recorded = recorded_for(profile)
        now = current(profile, root, claims)
        state, line = status(recorded, now)
        ok = isinstance(recorded, dict)
        out.append({"profile": profile, "status": state, "line": line, "current_sha256": digest(now),
                    "recorded_sha256": recorded.get("sha256") if ok else None,
                    "registered": recorded.get("committed") if ok else None,
                    "data_from": recorded.get("data_from") if ok else None})  # fmt: skip
    return out


def write_rows(con, rows: list[dict]) -> None:
    """Insert :func:`board_rows` into ``claims_registration`` (laid down empty by ``verdicts.write_claims``)."""
    from leaderboard.store import schema_columns

    cols = schema_columns()[0]["claims_registration"]
    if rows:
        con.executemany(f"INSERT INTO claims_registration ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [[r.get(k) for k in cols] for r in rows])  # fmt: skip
