"""The package seen from outside: config.json, plain transformers, lm-eval entry points, import rules.

- ``config.json`` records the effective ``pe_options`` and old files without them still load;
- ``AutoConfig`` / ``AutoModelForCausalLM`` resolve ``model_type: peeval`` in a fresh
  interpreter that never imported peeval (the ``.pth`` hook registers it lazily);
- pyproject's ``lm_eval.models`` entry points are ones the hook registers, which adds
  ``peeval-<pe>`` for every key of the encoding registry;
- ``peeval/kernels`` imports nothing from ``peeval/models``, and no import cycle exists.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("peeval", "leaderboard", "pipelines")


# -- 1. config.json ----------------------------------------------------------------------

# defaults as SPEC 2.2's table states them (written out by hand, not read from the code)
SPEC_DEFAULTS = {
    "t5": {"num_buckets": 32, "max_distance": 128},
    "cope": {"npos_max": 64, "sep_keys": False, "val_gates": False, "with_rope": False, "share_layers": True},
}


def _save_config(tmp_path, **kw) -> dict:
    from peeval.models import PeevalConfig

    PeevalConfig(**kw).save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


GIVEN = {"t5": {"num_buckets": 16}, "cope": {"npos_max": 96}}


@pytest.mark.parametrize("pe", sorted(SPEC_DEFAULTS))
def test_config_json_records_effective_options(tmp_path, pe):
    saved = _save_config(tmp_path, pe=pe, pe_options=GIVEN[pe])
    assert saved["pe_options"] == GIVEN[pe]  # as given: labels and provenance keep reading this
    assert saved["pe_options_effective"] == {**SPEC_DEFAULTS[pe], **GIVEN[pe]}


def test_config_round_trip_keeps_given_options(tmp_path):
    """Loading does not turn defaults into given options (run labels stay ``pe``, not ``pe(k=v,...)``)."""
    from transformers import AutoConfig

    _save_config(tmp_path, pe="cope")
    cfg = AutoConfig.from_pretrained(tmp_path)
    assert type(cfg).__name__ == "PeevalConfig"
    assert cfg.pe_options == {}
    assert cfg.effective_pe_options == SPEC_DEFAULTS["cope"]
    assert not hasattr(cfg, "pe_options_effective")  # derived: written, never stored


def _write_config(tmp_path, **fields) -> Path:
    """A config.json as an older peeval (or a hand edit) wrote it."""
    import peeval.models  # noqa: F401  (in-process users import it; the .pth hook is tested below)

    body = {"model_type": "peeval", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4}
    (tmp_path / "config.json").write_text(json.dumps({**body, **fields}))
    return tmp_path


def test_old_config_json_without_effective_options_loads(tmp_path):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(_write_config(tmp_path, pe="t5", pe_options={"num_buckets": 16}))
    assert cfg.pe_options == {"num_buckets": 16}
    assert cfg.effective_pe_options == {"num_buckets": 16, "max_distance": 128}


def test_saved_options_win_over_changed_defaults(tmp_path):
    """A checkpoint saved when a default was different loads as it was trained."""
    from transformers import AutoConfig

    recorded = {"num_buckets": 8, "max_distance": 128}  # as if the default had been 8 then
    cfg = AutoConfig.from_pretrained(_write_config(tmp_path, pe="t5", pe_options={}, pe_options_effective=recorded))
    assert cfg.pe_options == {"num_buckets": 8}
    assert cfg.effective_pe_options == recorded


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"pe": "t5", "pe_options": {}, "pe_options_effective": {"num_buckets": 8, "warp": 2}}, "warp"),
        ({"pe": "t5", "pe_options": {"num_buckets": 16}, "pe_options_effective": {"num_buckets": 8}}, "num_buckets"),
        ({"pe": "t5", "pe_options_effective": [8]}, "pe_options_effective must be a dict"),
    ],
)
def test_inconsistent_effective_options_fail_clearly(tmp_path, fields, needle):
    from transformers import AutoConfig

    with pytest.raises(ValueError, match=needle):
        AutoConfig.from_pretrained(_write_config(tmp_path, **fields))


# -- 2. plain transformers in a fresh interpreter --------------------------------------------


def _literal(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(name)


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory) -> Path:
    """An interpreter whose site runs *this checkout's* .pth hook, as ``pip install`` ships it.

    A venv that sees the test interpreter's packages through a plain path line (so their
    installed ``peeval_lm_eval.pth``, possibly from an older install, does not run) and holds
    the ``.pth`` + hook module that setup.py would install from this checkout.
    """
    root = tmp_path_factory.mktemp("fresh")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    setup = ast.parse((REPO / "setup.py").read_text())
    (site / "00-shared-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / _literal(setup, "PTH")).write_text(_literal(setup, "PTH_LINE"))
    (site / _literal(setup, "HOOK")).write_text((REPO / "peeval" / "evaluation" / "lm_eval_hook.py").read_text())
    return python


def _run(python: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "peeval: could not register" not in r.stderr, r.stderr[-4000:]
    return r.stdout


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A saved TAPE model with a non-default option, and its logits on a fixed input."""
    import torch

    from peeval.models import PeevalConfig, PeevalForCausalLM

    torch.manual_seed(0)
    cfg = PeevalConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, pe="tape", pe_options={"mlp_update": False})  # fmt: skip
    model = PeevalForCausalLM(cfg).eval()
    path = tmp_path_factory.mktemp("tiny-tape")
    model.save_pretrained(path)
    ids = [[5, 9, 2, 7, 7, 1]]
    with torch.no_grad():
        return path, ids, model(torch.tensor(ids)).logits


