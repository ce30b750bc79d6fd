"""Issue 68 item 9: every command of README.md and docs/*.md runs as written, in a fresh clone after `make venv`
(test_docs_commands.py only parses them). Each shell line of a ```bash block is either run here, in doc order, in a
`git clone` of this working tree with a ``.venv`` standing for the one `make venv` made (this interpreter, its stamp
newer than every source, so no make target reinstalls anything) and activated (its ``bin`` first on PATH), the
offline mirror named (PEEVAL_DATA_MIRROR), or excluded below with the reason. What a run may change is listed with
it: the doc's placeholders (CKPT, DIR) named, a smoke profile for a cpu one, a `--limit` injected. A command added
to the docs fails :func:`test_every_doc_command_is_run_or_excluded_with_a_reason` until it is listed.

The whole run is ``slow`` (22 lines, 31 min on 2 cores shared with other work); the default suite keeps the listing
check and one cheap line.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.data_mirror import MIRROR

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent


def doc_lines() -> list[tuple[str, str]]:
    """(doc, line) of every shell line of a ```bash block, continuation lines joined, comment lines dropped."""
    out = []
    for doc in DOCS:
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                if shlex.split(line, comments=True):
                    out.append((doc.relative_to(ROOT).as_posix(), " ".join(line.split())))
    return out


def key(line: str) -> str:
    """A line without its comment, words single-spaced: what the tables below name."""
    return " ".join(shlex.split(line, comments=True))


#: the cpu profile (minutes to hours a model) swapped for the smoke one (seconds): the injected "small limit"
SMOKE = (r"--profile cpu\b", "--profile smoke")
#: the doc's placeholders for the reader's checkpoint
CKPT = (r"\bCKPT\b", "ckpt/tape")
DIR = (r"\bDIR\b", "ckpt/tape")
#: a run of lm-eval's own arguments elided in the doc (`...`): one tiny perplexity task
ELIDED = (
    r" \.\.\.$",
    """ --tasks peeval_ppl_pg19 --metadata '{"lengths": [64], "targets": 64, "skip": 0, "max_docs": 1}'""",
)

#: what a reader has before some lines (not itself a line of the docs): gpu.md trains ckpt/rope with torchrun on
#: GPUs, this is the same on one CPU process; OUT is "a plain lm_eval --log_samples folder"
BEFORE = {
    "rope": "peeval train --pe rope --profile smoke --out ckpt/rope --tokenizer ckpt/tok",
    "OUT": """lm_eval --model peeval --model_args pretrained=ckpt/tape,max_length=256 --tasks peeval_ppl_pg19 \
--metadata '{"lengths": [64, 128], "targets": 256, "skip": 0, "max_docs": 2}' --output_path OUT --log_samples""",
}

#: (the doc line's key, the edits applied to the line as (regex, replacement)), in the order they run
RUN: list[tuple[str, tuple[tuple[str, str], ...]]] = [
    ("peeval tokenizer --out ckpt/tok --profile cpu", (SMOKE,)),
    ("peeval train --pe tape --profile cpu --out ckpt/tape --tokenizer ckpt/tok", (SMOKE,)),
    ("peeval train --pe rope --task addition --profile cpu --out ckpt/diag-rope-addition", (SMOKE,)),
    ("peeval adapt --method tape --profile cpu --out ckpt/adapt-tape", (SMOKE,)),
    # `SMOLLM2=$(...)` and the line that reads it run in one shell
    (
        "lm_eval --model peeval-llama --model_args pretrained=$SMOLLM2,gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf,"
        "adapter=ckpt/adapt-tape ...",
        (ELIDED,),
    ),  # fmt: skip
    ("BEFORE rope", ()),
    ("peeval export ckpt/tape out/tape", ()),
    ("peeval export ckpt/rope out/rope", ()),
    ("peeval export ckpt/rope out/rope-peeval --as-peeval", ()),
    (
        "lm_eval --model peeval-tape --model_args pretrained=CKPT,max_length=4096 --tasks peeval_passkey --metadata "
        '{"lengths": [1024, 4096]} --limit 20',
        (CKPT,),
    ),  # fmt: skip
    (
        "lm_eval --model peeval --model_args pretrained=CKPT,max_length=8192 --tasks peeval_ppl_pg19 --metadata "
        '{"lengths": [512, 2048, 8192], "targets": 16384}',
        (CKPT, (r"$", " --limit 2")),
    ),  # fmt: skip
    (
        "peeval eval --model peeval-tape --model_args pretrained=CKPT --tasks peeval_passkey,peeval_ppl_pg19 "
        '--metadata {"lengths": [512, 1024]} --limit 10',
        (CKPT,),
    ),  # fmt: skip
    ("peeval eval --like cpu --model_args pretrained=DIR --run_name my-model", (DIR,)),
    # any causal LM: the rope checkpoint exported as a plain LlamaForCausalLM (no peeval code in it)
    (
        "peeval eval --like cpu --model hf --model_args pretrained=DIR --run_name my-hf-model",
        ((r"\bDIR\b", "out/rope"),),
    ),
    ("make site SITE_PROFILE=cpu MINE=results/my-model", ()),
    ("BEFORE OUT", ()),
    ("python -m leaderboard.ingest --db leaderboard/peeval.duckdb OUT/", ()),
    ("make site SITE_PROFILE=cpu MINE=results/my-run OUT/", ((r"my-run", "my-hf-model"),)),
    ("make site", ()),
    ("python tests/mutation_check.py --list --shard 3/8", ()),
    ("TRITON_INTERPRET=1 python benchmarks/bias_attention.py --dry-run", ()),
    ("python benchmarks/gpu_window_kernels.py --dry-run --out /tmp/window", ((r"/tmp/window", "window-dry-run"),)),
]
#: cheap enough for the default suite (seconds alone; ~30 s on 2 shared cores)
FAST = {"python tests/mutation_check.py --list --shard 3/8"}

HOURS = "the whole pipeline, ~2 h on 2 cores (tests/pipeline runs its stages at the smoke profile)"
SUITE = "this test suite itself (~30 min on 2 cores), or a part of it"
GPU = "a CUDA machine's command (docs/gpu.md); its peeval part runs above without the launcher"
#: (a key's start, why it is not run here)
EXCLUDED: list[tuple[str, str]] = [
    ("make venv", "what this test stands on: its .venv is the one `make venv` made (minutes, a package registry)"),
    ("make leaderboard", HOURS),
    ("make test", SUITE),
    ("make mutation", "every mutant of the claims code against the claims tests: hours (docs/testing.md)"),
    ("make upgrade-check", "builds a second venv from the package registry's newest releases"),
    ("make lock", "moves the lock from the venv `make upgrade-check` built"),
    ("make bench", "a benchmark: minutes of timing, measured apart, never in a test"),
    ("OMP_NUM_THREADS=1 python -m pytest", SUITE),
    ("apt-get", "installs a system package (root, the network)"),
    ("torchrun", GPU),
    ("accelerate launch", GPU),
    ("python benchmarks/bias_attention.py --shapes", "times the Triton kernels on CUDA (its --dry-run runs here)"),
    ("python -m pip", "downloads or installs a wheel (a package registry; the device machine's recipe)"),
    ("peeval bench --train --profile gpu", "the gpu profile's model on CUDA"),
    ("peeval export ckpt/tape out/tape --push-to-hub", "uploads to the Hugging Face hub (an account, the network)"),
    ("lm_eval --model peeval-llama --model_args pretrained=DIR,gguf_file=F.gguf",
     "a pattern (DIR, F.gguf, rope scaling, ...): training.md's peeval-llama line runs this model class on SmolLM2"),
    ("python -m leaderboard.ingest --db leaderboard/peeval.duckdb results/ checkpoints/",
     "reads what `make leaderboard` wrote (hours); the OUT/ line runs the same ingest"),
    ("duckdb ", "the duckdb command-line tool is no dependency; test_docs_commands.py runs each query on a store"),
    ("python -m leaderboard.publish --profile gpu", "publishes a gpu profile's results (a GPU machine's run)"),
    ("git add", "commits to the repository"),
    ("SMOLLM2=$(python -c", "runs with the peeval-llama line that reads it, in one shell"),
]  # fmt: skip


def excluded(k: str) -> list[str]:
    return [why for start, why in EXCLUDED if k.startswith(start)]


def test_every_doc_command_is_run_or_excluded_with_a_reason():
    """Each doc line is run or excluded (exactly one way); each listed run is a doc line and each edit applies."""
    keys = {key(line) for _, line in doc_lines()}
    run = {k for k, _ in RUN if not k.startswith("BEFORE ")}
    assert len(keys) > 40
    unlisted = sorted(k for k in keys if (k in run) + len(excluded(k)) != 1)
    assert unlisted == [], "run or exclude (with the reason) each of these doc lines:\n" + "\n".join(unlisted)
    assert run <= keys, sorted(run - keys)  # a doc line changed: its entry here is stale
    for k, edits in RUN:
        for pattern, _ in edits:
            assert re.search(pattern, k), (k, pattern)


def _line(k: str) -> str:
    return BEFORE[k.removeprefix("BEFORE ")] if k.startswith("BEFORE ") else next(li for _, li in doc_lines()
                                                                                  if key(li) == k)  # fmt: skip


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """`git clone` of this repository with the working tree's changes on top, and a ``.venv`` whose scripts run
    this interpreter's (the stamp dated a day ahead: `make` sees the venv installed, never reinstalls)."""
    dst = tmp_path_factory.mktemp("fresh") / "peeval"
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(dst)], check=True)
    changed = subprocess.run(["git", "ls-files", "-m", "-o", "-d", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split("\0")  # fmt: skip
    for rel in filter(None, changed):
        src, to = ROOT / rel, dst / rel
        if src.is_file():
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, to)
        elif to.exists():
            to.unlink()
    venv = dst / ".venv" / "bin"
    venv.mkdir(parents=True)
    for exe in BIN.iterdir():
        if exe.is_file() and os.access(exe, os.X_OK):
            (venv / exe.name).write_text(f'#!/bin/sh\nexec "{exe}" "$@"\n')
            (venv / exe.name).chmod(0o755)
    stamp = dst / ".venv" / ".peeval-installed"
    stamp.touch()
    os.utime(stamp, (time.time() + 86400, time.time() + 86400))
    return dst


def _env(clone: Path) -> dict[str, str]:
    """As `source .venv/bin/activate` leaves it (the clone's code first: `make venv` installs it editable), the
    mirror named, the hub offline, one thread."""
    return {**os.environ, "PATH": f"{clone / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "VIRTUAL_ENV": str(clone / ".venv"), "PYTHONPATH": str(clone), "PEEVAL_DATA_MIRROR": str(MIRROR),
            "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1"}  # fmt: skip


def _run(clone: Path, k: str, edits) -> str:
    line = _line(k)
    for pattern, new in edits:
        line = re.sub(pattern, lambda _m, new=new: new, line)
    if k.startswith("lm_eval --model peeval-llama --model_args pretrained=$SMOLLM2"):
        line = f"{_line(next(x for x in (key(li) for _, li in doc_lines()) if x.startswith('SMOLLM2=')))}\n{line}"
    r = subprocess.run(["bash", "-c", line], cwd=clone, env=_env(clone), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, f"{line}\nexit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout + r.stderr


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"no data mirror at {MIRROR} (set PEEVAL_DATA_MIRROR)")
@pytest.mark.parametrize(("k", "edits"), [pytest.param(k, e, marks=() if k in FAST else pytest.mark.slow, id=k[:70])
                                          for k, e in RUN])  # fmt: skip
def test_doc_command_runs_as_written(clone, k, edits):
    """Run in order in one clone: a line reads what the lines before it wrote (ckpt/tok, ckpt/tape, results/...)."""
    out = _run(clone, k, edits)
    if k.startswith("peeval eval --like cpu --model_args"):
        assert (clone / "results" / "my-model" / "results.json").is_file(), out[-2000:]
    if k.startswith("make site SITE_PROFILE=cpu"):
        assert (clone / "build" / "site-cpu" / "site" / "index.html").is_file(), out[-2000:]
