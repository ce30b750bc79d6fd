"""pipelines/repro.py (`make leaderboard JOBS=N`) on a tiny DVC project: independent stages run side by
side, a stage starts only after the stages it depends on, dvc.lock ends up as `dvc repro` writes it
(a plain `dvc repro` afterwards runs nothing), and a failing stage stops the run without recording
itself or anything below it."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO

BIN = Path(sys.executable).parent
RUNNER = Path(REPO) / "pipelines" / "repro.py"

# a, b: one second each, independent; c reads both (their start/end times go into c's output)
DVC_YAML = textwrap.dedent("""\
    stages:
      a:
        cmd: python -c "import time; t=time.time(); time.sleep(1); open('a.txt','w').write(f'{t} {time.time()}')"
        outs: [a.txt]
      b:
        cmd: python -c "import time; t=time.time(); time.sleep(1); open('b.txt','w').write(f'{t} {time.time()}')"
        outs: [b.txt]
      c:
        cmd: python -c "import time; open('c.txt','w').write(str(time.time()))"
        deps: [a.txt, b.txt]
        outs: [c.txt]
    """)


def run(args, cwd):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path):
    assert run([str(BIN / "dvc"), "init", "--no-scm", "-q"], tmp_path).returncode == 0
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    return tmp_path


def test_independent_stages_overlap_dependents_wait_and_dvc_agrees(project):
    r = run([sys.executable, str(RUNNER), "--jobs", "2"], project)
    assert r.returncode == 0, r.stdout + r.stderr
    a0, a1 = map(float, (project / "a.txt").read_text().split())
    b0, b1 = map(float, (project / "b.txt").read_text().split())
    c = float((project / "c.txt").read_text())
    assert a0 < b1 and b0 < a1, "a and b did not run at the same time"
    assert c >= max(a1, b1), "c started before the stages it depends on had finished"
    assert "Data and pipelines are up to date" in r.stdout
    again = run([str(BIN / "dvc"), "repro"], project)
    assert again.returncode == 0 and "Running stage" not in again.stdout, again.stdout
    assert (project / "logs" / "stages" / "a.log").is_file()


def test_a_failed_stage_stops_the_run_and_is_not_recorded(project):
    (project / "dvc.yaml").write_text(
        DVC_YAML.replace("time.sleep(1); open('a.txt'", "print('boom'); exit(3); open('a.txt'")
    )
    r = run([sys.executable, str(RUNNER), "--jobs", "2"], project)
    assert r.returncode != 0
    assert "FAILED  'a' (exit 3)" in r.stderr and "boom" in r.stderr  # the end of the stage's log
    assert not (project / "c.txt").exists()  # nothing below a failure runs
    recorded = set(yaml.safe_load((project / "dvc.lock").read_text())["stages"])
    assert recorded == {"b"}  # b ran beside a and finished: recorded; a failed, c never started


@pytest.mark.parametrize("jobs", ["0", "two", "-1"])
def test_jobs_not_a_positive_integer_is_one_line_and_exit_2(project, jobs):
    r = run([sys.executable, str(RUNNER), f"--jobs={jobs}"], project)
    assert r.returncode == 2
    assert r.stderr.strip() == f"repro: --jobs {jobs}: allowed an integer >= 1"
    assert not (project / "dvc.lock").exists() and not (project / "a.txt").exists()


def test_a_target_runs_itself_and_its_upstream_only(project):
    (project / "dvc.yaml").write_text(
        DVC_YAML + "  d:\n    cmd: python -c \"open('d.txt','w').write('d')\"\n    outs: [d.txt]\n"
    )
    r = run([sys.executable, str(RUNNER), "--jobs", "2", "c"], project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert all((project / f).is_file() for f in ("a.txt", "b.txt", "c.txt"))
    assert not (project / "d.txt").exists()  # not upstream of c: left for a later run
    assert set(yaml.safe_load((project / "dvc.lock").read_text())["stages"]) == {"a", "b", "c"}


def test_an_unknown_target_is_one_line_and_exit_2(project):
    r = run([sys.executable, str(RUNNER), "--jobs", "2", "nosuch"], project)
    assert r.returncode == 2
    assert r.stderr.strip() == "repro: target 'nosuch': not a stage of dvc.yaml (allowed: a, b, c)"
    assert not (project / "dvc.lock").exists() and not (project / "a.txt").exists()
