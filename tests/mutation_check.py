"""`make mutation`: a mutation check of the claims decision code (issue 60): does a test fail when the code is wrong?

Each mutant changes one thing in one function of the decision modules (a comparison flipped or loosened, + for -,
and for or, a numeric constant moved by one, a gate made to return nothing) in a throwaway copy of the repository;
the claims tests run on the copy; a mutant that no test kills *survives*. The survival rate is printed and the
survivors listed, so that each can be killed by a new test or explained. Not run in CI (hours of CPU for every
mutant, so in shards: ``make mutation MUTATION_ARGS="--shard 3/8"``):

    python tests/mutation_check.py [--shard I/N] [--list] [--limit N] [--files leaderboard/claims/decision.py ...]
                                   [--tests ...]

Mutants are enumerated in a fixed order. By default every one runs; ``--shard I/N`` runs the I-th of N disjoint
shards (the mutants whose index is I - 1 modulo N), so the N shards together run every mutant once, on one machine
or several. ``--limit`` samples every k-th of the shard's mutants instead (a quick look, not the check).
``--list`` prints the shard's mutants without running them.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the decision code: what turns numbers into a verdict
FILES = [
    "leaderboard/claims/decision.py",
    "leaderboard/claims/replication.py",
    "leaderboard/claims/learned.py",
    "leaderboard/claims/convergence.py",
    "leaderboard/claims/verdicts.py",
    "leaderboard/claims/calibration.py",
    "leaderboard/claims/sensitivity.py",
]
#: the tests that judge it (fast ones; the published untrained-store test is one of them)
TESTS = [
    "tests/leaderboard/test_claims_rules.py",
    "tests/leaderboard/test_claims_decision.py",
    "tests/leaderboard/test_claims_untrained.py",
    "tests/leaderboard/test_claims.py",
    "tests/leaderboard/test_claims_boundaries.py",
    "tests/leaderboard/test_claims_sensitivity.py",
]
#: skipped: docstrings, messages and the retired tests' table rows are not decisions
SKIP_FUNCS = {"summary", "_setting_summary", "_options"}

SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


def _points(tree: ast.AST) -> list[tuple[str, ast.AST, str]]:
    """(function, node, kind) of every mutable point inside a function body, in source order."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name in SKIP_FUNCS:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and type(node.ops[0]) in SWAP_CMP:
                out.append((fn.name, node, "cmp"))
            elif isinstance(node, ast.BinOp) and type(node.op) in SWAP_BIN:
                out.append((fn.name, node, "bin"))
            elif isinstance(node, ast.BoolOp):
                out.append((fn.name, node, "bool"))
            elif (
                isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool)
            ):
                out.append((fn.name, node, "num"))
        if fn.name in ("not_learned", "lm_not_learned", "convergence", "extension_not_learned",
                       "scrolls_not_learned", "no_contrast", "_undertrained", "_positive_controls"):  # fmt: skip
            out.append((fn.name, fn, "gate"))
    out.sort(key=lambda p: (p[1].lineno, p[1].col_offset, p[2]))
    return out