@pytest.mark.parametrize(
    "first",
    [
        # the order lm-eval's HFLM and most scripts use; AutoConfig's module is imported inside it
        "from transformers import AutoModelForCausalLM",
        pytest.param("from transformers import AutoConfig", marks=pytest.mark.slow),
    ],
)
def test_auto_classes_resolve_peeval_without_importing_it(fresh_python, tiny_checkpoint, first):
    import torch

    path, ids, want = tiny_checkpoint
    code = f"""
import json, sys
assert "peeval" not in sys.modules and "transformers" not in sys.modules, "imported at start"
{first}
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
known = "peeval" in CONFIG_MAPPING
light = [m for m in sys.modules if m.startswith("peeval")]  # nothing imported until looked up
from transformers import AutoConfig, AutoModelForCausalLM
cfg = AutoConfig.for_model("peeval", pe="tape")
assert type(cfg).__name__ == "PeevalConfig" and cfg.pe == "tape", cfg
import torch
m = AutoModelForCausalLM.from_pretrained({str(path)!r}).eval()
with torch.no_grad():
    logits = m(torch.tensor({ids})).logits
out = {{"known": known, "light": light, "cls": type(m).__name__, "pe_options": m.config.pe_options}}
print(json.dumps({{**out, "logits": logits.tolist()}}))
"""
    out = json.loads(_run(fresh_python, code).strip().splitlines()[-1])
    assert out["known"], "model_type peeval unknown to AutoConfig"
    assert out["light"] == [], "importing transformers' Auto classes imported peeval"
    assert out["cls"] == "PeevalForCausalLM"
    assert out["pe_options"] == {"mlp_update": False}
    torch.testing.assert_close(torch.tensor(out["logits"]), want, rtol=0, atol=1e-6)


def test_auto_config_knows_peeval_before_loading_it(monkeypatch):
    """The hook's stand-in for transformers' registered configs: named at once, loaded on lookup."""
    from transformers.models.auto import configuration_auto as ca

    from peeval.evaluation.lm_eval_hook import _PendingPeeval
    from peeval.models import PeevalConfig

    plain = {k: v for k, v in dict.items(ca.CONFIG_MAPPING._extra_content) if k != "peeval"}
    monkeypatch.setattr(ca.CONFIG_MAPPING, "_extra_content", _PendingPeeval(plain))
    extra = ca.CONFIG_MAPPING._extra_content
    assert "peeval" in ca.CONFIG_MAPPING and "peeval" in list(ca.CONFIG_MAPPING.keys()) and extra.pending
    assert "nonesuch" not in ca.CONFIG_MAPPING
    assert ca.CONFIG_MAPPING["peeval"] is PeevalConfig and not extra.pending
    assert ca.CONFIG_MAPPING.keys().count("peeval") == 1
    assert type(ca.AutoConfig.for_model("peeval", pe="t5")) is PeevalConfig


# -- 3. lm-eval entry points --------------------------------------------------------------


def test_lm_eval_entry_points_match_the_hook():
    from importlib.metadata import EntryPoint

    from peeval.evaluation import lm_eval_hook as hook
    from peeval.models.encodings import ENCODINGS

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["lm_eval.models"]
    targets = hook.model_targets()
    assert set(targets) == {"peeval", "peeval-llama", "peeval-hf"} | {f"peeval-{pe}" for pe in ENCODINGS}
    assert declared == {name: targets[name] for name in ("peeval", "peeval-llama", "peeval-hf")}
    from lm_eval.api.model import LM

    for name in ("peeval", "peeval-llama", "peeval-hf", "peeval-tape"):
        cls = EntryPoint(name, targets[name], "lm_eval.models").load()
        assert issubclass(cls, LM), name


def _declared_entry_points():
    from importlib.metadata import EntryPoint

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["lm_eval.models"]
    return [EntryPoint(name, value, "lm_eval.models") for name, value in declared.items()]


