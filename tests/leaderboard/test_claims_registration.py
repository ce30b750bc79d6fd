"""Issue 67 item 4: families and tests registered before runs. A profile's registration (claims.yaml's families and
top-level scalars, decision.py's constants and code, the test over runs) has one canonical serialisation and
sha256; publish records it in SOURCE.json, dated by the commit from which it held, and refuses one with uncommitted
changes; the claims page says whether it predates the data; the published boards record theirs.

Expected values are written by hand here (the canonical JSON with the standard library), never read from the code
under test."""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

FILES = ("leaderboard/claims/claims.yaml", "leaderboard/claims/decision.py", "leaderboard/claims/replication.py")

CLAIMS = """# a comment
version: 1
learned_margin: 0.1
converge_tolerance: 0.05
extension_margin: 0.05
families:
  cpu: [b:x-vs-y, a:x-vs-y]
  gpu: [c:x-vs-y]
claims: []
"""
DECISION = '''"""The decision rule."""
ALPHA = 0.05
MIN_TOKENS_PER_PARAM = 20
MIN_RUNS = 3


def holm(ps):
    """Holm."""
    return sorted(ps)  # a comment
'''
DECISION_CODE = "ALPHA = 0.05\nMIN_TOKENS_PER_PARAM = 20\nMIN_RUNS = 3\ndef holm(ps):\n    return sorted(ps)\n"
REPLICATION = """TEST = "runs-t"


def compare(claim, store, focus, other, metric, test=D.welch_t):
    return None
"""


def _module():
    """leaderboard.claims.registration (an assertion, not an ImportError, where it does not exist: the base)."""
    spec = importlib.util.find_spec("leaderboard.claims.registration")
    assert spec is not None, "no registration module: nothing registers a profile's families and test (issue 67)"
    return importlib.import_module("leaderboard.claims.registration")