def mutants(path: Path) -> list[tuple[str, str, str]]:
    """(description, function, mutated source) of every mutant of ``path``."""
    src = path.read_text()
    out = []
    for i, (fname, _, kind) in enumerate(_points(ast.parse(src))):
        tree = ast.parse(src)
        _, node, _ = _points(tree)[i]
        if kind == "cmp":
            old = type(node.ops[0]).__name__
            node.ops[0] = SWAP_CMP[type(node.ops[0])]()
            what = f"{old} -> {type(node.ops[0]).__name__}"
        elif kind == "bin":
            old = type(node.op).__name__
            node.op = SWAP_BIN[type(node.op)]()
            what = f"{old} -> {type(node.op).__name__}"
        elif kind == "bool":
            old = type(node.op).__name__
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            what = f"{old} -> {type(node.op).__name__}"
        elif kind == "num":
            what = f"{node.value!r} -> {node.value + 1!r}"
            node.value = node.value + 1
        else:  # a gate that never fires
            nothing = {
                "_positive_controls": ast.Constant(value=None),  # convergence: (block, note)
                "convergence": ast.Tuple(elts=[ast.Constant(value=""), ast.Constant(value="")], ctx=ast.Load()),
            }
            ret = ast.Return(value=nothing.get(node.name, ast.Constant(value="")))
            node.body = [ret]
            what = "gate returns nothing"
        out.append((f"{path.relative_to(ROOT)}:{node.lineno} {fname}: {what}", fname, ast.unparse(tree)))
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` -> (I, N) with 1 <= I <= N; ValueError naming what is allowed otherwise."""
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise ValueError(f"--shard {text}: must be I/N with whole numbers 1 <= I <= N (e.g. 3/8)")
    return int(i), int(n)


def select(every: list, shard: tuple[int, int], limit: int | None = None) -> list:
    """The shard's mutants (index I - 1 modulo N, in the fixed order), then every k-th of them under ``limit``."""
    i, n = shard
    mine = every[i - 1 :: n]
    if limit is None or limit >= len(mine):
        return mine
    return mine[:: -(-len(mine) // limit)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tests/mutation_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="+", default=FILES)
    ap.add_argument("--tests", nargs="+", default=TESTS)
    ap.add_argument("--shard", default="1/1", help="run the I-th of N disjoint shards, I/N: %(default)s (every mutant)")
    ap.add_argument("--limit", type=int, default=None, help="run at most this many of the shard's (every k-th)")
    ap.add_argument("--list", action="store_true", help="print the shard's mutants, run none")
    ap.add_argument("--timeout", type=int, default=300, help="seconds a mutant's tests may run: %(default)s")
    args = ap.parse_args(argv)
    try:
        shard = parse_shard(args.shard)
    except ValueError as e:
        print(f"tests/mutation_check.py: {e}", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit < 1:
        print(f"tests/mutation_check.py: --limit {args.limit}: must be >= 1", file=sys.stderr)
        return 2
    every = []
    for f in args.files:
        p = ROOT / f
        if not p.is_file():
            print(f"tests/mutation_check.py: --files {f}: no such file", file=sys.stderr)
            return 2
        every += [(f, *m) for m in mutants(p)]
    chosen = select(every, shard, args.limit)
    print(f"mutation: {len(every)} mutants in {len(args.files)} files; shard {shard[0]}/{shard[1]}: "
          f"{'listing' if args.list else 'running'} {len(chosen)}", flush=True)  # fmt: skip
    if args.list:
        for _f, desc, _fn, _text in chosen:
            print(f"  {desc}")
        return 0
    survived, t0 = [], time.time()
    with tempfile.TemporaryDirectory(prefix="peeval-mutation-") as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".venv*", "build", ".git", "results",
                                                                  "checkpoints", ".dvc", "*.duckdb"))  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(work), "OMP_NUM_THREADS": "1"}
        for i, (f, desc, _fn, text) in enumerate(chosen, 1):
            original = (work / f).read_text()
            (work / f).write_text(text)
            try:
                cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args.tests]
                r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, timeout=args.timeout)
                killed = r.returncode != 0
            except subprocess.TimeoutExpired:
                killed = True  # a mutant that hangs the tests is caught by the CI's time limit
            finally:
                (work / f).write_text(original)
            print(f"[{i}/{len(chosen)}] {'killed  ' if killed else 'SURVIVED'} {desc}", flush=True)
            if not killed:
                survived.append(desc)
    rate = len(survived) / len(chosen) if chosen else 0.0
    print(f"mutation: {len(chosen) - len(survived)} killed, {len(survived)} survived of {len(chosen)} "
          f"(survival {rate:.0%}) in {time.time() - t0:.0f} s")  # fmt: skip
    for s in survived:
        print(f"  survived: {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
