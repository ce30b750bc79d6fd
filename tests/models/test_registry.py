"""peeval.registry is the one table of encodings, back-ends, adapt methods, papers and task families: every
encoding module is registered and every registered name exists, the torch modules use the registry's objects,
and importing it imports no torch (the .pth hook, the CLI's choices and the claims read it)."""

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO

from peeval import registry

ENCODINGS_DIR = Path(REPO) / "peeval" / "models" / "encodings"


def _declared_encodings() -> dict[str, str]:
    """{name: module:class} of every class under peeval/models/encodings that declares its own ``name``: what
    the registry must list, found by importing the modules (not by reading the registry)."""
    from peeval.models.encodings.base import Encoding

    found = {}
    for info in pkgutil.iter_modules([str(ENCODINGS_DIR)]):
        module = importlib.import_module(f"peeval.models.encodings.{info.name}")
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Encoding) and cls.__module__ == module.__name__ and "name" in vars(cls):
                found[cls.name] = f"{info.name}:{cls_name}"
    return found


def test_every_encoding_module_is_registered_and_every_registered_one_exists():
    from peeval.models.encodings import get_encoding_class

    declared = _declared_encodings()
    assert len(declared) == 13 and "tape" in declared and "nope" in declared  # base.py's NoPE counts too
    assert declared == registry.ENCODINGS
    for pe in registry.ENCODINGS:
        assert get_encoding_class(pe).name == pe


def test_the_torch_modules_use_the_registrys_tables():
    from peeval.models import encodings
    from peeval.models.configuration_peeval import ATTN_BACKENDS
    from peeval.models.llama_adapters import METHODS
    from peeval.tasks.diagnostics import generators

    assert encodings.ENCODINGS is registry.ENCODINGS
    assert ATTN_BACKENDS is registry.ATTN_BACKENDS
    assert METHODS is registry.ADAPT_METHODS
    assert generators.TASKS is registry.DIAG_TASKS


def test_every_registered_attention_backend_has_a_runner():
    from peeval.models.attention import BACKENDS

    assert set(registry.ATTN_BACKENDS) <= set(BACKENDS)  # BACKENDS also holds internal ones (content_blocks)


def test_task_families_are_the_task_folders():
    tasks = Path(REPO) / "peeval" / "tasks"
    # a family's folder: its declaration (family.py), with its YAML unless its tasks are lm-eval's own
    folders = {p.name for p in tasks.iterdir() if p.is_dir() and (p / "family.py").is_file()}
    from peeval.tasks.family import families

    assert all(any((tasks / f.name).glob("*.yaml")) or f.lm_eval_dirs for f in families())
    assert folders == set(registry.TASK_FAMILIES)
    scrolls = {p.stem.removeprefix("peeval_scrolls_") for p in (tasks / "scrolls").glob("peeval_scrolls_*.yaml")}
    assert scrolls == set(registry.SCROLLS_TASKS)
    diag_yamls = (tasks / "diagnostics").glob("peeval_*.yaml")
    diag = {yaml.safe_load(p.read_text())["metadata"]["diag_task"] for p in diag_yamls}
    assert diag <= set(registry.DIAG_TASKS) and len(registry.DIAG_TASKS) == 5


def test_papers_are_the_claims_papers():
    claims = yaml.safe_load((Path(REPO) / "leaderboard" / "claims" / "claims.yaml").read_text())
    cited = {c["paper"] for c in claims["claims"]}
    assert cited == {p.short for p in registry.PAPERS} == {"TAPE", "CoPE", "PoPE"}
    assert all(p.url.startswith("https://arxiv.org/abs/") for p in registry.PAPERS)


def test_importing_the_registry_imports_no_torch():
    code = (
        "import sys, peeval.registry, peeval.registry.declarations\n"
        "from peeval.evaluation import lm_eval_hook as h\n"
        "assert len(h.model_targets()) == 3 + len(peeval.registry.ENCODINGS)\n"  # peeval, -llama, -hf, -<pe>
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'lm_eval'))\n"
        "print(heavy)\n"
    )
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PEEVAL_LM_EVAL_HOOK": "0", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[]", r.stdout
