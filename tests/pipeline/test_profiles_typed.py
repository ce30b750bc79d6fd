"""params.yaml as typed, checked data (pipelines/pipeline_params.py): every parameter file validates, and
each cross-key rule, key and type error ends a stage with one line naming the key, exit 2, nothing written."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

import common  # noqa: E402
from pipeline_params import PipelineParams, load  # noqa: E402

PARAM_FILES = sorted((REPO / "params").glob("*.yaml"))


def _smoke() -> dict:
    return yaml.safe_load((REPO / "params" / "smoke.yaml").read_text())


@pytest.mark.parametrize("path", [REPO / "params.yaml", *PARAM_FILES], ids=lambda p: p.name)
def test_every_parameter_file_validates(path):
    raw, p = load(path)
    profile = {"params": "cpu", "cpu-claims": "cpu", "gpu-diag": "gpu"}.get(path.stem, path.stem)  # file -> profile
    assert isinstance(p, PipelineParams) and p.profile == raw["profile"] == profile
    assert {k: e.pe for k, e in p.encodings.items()} == {k: e["pe"] for k, e in raw["encodings"].items()}
    assert p.diagnostics.eval.profile == raw["diagnostics"]["eval"]["profile"]
    assert p.adapt.methods == raw["adapt"]["methods"] and set(p.eval.suites) == set(raw["eval"]["suites"])


def test_all_four_profiles_have_a_parameter_file():
    assert {p.stem for p in PARAM_FILES} >= {"smoke", "cpu", "paper", "gpu"}


def test_allowed_names_come_from_their_owners():
    """The checker reads names without torch; each list equals what its owner implements, found another way
    (the modules' Encoding classes, the paper profile's adapt methods, the generators' own table) — not the
    registry tuple the torch modules re-export, which would compare a name with itself."""
    import importlib
    import pkgutil

    from peeval.models import encodings
    from peeval.models.encodings.base import Encoding
    from peeval.records import DIAG_TASKS, GEN_PROFILES
    from peeval.registry.declarations import adapt_methods, encoding_names
    from peeval.tasks.diagnostics.generators import DEFAULTS, params
    from peeval.training.profiles import DIAG_PROFILES

    for mod in pkgutil.iter_modules(encodings.__path__):
        importlib.import_module(f"{encodings.__name__}.{mod.name}")
    classes, seen = [Encoding], set()
    while classes:  # every Encoding class that declares its own name, however deep
        cls = classes.pop()
        seen |= {cls.name} if "name" in vars(cls) and cls.name else set()
        classes += cls.__subclasses__()
    assert set(encoding_names()) == seen and len(encoding_names()) == len(seen)
    paper = yaml.safe_load((REPO / "params" / "paper.yaml").read_text())
    assert sorted(adapt_methods()) == sorted(paper["adapt"]["methods"])  # the paper profile runs every method
    assert tuple(DIAG_TASKS) == tuple(DEFAULTS)
    assert {p["gen_profile"] for p in DIAG_PROFILES.values()} <= set(GEN_PROFILES)
    for gen in GEN_PROFILES:  # every size set is one the generators know
        params("addition", gen)
    with pytest.raises(ValueError):
        params("addition", "gpu")


def _set(p: dict, dotted: str, value) -> dict:
    p = copy.deepcopy(p)
    *path, last = dotted.split(".")
    node = p
    for k in path:
        node = node[k]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return p


_DELETE = object()

#: (dotted key, bad value, the key the one-line error must name)
BAD = [
    ("profile", "tiny", "profile"),
    ("encodings.rope.pe", "ropee", "encodings.rope.pe"),
    ("diagnostics.runs", {}, "diagnostics.runs"),
    ("diagnostics.runs.tape-addition.task", "additon", "diagnostics.runs.tape-addition.task"),
    ("diagnostics.runs.tape-addition.pe", "tapee", "diagnostics.runs.tape-addition.pe"),
    ("diagnostics.runs.tape-addition.steps", 3, "diagnostics.runs.tape-addition"),  # settings go in train.set
    ("diagnostics.runs.Tape Add", {"pe": "tape", "task": "addition"}, "diagnostics.runs.Tape Add"),
    ("diagnostics.encodings", ["tape"], "diagnostics"),  # the old layout: one line naming the key
    ("diagnostics.seeds", [0, 0], "diagnostics.seeds"),
    ("diagnostics.seeds", [], "diagnostics.seeds"),
    ("diagnostics.seeds", ["1"], "diagnostics.seeds"),
    ("diagnostics.train.task_set", {"flipflop": {"steps": 2}}, "diagnostics.train.task_set.flipflop"),
    # a run's generator parameters: the generator's names, values it accepts
    ("diagnostics.runs.tape-addition.task_params", {"n_var": 3}, "diagnostics.runs.tape-addition.task_params.n_var"),
    (
        "diagnostics.runs.t5-counting",
        {"pe": "t5", "task": "counting", "task_params": {"n_vars": 9}},
        "diagnostics.runs.t5-counting.task_params",
    ),
    ("diagnostics.eval.profile", "gpu", "diagnostics.eval.profile"),
    ("diagnostics.eval.n", 0, "diagnostics.eval.n"),
    ("shift.encodings", ["alibi"], "shift.encodings"),
    ("shift.length", "128", "shift.length"),
    ("adapt.methods", ["rope"], "adapt.methods"),
    ("eval.pretrain", ["ppl"], "eval.pretrain"),  # smoke has one suite, `lm`
    ("eval.adapt", ["passkey"], "eval.adapt"),
    ("eval.suites.lm.limit", 0, "eval.suites.lm.limit"),
    ("eval.suites.lm.tasks", [], "eval.suites.lm.tasks"),
    ("eval.suites.lm.metadata.lenghts", [32], "eval.suites.lm.metadata: unknown key 'lenghts'"),  # issue 30
    ("seed", True, "seed"),
    ("launcher", 8, "launcher"),
    ("data.mirror", "local/gutenberg-train", "data.mirror"),
    ("train.set", [1], "train.set"),
    ("shift", _DELETE, "shift"),
    ("trian", {"set": {}}, "trian"),  # a typo of a top-level key
    ("encodings.rope.pe_option", {}, "pe_option"),
    ("encodings.rope.seed", -1, "encodings.rope.seed"),
    # a second entry of rope is one of its seeds: same settings, another seed
    ("encodings.rope-s1", {"pe": "rope", "pe_options": {}, "set": {}}, "encodings.rope-s1.seed"),
    ("encodings.rope-s1", {"pe": "rope", "pe_options": {}, "set": {"lr": 0.001}, "seed": 1}, "encodings.rope-s1.set"),
]


@pytest.mark.parametrize("dotted,value,key", BAD, ids=[f"{d}={v!r}"[:40] for d, v, _ in BAD])
def test_a_bad_parameter_file_is_one_line_naming_the_key(dotted, value, key, tmp_path, monkeypatch, capsys):
    """Old code: common.params() returned the dict and the stage went on (or died later with a traceback)."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_set(_smoke(), dotted, value), sort_keys=False))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        common.params()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "params.yaml" in err and key in err, err
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


def test_a_stage_receives_the_typed_parameters(tmp_path, monkeypatch):
    """common.params() hands the stages the checked PipelineParams (old code: the raw dict, which
    eval.py re-read with defaults of its own)."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_smoke(), sort_keys=False))
    monkeypatch.chdir(tmp_path)
    p = common.params()
    assert isinstance(p, PipelineParams) and p.diagnostics.eval.n == _smoke()["diagnostics"]["eval"]["n"]
    assert p.train_overrides("tape") == {**_smoke()["train"]["set"], **_smoke()["encodings"]["tape"]["set"]}


def test_seed_entries_of_one_encoding(tmp_path):
    """rope-s1 / rope-s2: rope's seeds 1 and 2 (one leaderboard row, three seeds); the train stage reads the seed."""
    p = _set(_smoke(), "encodings.rope-s1", {"pe": "rope", "pe_options": {}, "set": {}, "seed": 1})
    p = _set(p, "encodings.rope-s2", {"pe": "rope", "pe_options": {}, "set": {}, "seed": 2})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    _, typed = load(tmp_path / "params.yaml")
    assert [typed.encodings[k].seed for k in ("rope", "rope-s1", "rope-s2")] == [None, 1, 2]


def test_unreadable_parameter_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "params.yaml").write_text("profile: [smoke\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        common.params()
    assert e.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_stage_stops_before_writing(tmp_path):
    """A stage script itself (`data`), run as DVC runs it, on a params.yaml whose shift names a missing encoding."""
    bad = _set(_smoke(), "shift.encodings", ["alibi"])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(bad, sort_keys=False))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, str(REPO / "pipelines" / "check_data.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "shift.encodings" in r.stderr and "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


def test_use_profile_refuses_a_broken_parameter_file(tmp_path):
    """Old code: the broken file became params.yaml and the first stage failed (or ran) on it."""
    import shutil

    (tmp_path / "pipelines").mkdir()
    (tmp_path / "params").mkdir()
    for name in ("use_profile.py", "pipeline_params.py"):
        shutil.copy(REPO / "pipelines" / name, tmp_path / "pipelines" / name)
    bad = _set(_smoke(), "adapt.methods", ["longrope"])
    (tmp_path / "params" / "smoke.yaml").write_text(yaml.safe_dump(bad, sort_keys=False))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "pipelines/use_profile.py", "smoke"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 2 and "adapt.methods" in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    assert not (tmp_path / "params.yaml").exists()


def test_smoke_twins_validate():
    """The tests' smoke-sized twins of every profile (common.smoke_twin) are valid parameter files."""
    from pipeline_params import compose_file, validate

    for path in PARAM_FILES:
        validate(common.smoke_twin(compose_file(path)))


def test_the_message_names_the_file_once(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text(yaml.safe_dump(_set(_smoke(), "seed", -1)))
    with pytest.raises(ValueError) as e:
        load(bad)
    assert str(e.value).startswith(f"{bad} seed=-1: an integer >= 0") and "params.yaml" not in str(e.value)


@pytest.mark.parametrize("args", [["nope-addition", "0"], ["tape-addition", "x"], ["tape-addition"]])
def test_diagnostics_stage_unknown_run_or_bad_seed(tmp_path, args):
    """A run that is not a diagnostics.runs entry, or a seed that is not an integer: one line, exit 2,
    nothing written (old code: KeyError / ValueError tracebacks)."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_smoke(), sort_keys=False))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(REPO / "pipelines" / "diagnostics.py"), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]


# -- composed parameter files: one base, overlays, params.yaml generated -------------------------------
def test_committed_params_yaml_is_the_generated_cpu_file():
    """params.yaml is `use_profile.py cpu`'s output, not a hand-kept copy (old code: a copy that drifted once)."""
    from pipeline_params import render

    assert (REPO / "params.yaml").read_text(encoding="utf-8") == render(REPO / "params" / "cpu.yaml")
    assert "extends" not in yaml.safe_load((REPO / "params.yaml").read_text())  # DVC reads every value there


def _use_profile(tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "pipelines/use_profile.py", name], cwd=tmp_path, env=env,
                          capture_output=True, text=True)  # fmt: skip


def _copy_tool(tmp_path: Path) -> None:
    import shutil

    (tmp_path / "pipelines").mkdir()
    for name in ("use_profile.py", "pipeline_params.py"):
        shutil.copy(REPO / "pipelines" / name, tmp_path / "pipelines" / name)
    shutil.copytree(REPO / "params", tmp_path / "params")


def test_use_profile_writes_an_overlay_composed(tmp_path):
    """cpu-claims is cpu plus its own entries: the params.yaml written holds every value (no `extends`),
    cpu's entries first and unchanged, then the overlay's."""
    _copy_tool(tmp_path)
    r = _use_profile(tmp_path, "cpu-claims")
    assert r.returncode == 0, r.stderr
    written = yaml.safe_load((tmp_path / "params.yaml").read_text())
    cpu = yaml.safe_load((REPO / "params" / "cpu.yaml").read_text())
    overlay = yaml.safe_load((REPO / "params" / "cpu-claims.yaml").read_text())
    assert "extends" not in written and written["profile"] == "cpu"
    assert list(written["encodings"]) == list(cpu["encodings"]) + list(overlay["encodings"])
    assert written["diagnostics"]["train"] == cpu["diagnostics"]["train"] and written["eval"] == cpu["eval"]
    assert written["diagnostics"]["runs"] == {**cpu["diagnostics"]["runs"], **overlay["diagnostics"]["runs"]}
    _, typed = load(tmp_path / "params.yaml")
    assert typed.seed_of("rope-s2") == 2 and typed.seed_of("rope") == 0


def test_merge_rules(tmp_path):
    """Mappings merge key by key, any other value replaces; an entry extends a chain of files."""
    smoke = _smoke()
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False))
    (tmp_path / "mid.yaml").write_text(yaml.safe_dump({"extends": "base", "shift": {"encodings": ["rope"]},
                                                       "diagnostics": {"eval": {"limit": None}}}))  # fmt: skip
    (tmp_path / "top.yaml").write_text(yaml.safe_dump({"extends": "mid", "seed": 3}))
    raw, typed = load(tmp_path / "top.yaml")
    assert typed.seed == 3 and typed.shift.encodings == ["rope"]  # a list replaces, it is not appended to
    assert typed.shift.length == smoke["shift"]["length"]  # the rest of the mapping is inherited
    assert typed.diagnostics.eval.limit is None and typed.diagnostics.eval.n == smoke["diagnostics"]["eval"]["n"]
    assert list(raw) == list(smoke)  # inherited keys keep their place


