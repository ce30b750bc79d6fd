"""peeval's declared names and option defaults for readers that import no torch (the claims checker under
``leaderboard/``, the parameter files' checks).

The names (encodings, adapt methods, SCROLLS metric kinds) are ``peeval.registry``'s, which the torch modules
import too. The ``pe_options`` defaults stay declared on each encoding's class (``options = {...: Option(...)}``,
so an encoding is still one module + one registry line); they are read here from that module's source with
``ast``, without running it. tests/leaderboard/test_claims_package.py checks every answer against the real
modules.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

from . import ADAPT_METHODS, ENCODINGS, SCROLLS_TASKS, encoding_names

ROOT = Path(__file__).resolve().parent.parent  # peeval/
ENCODINGS_DIR = ROOT / "models" / "encodings"


class DeclarationError(LookupError):
    """A declaration this module cannot read as a literal (the source changed shape): never guessed."""


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _assigned(body: list[ast.stmt], name: str) -> ast.expr | None:
    """The value of the last ``name = ...`` / ``name: T = ...`` in ``body``, or None."""
    found = None
    for node in body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(getattr(t, "id", None) == name for t in targets) and getattr(node, "value", None) is not None:
            found = node.value
    return found


def adapt_methods() -> tuple[str, ...]:
    """``peeval.registry.ADAPT_METHODS`` (``peeval.models.llama_adapters.METHODS``)."""
    return tuple(ADAPT_METHODS)


def scrolls_metric_kinds() -> dict[str, str]:
    """{SCROLLS task: its metric kind (f1, em, rouge)} from ``peeval.registry.SCROLLS_TASKS``."""
    return {k: v[0] for k, v in SCROLLS_TASKS.items()}


def _option_defaults(node: ast.expr, where: str) -> dict[str, Any]:
    """``{"name": Option(default, ...), ...}`` -> {name: default}."""
    if not isinstance(node, ast.Dict):
        raise DeclarationError(f"{where}: options is not a dict literal")
    out = {}
    for k, v in zip(node.keys, node.values, strict=True):
        if not (isinstance(k, ast.Constant) and isinstance(v, ast.Call) and getattr(v.func, "id", None) == "Option"):
            raise DeclarationError(f"{where}: options entries must be 'name': Option(default, ...)")
        arg = v.args[0] if v.args else next((kw.value for kw in v.keywords if kw.arg == "default"), None)
        if arg is None:
            raise DeclarationError(f"{where}: option {k.value!r} has no default")
        try:
            out[k.value] = ast.literal_eval(arg)
        except ValueError:
            raise DeclarationError(f"{where}: the default of option {k.value!r} is not a literal") from None
    return out


def _class_options(module: str, cls: str) -> dict[str, Any]:
    """The ``options`` class attribute of ``cls`` in ``peeval/models/encodings/<module>.py``, following
    its base classes through the module's own classes and relative imports (as Python's MRO would)."""
    path = ENCODINGS_DIR / f"{module}.py"
    tree = _tree(path)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        raise DeclarationError(f"{path}: no class {cls}")
    value = _assigned(node.body, "options")
    if value is not None:
        return _option_defaults(value, f"{path}: {cls}")
    for base in node.bases:
        name = getattr(base, "id", None)
        if name is None:
            continue  # nn.Module and other attributes: no pe options
        if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
            return _class_options(module, name)
        for imp in tree.body:
            if isinstance(imp, ast.ImportFrom) and imp.level == 1 and any(a.name == name for a in imp.names):
                return _class_options(imp.module, name)
    raise DeclarationError(f"{path}: cannot find the options of {cls} or of its bases")


def encoding_option_defaults(pe: str) -> dict[str, Any]:
    """{option: default} of encoding ``pe`` (``get_encoding_class(pe).options`` without torch)."""
    return dict(_encoding_option_defaults(pe))


@functools.cache
def _encoding_option_defaults(pe: str) -> dict[str, Any]:
    if pe not in ENCODINGS:
        raise DeclarationError(f"unknown pe {pe!r}; known encodings: {', '.join(ENCODINGS)}")
    module, cls = ENCODINGS[pe].split(":")
    return _class_options(module, cls)


__all__ = [
    "DeclarationError",
    "adapt_methods",
    "encoding_names",
    "encoding_option_defaults",
    "scrolls_metric_kinds",
]


def profile_names(kind: str) -> tuple[str, ...]:
    """The profiles of ``kind`` (train / diag / adapt) in ``peeval/training/profiles.yaml``, read without
    validating them (``peeval.training.profiles`` does that): the CLI's help lists every one."""
    import yaml

    table = yaml.safe_load((ROOT / "training" / "profiles.yaml").read_text(encoding="utf-8"))
    return tuple(table[kind])


def compile_auto_min_steps() -> int:
    """``peeval.training.speed.AUTO_MIN_STEPS`` (the fewest steps ``--compile auto`` compiles), read from
    its source: the help states the code's number without importing torch."""
    node = _assigned(_tree(ROOT / "training" / "speed.py").body, "AUTO_MIN_STEPS")
    if not (isinstance(node, ast.Constant) and isinstance(node.value, int)):
        raise DeclarationError("peeval/training/speed.py: AUTO_MIN_STEPS is not an int literal")
    return node.value