def _sha(obj) -> str:
    """The canonical JSON (sorted keys, no spaces, ASCII) and its sha256, by hand."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("ascii")).hexdigest()


def _expected() -> dict:
    return {
        "format": 1,
        "profile": "cpu",
        "families": ["a:x-vs-y", "b:x-vs-y"],
        "claims_yaml": {"version": 1, "learned_margin": 0.1, "converge_tolerance": 0.05, "extension_margin": 0.05},
        "decision": {"ALPHA": 0.05, "MIN_TOKENS_PER_PARAM": 20, "MIN_RUNS": 3},
        "decision_code_sha256": hashlib.sha256(ast.unparse(ast.parse(DECISION_CODE)).encode()).hexdigest(),
        "test": "runs-t: D.welch_t",
    }


def test_a_hand_built_registration_and_its_hash():
    R = _module()
    got = R.content("cpu", CLAIMS, DECISION, REPLICATION)
    assert got == _expected()
    assert R.digest(got) == _sha(_expected())
    assert R.digest(R.content("cpu", CLAIMS, DECISION, REPLICATION)) == R.digest(got)  # stable


@pytest.mark.parametrize(
    ("claims", "decision", "replication"),
    [  # what decides nothing: the order of a family, comments, docstrings, another profile's family
        (CLAIMS.replace("[b:x-vs-y, a:x-vs-y]", "[a:x-vs-y, b:x-vs-y]"), DECISION, REPLICATION),
        (CLAIMS.replace("# a comment", "# another"), DECISION.replace("Holm.", "Holm's step-down."), REPLICATION),
        (CLAIMS.replace("gpu: [c:x-vs-y]", "gpu: [d:x-vs-y]"), DECISION.replace("# a comment", ""), REPLICATION),
    ],
)
def test_the_hash_ignores_what_decides_nothing(claims, decision, replication):
    R = _module()
    assert R.digest(R.content("cpu", claims, decision, replication)) == _sha(_expected())


@pytest.mark.parametrize(
    ("field", "claims", "decision", "replication"),
    [
        ("families", CLAIMS.replace("[b:x-vs-y, a:x-vs-y]", "[a:x-vs-y]"), DECISION, REPLICATION),
        ("families", CLAIMS.replace("[b:x-vs-y, a:x-vs-y]", "[a:x-vs-y, b:x-vs-y, e:x-vs-y]"), DECISION, REPLICATION),
        ("claims_yaml", CLAIMS.replace("learned_margin: 0.1", "learned_margin: 0.11"), DECISION, REPLICATION),
        ("claims_yaml", CLAIMS.replace("converge_tolerance: 0.05", "converge_tolerance: 0.02"), DECISION, REPLICATION),
        ("claims_yaml", CLAIMS.replace("extension_margin: 0.05", "extension_margin: 0.1"), DECISION, REPLICATION),
        ("claims_yaml", CLAIMS.replace("version: 1", "version: 2"), DECISION, REPLICATION),
        # a top-level key added later (h67g's lm_learned_margin) is registered without naming it anywhere
        ("claims_yaml", CLAIMS.replace("version: 1", "version: 1\nlm_learned_margin: 0.2"), DECISION, REPLICATION),
        ("decision", CLAIMS, DECISION.replace("ALPHA = 0.05", "ALPHA = 0.1"), REPLICATION),
        ("decision", CLAIMS, DECISION.replace("MIN_RUNS = 3", "MIN_RUNS = 2"), REPLICATION),
        ("decision", CLAIMS, DECISION.replace("MIN_TOKENS_PER_PARAM = 20", "MIN_TOKENS_PER_PARAM = 10"), REPLICATION),
        ("decision", CLAIMS, DECISION + "MIN_SEEDS = 4\n", REPLICATION),
        ("decision_code_sha256", CLAIMS, DECISION.replace("return sorted(ps)", "return list(ps)"), REPLICATION),
        ("test", CLAIMS, DECISION, REPLICATION.replace("D.welch_t", "D.student_t")),
        ("test", CLAIMS, DECISION, REPLICATION.replace('"runs-t"', '"paired-t"')),
    ],
)
def test_the_hash_changes_when_any_field_changes(field, claims, decision, replication):
    R = _module()
    got = R.content("cpu", claims, decision, replication)
    changed = {k for k in got if got[k] != _expected()[k]}
    assert field in changed and changed <= {field, "decision_code_sha256"}  # a constant is decision.py's code too
    assert R.digest(got) != _sha(_expected())
    if "lm_learned_margin" in claims:
        assert got["claims_yaml"]["lm_learned_margin"] == 0.2


def test_another_profile_is_another_registration():
    R = _module()
    assert R.digest(R.content("gpu", CLAIMS, DECISION, REPLICATION)) != _sha(_expected())


# ----------------------------------------------------------------------------- dated by git
def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip
    if date:
        env.update(GIT_COMMITTER_DATE=date, GIT_AUTHOR_DATE=date)
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _commit(repo: Path, date: str, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message, date=date)
    return _git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def reg_repo(tmp_path):
    """A git repository holding the registration's files (the hand-built ones), committed on 2026-01-01."""
    repo = tmp_path / "reg"
    for rel, text in zip(FILES, (CLAIMS, DECISION, REPLICATION), strict=True):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo.parent, "init", "-q", str(repo))
    first = _commit(repo, "2026-01-01T00:00:00+00:00", "register")
    return repo, first


def test_the_commit_from_which_the_registration_held(reg_repo):
    R = _module()
    repo, first = reg_repo
    claims = repo / FILES[0]
    claims.write_text(claims.read_text().replace("# a comment", "# reworded"))  # decides nothing
    _commit(repo, "2026-01-05T00:00:00+00:00", "comment")
    assert R.first_committed("cpu", repo) == (first, "2026-01-01T00:00:00+00:00")
    claims.write_text(claims.read_text().replace("learned_margin: 0.1", "learned_margin: 0.2"))
    with pytest.raises(R.RegistrationError, match="uncommitted changes.*claims.yaml"):
        R.first_committed("cpu", repo)
    third = _commit(repo, "2026-01-09T00:00:00+00:00", "margin")
    assert R.first_committed("cpu", repo) == (third, "2026-01-09T00:00:00+00:00")
    since = R.held_since("cpu", repo)  # the families were declared on the first day and held since
    assert since["families"] == (first, "2026-01-01T00:00:00+00:00")
    assert since["claims_yaml"] == (third, "2026-01-09T00:00:00+00:00")