def _registry_module():
    """What the hook sees after ``lm_eval.api.registry`` ran: a module with a fresh model registry."""
    from lm_eval.api.registry import Registry

    return type("RegistryModule", (), {"model_registry": Registry("model")})


def test_installed_lm_eval_reads_no_entry_point_group():
    """lm-eval 0.4.13 accepts EntryPoint placeholders but scans no group: the .pth hook is the path that works
    today. When a release scans ``lm_eval.models``, this fails and the hook's fallback role can be revisited."""
    import lm_eval

    scanning = [p.name for p in Path(lm_eval.__file__).parent.rglob("*.py") if "entry_points(" in p.read_text()]
    assert scanning == []


def test_entry_points_alone_give_lm_eval_peevals_models():
    """The entry-point path, as a scanning lm-eval would take it, with the hook off."""
    from lm_eval.api.model import LM

    from peeval.harness.plugin import PeevalLlamaLM, PeevalLM

    mod = _registry_module()
    for ep in _declared_entry_points():
        mod.model_registry.register(ep.name, target=ep)
    assert mod.model_registry.get("peeval") is PeevalLM and mod.model_registry.get("peeval-llama") is PeevalLlamaLM
    assert issubclass(mod.model_registry.get("peeval"), LM) and "peeval-tape" not in mod.model_registry


def test_hook_path_registers_lm_eval_models_in_a_fresh_interpreter(fresh_python):
    """The .pth hook path as installed today (lm-eval 0.4.13 scans no entry points): the models resolve."""
    code = """
import sys
from importlib.metadata import EntryPoint
from lm_eval.api.registry import get_model, model_registry
assert "peeval" not in sys.modules, "the hook imported peeval before a model was used"
assert isinstance(model_registry._objs["peeval-tape"], EntryPoint)
print(get_model("peeval").__name__, get_model("peeval-tape").__name__, get_model("peeval-llama").__name__)
"""
    assert _run(fresh_python, code).split() == ["PeevalLM", "PeevalLM_tape", "PeevalLlamaLM"]


@pytest.mark.parametrize("entry_points_first", [True, False])
def test_hook_and_entry_points_coexist_in_either_order(entry_points_first):
    """Before: the hook registered "module:attr" strings, and a later registration of the equal EntryPoint (an
    lm-eval that scans entry points after the hook ran) was a ValueError: alias already registered."""
    from peeval.evaluation import lm_eval_hook as hook
    from peeval.harness.plugin import PeevalLM

    mod = _registry_module()
    if entry_points_first:
        for ep in _declared_entry_points():
            mod.model_registry.register(ep.name, target=ep)
    hook._on_registry(mod)
    if not entry_points_first:
        for ep in _declared_entry_points():
            mod.model_registry.register(ep.name, target=ep)  # raised before
    assert mod.model_registry.get("peeval") is PeevalLM
    assert mod.model_registry.get("peeval-tape").__name__ == "PeevalLM_tape"  # the hook's own names as well


# -- 4. import rules ---------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((REPO / pkg).rglob("*.py")):
            parts = list(f.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _import_nodes(nodes):
    """Every import statement, at any depth (lazy imports count), except under ``if TYPE_CHECKING``."""
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _import_nodes(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _import_nodes(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (a ``from pkg import sub`` counts as ``pkg.sub``)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    raw = set()
    for node in _import_nodes([ast.parse(path.read_text(encoding="utf-8"))]):
        if isinstance(node, ast.Import):
            raw.update(a.name for a in node.names)
            continue
        base = (
            ".".join(here[: len(here) - node.level + 1] + [node.module or ""]).strip(".") if node.level else node.module
        )
        raw.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    found = set()
    for mod in raw:
        while mod and mod not in modules:
            mod = mod.rpartition(".")[0]
        if mod and mod != name:
            found.add(mod)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The module graph, and the same collapsed to rooms (``peeval.models``, ``peeval.training``, ...)."""
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    room = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    rooms: dict[str, set[str]] = {}
    for m, targets in graph.items():
        rooms.setdefault(room(m), set()).update(room(t) for t in targets if room(t) != room(m))
    return graph, rooms


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_kernels_import_nothing_from_models():
    modules = _modules()
    bad = {
        m: sorted(t for t in _imports(m, p, modules) if t == "peeval.models" or t.startswith("peeval.models."))
        for m, p in modules.items()
        if m == "peeval.kernels" or m.startswith("peeval.kernels.")
    }
    assert not {m: t for m, t in bad.items() if t}, "peeval/kernels must not import peeval/models"
    assert _imports("peeval.kernels.tape_attention", modules["peeval.kernels.tape_attention"], modules)


def test_no_import_cycles():
    graph, rooms = _graphs()
    found = _cycles(graph) + [c for c in _cycles(rooms) if c not in _cycles(graph)]
    assert not found, f"import cycles: {found}"
