"""peeval's declared names and option defaults, read from its source with ``ast`` (no torch import).

Readers that must stay light (the claims checker under ``leaderboard/``, which imports no torch)
need the encoding names and their ``pe_options`` defaults, the adapt methods and the SCROLLS
metric kinds (the string formats themselves are ``peeval.records``'s). Those are declared as
literals in modules that import torch or lm-eval; this module reads the literals without running
those modules, as ``peeval/_lm_eval_hook.py`` does for the encoding names.
tests/leaderboard/test_claims_package.py checks every answer against the real modules.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

from ._lm_eval_hook import encoding_names

ROOT = Path(__file__).resolve().parent
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


def _literal(path: Path, name: str) -> Any:
    node = _assigned(_tree(path).body, name)
    if node is None:
        raise DeclarationError(f"{path}: no top-level {name} = <literal>")
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise DeclarationError(f"{path}: {name} is not a literal") from None


def adapt_methods() -> tuple[str, ...]:
    """``peeval.models.llama_adapters.METHODS``."""
    return tuple(_literal(ROOT / "models" / "llama_adapters.py", "METHODS"))


def scrolls_metric_kinds() -> dict[str, str]:
    """{SCROLLS task: its metric kind (f1, em, rouge)} from ``peeval.tasks.scrolls.scrolls.TASKS``."""
    return {k: v[0] for k, v in _literal(ROOT / "tasks" / "scrolls" / "scrolls.py", "TASKS").items()}


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
    table = _literal(ENCODINGS_DIR / "__init__.py", "ENCODINGS")
    if pe not in table:
        raise DeclarationError(f"unknown pe {pe!r}; known encodings: {', '.join(table)}")
    module, cls = table[pe].split(":")
    return _class_options(module, cls)


__all__ = [
    "DeclarationError",
    "adapt_methods",
    "encoding_names",
    "encoding_option_defaults",
    "scrolls_metric_kinds",
]