@pytest.mark.parametrize(
    "files,named",
    [
        ({"a.yaml": {"extends": "cpuu", "seed": 1}}, "'cpuu'"),
        ({"a.yaml": {"extends": "b"}, "b.yaml": {"extends": "a"}}, "extends itself"),
    ],
)
def test_a_bad_extends_is_one_line(files, named, tmp_path):
    for name, body in files.items():
        (tmp_path / name).write_text(yaml.safe_dump(body))
    with pytest.raises(ValueError) as e:
        load(tmp_path / "a.yaml")
    assert named in str(e.value) and "\n" not in str(e.value) and str(tmp_path / "a.yaml") in str(e.value)


def test_params_yaml_itself_never_extends(tmp_path):
    """DVC reads params.yaml as it is: an `extends` there would hide values from it."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"extends": "smoke", **_smoke()}))
    with pytest.raises(ValueError, match="unknown key 'extends'"):
        load(tmp_path / "params.yaml")


def _profile_of(p: PipelineParams, kind: str) -> dict:
    from peeval.training.profiles import PROFILES

    return PROFILES[kind][p.profile]


def test_no_override_repeats_its_profile():
    """Each budget has one home: no parameter file sets a setting to the value its profile already has
    (old code: params/cpu.yaml diagnostics.train.set held the cpu diagnostics budget, the cpu diag
    profile another one, and the file's won)."""
    for path in PARAM_FILES:
        _, p = load(path)
        sets = [("train", "train.set", p.train.set), ("train", "tokenizer.set", p.tokenizer.set),
                ("diag", "diagnostics.train.set", p.diagnostics.train.set),
                ("adapt", "adapt.train.set", p.adapt.train.set)]  # fmt: skip
        sets += [("train", f"encodings.{k}.set", e.set) for k, e in p.encodings.items()]
        sets += [("diag", f"diagnostics.train.task_set.{t}", s) for t, s in p.diagnostics.train.task_set.items()]
        for kind, where, overrides in sets:
            profile = _profile_of(p, kind)
            same = {k: v for k, v in overrides.items() if profile.get(k) == v}
            assert not same, f"{path.name} {where} repeats the {kind} profile {p.profile!r}: {same}"


# -- settings: what a pydantic error becomes --------------------------------------------------------------
def test_settings_errors_are_one_line_naming_the_key():
    from typing import Annotated

    from pydantic import AfterValidator

    from peeval.settings import At, SettingsError, Strict, check, integer

    class Inner(Strict):
        steps: integer(1)
        sizes: list[integer(2)] = []

    def _lower(v: str) -> str:
        if v != v.lower():
            raise ValueError("lower-case")
        return v

    class Outer(Strict):
        runs: dict[Annotated[str, AfterValidator(_lower)], Inner]
        name: str

        def model_post_init(self, _):
            if self.name == "bad":
                raise At("runs", "not with this name")

    cases = [
        ({"runs": {"a": {"stepz": 1}}, "name": "x"}, "f runs.a: unknown key 'stepz' (did you mean 'steps'?); allowed"),
        ({"runs": {"a": {"steps": 0}}, "name": "x"}, "f runs.a.steps=0: an integer >= 1"),
        ({"runs": {"a": {"steps": 1, "sizes": [4, 1]}}, "name": "x"}, "f runs.a.sizes=[4, 1]:"),
        ({"runs": {"A": {"steps": 1}}, "name": "x"}, "f runs.A: lower-case"),
        ({"runs": {}}, "f: missing key name"),
        ({"runs": {}, "name": 3}, "f name=3: a string"),
        ([], "f: a mapping with runs, name (got list)"),
    ]
    for raw, line in cases:
        with pytest.raises(SettingsError) as e:
            check(Outer, raw, "f")
        assert str(e.value).startswith(line) and "\n" not in str(e.value), (raw, str(e.value))