# ----------------------------------------------------------------------------- publish
@pytest.fixture
def results(tmp_path, monkeypatch):
    """A repository root with one run to publish (its results dated 2026-11-22T10:00)."""
    from test_published import _local_run

    root = tmp_path / "runs"
    root.mkdir()
    monkeypatch.chdir(root)
    _local_run(root, 30.0)
    return root


def test_publish_refuses_an_uncommitted_registration(reg_repo, results, monkeypatch, capsys):
    from leaderboard import publish as P

    repo, _ = reg_repo
    monkeypatch.setattr(P, "REGISTRATION_ROOT", repo, raising=False)
    (repo / FILES[1]).write_text(DECISION.replace("ALPHA = 0.05", "ALPHA = 0.1"))  # not committed
    rc = P.main(["--profile", "gpu", "--machine", "m", "--out", str(results / "published")])
    err = capsys.readouterr().err.strip()
    assert rc == 2, "published with a registration that is not committed"
    assert len(err.splitlines()) == 1 and "uncommitted changes" in err and "decision.py" in err, err
    assert not (results / "published" / "gpu").exists()  # nothing written


def test_publish_records_the_registration_and_the_data_date(reg_repo, results, monkeypatch):
    from leaderboard import publish as P

    repo, first = reg_repo
    monkeypatch.setattr(P, "REGISTRATION_ROOT", repo, raising=False)
    out = P.publish("cpu", "m", out=results / "published")
    reg = json.loads((out / "SOURCE.json").read_text()).get("registration")
    assert isinstance(reg, dict), "SOURCE.json records no registration"
    assert reg["content"] == _expected() and reg["sha256"] == _sha(_expected())
    assert (reg["commit"], reg["committed"]) == (first, "2026-01-01T00:00:00+00:00")
    assert reg["data_from"] == "2026-11-22T10:00:00+00:00"  # the run's results.json date (test_published)


def test_ingest_refuses_a_malformed_registration(reg_repo, results, monkeypatch):
    from leaderboard import publish as P
    from leaderboard.ingest import IngestError, ingest

    repo, _ = reg_repo
    monkeypatch.setattr(P, "REGISTRATION_ROOT", repo, raising=False)
    out = P.publish("cpu", "m", out=results / "published")
    src = json.loads((out / "SOURCE.json").read_text())
    src["registration"] = {**src.get("registration", {}), "sha256": "not a hash"}
    (out / "SOURCE.json").write_text(json.dumps(src))
    with pytest.raises(IngestError, match="registration"):
        ingest([out], results / "s.duckdb")


