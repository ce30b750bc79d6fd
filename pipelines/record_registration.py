"""Record, in a published profile's SOURCE.json, the registration that decides its verdicts (issue 67 item 4).

    python pipelines/record_registration.py leaderboard/published/cpu [leaderboard/published/cpu-claims ...] [--replace]

Folders published before ``python -m leaderboard.publish`` recorded a registration carry none. This writes the one
publish would write now (``leaderboard.claims.registration.record``: the profile's families, the test, the gates and
margins, their sha256, the commit from which they held, and since which commit each part held), with the date of the
folder's earliest run (its results' ``peeval.date``), and says that it was recorded after publication
(``recorded``, ``recorded_after_publication``). Nothing is backdated: the dates are git's. The registration's files
must be committed (else exit 2, nothing written); a folder that already records one is left as it is unless
``--replace`` says so (run it again after a change of the registration, e.g. a merge that adds a claims.yaml key).
SOURCE.json is not in its own ``files`` manifest, so ``ingest`` still accepts the folder.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def run_dates(folder: Path) -> list[str]:
    """The date each results.json of a published folder says it was written (``peeval.date``, or plain lm_eval's)."""
    out = []
    for f in sorted(folder.rglob("results*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or "results" not in doc:
            continue
        date = (doc.get("peeval") or {}).get("date")
        if date is None and isinstance(doc.get("date"), (int, float)):
            date = dt.datetime.fromtimestamp(float(doc["date"]), dt.UTC).isoformat(timespec="seconds")
        out.append(date)
    return out


def record(folder: Path, replace: bool = False, root: Path | None = None) -> dict:
    """SOURCE.json of ``folder`` with its ``registration`` (not written: :func:`write`); ValueError (one line) when
    the folder is not a published one, already records a registration (without ``replace``) or the registration is
    not committed."""
    from leaderboard.claims import registration as R

    source = folder / "SOURCE.json"
    try:
        src = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{source}: not a published folder's SOURCE.json ({e})") from None
    if not isinstance(src, dict) or not isinstance(src.get("profile"), str):
        raise ValueError(f"{source}: not a published folder's SOURCE.json (no profile)")
    if "registration" in src and not replace:
        raise ValueError(f"{source}: already records a registration (pass --replace to record the current one)")
    reg = R.record(src["profile"], R.earliest(run_dates(folder)), root or R.ROOT)
    reg["recorded"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    reg["recorded_after_publication"] = (
        f"published {src.get('published')} without a registration; recorded afterwards by "
        "pipelines/record_registration.py from the registration committed then (dates from git, none backdated)"
    )
    src["registration"] = reg
    return src


def write(folder: Path, src: dict) -> None:
    from peeval._io import atomic_write_text

    atomic_write_text(folder / "SOURCE.json", json.dumps(src, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pipelines/record_registration.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="published profile folders (leaderboard/published/<profile>)")
    ap.add_argument("--replace", action="store_true", help="replace a registration the folder already records")
    args = ap.parse_args(argv)
    from leaderboard.claims.registration import RegistrationError, status

    try:  # every folder checked before any is written
        done = [(Path(f), record(Path(f), args.replace)) for f in args.folders]
    except (ValueError, RegistrationError) as e:
        print(f"pipelines/record_registration.py: {e}", file=sys.stderr)
        return 2
    for folder, src in done:
        write(folder, src)
        reg = src["registration"]
        print(f"{folder}: {status(reg, reg['content'])[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