# ----------------------------------------------------------------------------- the claims page
def _page(tmp_path, monkeypatch, registration: dict | None) -> str:
    """The claims page of a one-pair store published as profile cpu, whose SOURCE.json (a folder of the test's)
    records ``registration``: through the claims stage (pipelines/claims.py --source published/cpu)."""
    from helpers.claims import write_claims_file

    from leaderboard import store as S
    from leaderboard.site.claims_page import render_claims_page

    published = tmp_path / "published"
    (published / "cpu").mkdir(parents=True)
    src = {"profile": "cpu", "machine": "m", **({"registration": registration} if registration else {})}
    (published / "cpu" / "SOURCE.json").write_text(json.dumps(src))
    monkeypatch.setattr(S, "PUBLISHED", published)
    db = tmp_path / "s.duckdb"
    con = duckdb.connect(str(db))
    con.execute(S.schema_sql())
    for pe, vals in (("pope", (0.90, 0.91, 0.92)), ("rope", (0.10, 0.11, 0.12))):
        for s, v in enumerate(vals):
            con.execute("INSERT INTO runs (run_id, name, kind, checkpoint, pe, pe_options, params, seed, date, source) "
                        "VALUES (?, ?, 'pretrain', ?, ?, '{}', '{}', ?, TIMESTAMP '2026-02-01 00:00:00', "
                        "'published/cpu')", [f"{pe}{s}", pe, f"ck/{pe}{s}", pe, s])  # fmt: skip
            con.execute("INSERT INTO metrics VALUES (?, 'piqa', 'acc', 'none', ?, 0.01, 500)", [f"{pe}{s}", v])
    con.close()
    claims = write_claims_file(tmp_path, [{"task": "piqa"}])
    spec = importlib.util.spec_from_file_location("claims_stage_67r", f"{REPO}/pipelines/claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    out = tmp_path / "claims.duckdb"
    assert stage.main(["--db", str(db), "--out", str(out), "--claims", str(claims), "--source", "published/cpu"]) == 0
    html = render_claims_page(duckdb.connect(str(out), read_only=True))
    return " ".join(html.split())


def _registration_of(claims: Path, committed: str, data_from: str, families=None) -> dict:
    """SOURCE.json's registration as the test sets it: the registration of ``claims`` (the repository's decision.py
    and replication.py) with the dates given; ``families``: another family recorded (changed since)."""
    R = _module()
    held = R.current("cpu", claims=claims)
    if families is not None:
        held = {**held, "families": families}
    return {"sha256": _sha(held), "commit": "c" * 40, "committed": committed, "data_from": data_from, "content": held}


@pytest.mark.parametrize(
    ("committed", "data_from", "said"),
    [
        ("2026-01-15T00:00:00+00:00", "2026-02-01T00:00:00+00:00",
         "registered 2026-01-15 (commit cccccccc), data from 2026-02-01: before"),
        ("2026-03-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00",
         "registered 2026-03-01 (commit cccccccc), data from 2026-02-01: after: exploratory"),
    ],
)  # fmt: skip
def test_the_page_says_whether_the_registration_predates_the_data(tmp_path, monkeypatch, committed, data_from, said):
    from helpers.claims import write_claims_file

    reg = _registration_of(write_claims_file(tmp_path, [{"task": "piqa"}]), committed, data_from)
    html = _page(tmp_path, monkeypatch, reg)
    assert "Holm family: PoPE @ cpu, m = 1 declared pairs." in html
    assert f"Registration (families, test, gates, margins): {said}" in html


def test_the_page_says_a_registration_changed_since_publication(tmp_path, monkeypatch):
    from helpers.claims import write_claims_file

    reg = _registration_of(write_claims_file(tmp_path, [{"task": "piqa"}]), "2026-01-15T00:00:00+00:00",
                           "2026-02-01T00:00:00+00:00", families=["another:a-vs-b"])  # fmt: skip
    html = _page(tmp_path, monkeypatch, reg)
    assert "registered 2026-01-15 (commit cccccccc), data from 2026-02-01: before; the registration changed since " \
           "publication (families:" in html  # fmt: skip
    assert "these verdicts are not pre-registered" in html


def test_the_page_says_when_no_registration_was_recorded(tmp_path, monkeypatch):
    html = _page(tmp_path, monkeypatch, None)
    assert "no registration recorded for this data" in html and "exploratory" in html


# ----------------------------------------------------------------------------- the published boards
def _run_dates(folder: Path) -> list[str]:
    out = []
    for f in folder.rglob("results.json"):
        out.append(json.loads(f.read_text())["peeval"]["date"])
    return out


@pytest.mark.parametrize("profile", ["cpu", "cpu-claims"])
def test_the_published_boards_record_their_registration_and_ingest_accepts_them(profile):
    """Each board's SOURCE.json says, from git, when its registration held and when its data began; the families
    and the test were both fixed after the data existed, so its verdicts are exploratory. Ingest still accepts
    the folder (its manifest checked whole)."""
    from leaderboard.ingest.published import check_published, read_source

    folder = Path(REPO) / "leaderboard" / "published" / profile
    src = read_source(folder)
    check_published(folder, src)
    reg = src.get("registration")
    assert isinstance(reg, dict), f"{profile}: SOURCE.json records no registration"
    assert reg["sha256"] == _sha(reg["content"]) and reg["content"]["profile"] == profile
    dates = sorted(dt.datetime.fromisoformat(d) for d in _run_dates(folder))
    assert dt.datetime.fromisoformat(reg["data_from"]) == dates[0]
    assert dt.datetime.fromisoformat(reg["committed"]) > dates[0]  # after the data: exploratory
    assert dt.datetime.fromisoformat(reg["held_since"]["families"]["date"]) > dates[0]
    assert dt.datetime.fromisoformat(src["published"]) < dt.datetime.fromisoformat(reg["recorded"])
    assert "recorded afterwards" in reg["recorded_after_publication"]


def test_record_registration_leaves_a_recorded_folder_alone(tmp_path, capsys):
    """pipelines/record_registration.py never replaces a registration already recorded without --replace."""
    spec = importlib.util.spec_from_file_location("record_registration_67r", f"{REPO}/pipelines/record_registration.py")
    assert spec is not None and Path(spec.origin).is_file(), "no pipelines/record_registration.py"
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    folder = tmp_path / "cpu"
    folder.mkdir()
    shutil.copy(Path(REPO) / "leaderboard" / "published" / "cpu" / "SOURCE.json", folder / "SOURCE.json")
    before = (folder / "SOURCE.json").read_bytes()
    assert script.main([str(folder)]) == 2
    assert "already records a registration" in capsys.readouterr().err
    assert (folder / "SOURCE.json").read_bytes() == before


def test_every_top_level_scalar_is_registered_by_its_own_name():
    """A key another change adds to claims.yaml (a margin, a budget fraction, a date) is registered without this
    module naming it; a list or mapping other than the families is not a scalar setting."""
    R = _module()
    extra = "lm_learned_margin: 0.3\nconverge_budget_fraction: 0.25\nfixed_on: 2026-11-29\nnotes: [a, b]\n"
    got = R.content("cpu", CLAIMS + extra, DECISION, REPLICATION)["claims_yaml"]
    assert got == {**_expected()["claims_yaml"], "lm_learned_margin": 0.3, "converge_budget_fraction": 0.25,
                   "fixed_on": "2026-11-29"}  # fmt: skip


def test_local_runs_are_judged_against_the_committed_registration(reg_repo, monkeypatch):
    """The pipeline's own runs: the registration committed in the repository, dated by git, against their earliest
    run (the store's runs.date); with uncommitted changes there is none to compare ("not recorded")."""
    R = _module()
    repo, first = reg_repo
    monkeypatch.setattr(R, "ROOT", repo)
    spec = importlib.util.spec_from_file_location("claims_stage_67r_local", f"{REPO}/pipelines/claims.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    got = stage.recorded_registration("local", "cpu", dt.datetime(2026, 2, 1))
    assert got is not None and (got["commit"], got["committed"]) == (first, "2026-01-01T00:00:00+00:00")
    assert got["data_from"] == "2026-02-01T00:00:00"
    (row,) = R.board_rows(["cpu"], lambda p: got, root=repo)
    assert row["status"] == "before" and row["line"].startswith("registered 2026-01-01 (commit "), row
    (repo / FILES[0]).write_text(CLAIMS.replace("learned_margin: 0.1", "learned_margin: 0.3"))
    assert stage.recorded_registration("local", "cpu", dt.datetime(2026, 2, 1)) is None
