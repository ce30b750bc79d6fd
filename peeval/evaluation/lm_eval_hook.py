"""Make peeval's models and tasks visible to lm-evaluation-harness and transformers with no flags.

lm-eval 0.4.13 scans no entry points (newer releases read the ``lm_eval.models`` ones that
pyproject.toml declares for ``peeval`` and ``peeval-llama``; ``peeval-<pe>`` exist only here,
one per key of ``peeval.registry.ENCODINGS``, so a new encoding needs no other line), and
transformers resolves ``model_type: peeval`` only once ``PeevalConfig`` is registered, so a
``.pth`` file (installed next to this module as the top-level ``_peeval_lm_eval_hook``)
imports this module at interpreter start. It must stay
cheap (stdlib only, no lm_eval / transformers / torch import) and lazy: it only adds a
finder that waits for those libraries' own modules and then

- after ``transformers.models.auto.configuration_auto`` runs: makes ``AutoConfig`` know
  ``model_type: peeval`` without importing anything; the first lookup of it imports
  ``peeval.models``, which registers ``PeevalConfig``, and the first ``PeevalConfig`` built
  registers the model classes, so ``AutoModelForCausalLM.from_pretrained(peeval_checkpoint)``
  works without importing peeval (see ``peeval/models/__init__.py``);
- after ``lm_eval.api.registry`` runs: imports ``lm_eval.models`` first (its built-ins
  register only into an empty registry) and registers ``peeval``, ``peeval-llama`` and
  ``peeval-<pe>`` for every encoding as lazy placeholders (nothing heavy is imported until
  a model is used), ``EntryPoint`` objects equal to pyproject's, so that an lm-eval which also
  registers the installed entry points does so without a conflict, in either order;
- after ``lm_eval.tasks.manager`` runs: puts peeval's task folder on every TaskManager's
  include path, before the user's paths so those can still override;
- after ``lm_eval.evaluator`` runs: ``simple_evaluate`` first checks a peeval model's ``peeval_ppl`` lengths
  against its ``max_length`` (``peeval.tasks.ppl.ppl.check_fits``), before the model is loaded, as
  ``peeval eval`` does;
- after ``lm_eval.__main__`` runs: the ``lm_eval`` command prints a ``ValueError`` raised in peeval's own code
  (bad metadata, model_args, lengths) as one line and exits 2, as ``peeval eval`` does, not a 50-line traceback;
- after ``lm_eval.api.task`` runs: routes the dataset download of lm-eval's own YAML tasks
  through the offline mirror (``peeval.data.patch_lm_eval_tasks``: a named mirror, else the hub, else
  the mirror beside the repository, else one error naming the dataset).

Safe to run twice (a ``lib64 -> lib`` symlink can execute the .pth twice). ``PEEVAL_LM_EVAL_HOOK=0``
turns it off.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_FLAG = "_peeval_lm_eval_hook_installed"
#: ``PEEVAL_LM_EVAL_HOOK=0`` leaves lm-eval and transformers exactly as installed (no peeval models or tasks)
OFF_SWITCH = "PEEVAL_LM_EVAL_HOOK"
PLUGIN = "peeval.harness.plugin"
#: pyproject's entry-point group for lm-eval models (read by lm-eval releases that scan entry points)
ENTRY_POINT_GROUP = "lm_eval.models"


def _peeval_dir() -> str | None:
    spec = importlib.util.find_spec("peeval")  # locates the package without importing it
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def encoding_names() -> list[str]:
    """Keys of ``peeval.registry.ENCODINGS``, read when lm-eval's registry loads. The registry is stdlib only and
    is run from its file on its own, so neither peeval's package (its version check) nor torch is imported before
    a model is used; none when peeval is not installed."""
    root = _peeval_dir()
    if root is None:
        return []
    spec = importlib.util.spec_from_file_location("_peeval_registry", os.path.join(root, "registry", "__init__.py"))
    registry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(registry)
    return registry.encoding_names()


def model_targets() -> dict[str, str]:
    names = {
        "peeval": f"{PLUGIN}:PeevalLM",
        "peeval-llama": f"{PLUGIN}:PeevalLlamaLM",
        "peeval-hf": "peeval.harness.any_lm:PeevalHFLM",
    }
    names.update({f"peeval-{pe}": f"{PLUGIN}:PeevalLM_{pe}" for pe in encoding_names()})
    return names


def tasks_dir() -> str | None:
    root = _peeval_dir()
    return os.path.join(root, "tasks") if root else None


def _on_registry(module) -> None:
    from importlib.metadata import EntryPoint  # already imported by lm_eval.api.registry

    import lm_eval.models  # noqa: F401  (registers the built-ins into the still-empty registry)

    for name, target in model_targets().items():
        if name not in module.model_registry:
            # the very placeholder pyproject's entry point is (EntryPoints compare by name, value and group): an
            # lm-eval that registers the installed ``lm_eval.models`` entry points as well, before or after this,
            # finds the alias taken by an equal target, where a "module:attr" string would be a conflict
            module.model_registry.register(name, target=EntryPoint(name, target, ENTRY_POINT_GROUP))


def _on_task_manager(module) -> None:
    cls = module.TaskManager
    if getattr(cls, "_peeval_wrapped", False):
        return
    init = cls.__init__
    ours = tasks_dir()

    def __init__(self, verbosity=None, include_path=None, include_defaults=True, metadata=None, *args, **kwargs):
        paths = list(include_path) if isinstance(include_path, (list, tuple)) else [include_path]
        paths = [p for p in paths if p is not None]
        if ours and all(os.path.abspath(str(p)) != ours for p in paths):
            paths.insert(0, ours)  # ours first: later paths override earlier ones
        init(self, verbosity, paths, include_defaults, metadata, *args, **kwargs)

    cls.__init__ = __init__
    cls._peeval_wrapped = True


def _on_task(module) -> None:
    from peeval.data import patch_lm_eval_tasks  # stdlib-only module

    patch_lm_eval_tasks(module)


def _on_evaluator(module) -> None:
    original = module.simple_evaluate
    if getattr(original, "_peeval_checked", False):
        return
    import functools
    import inspect

    signature = inspect.signature(original)

    @functools.wraps(original)
    def simple_evaluate(*args, **kwargs):
        a = signature.bind_partial(*args, **kwargs).arguments
        model, model_args = a.get("model"), a.get("model_args")
        if isinstance(model, str) and model.startswith("peeval"):
            from lm_eval.utils import simple_parse_args_string

            from peeval.tasks.ppl.ppl import check_fits

            margs = simple_parse_args_string(model_args) if isinstance(model_args, str) else dict(model_args or {})
            tm = a.get("task_manager")
            metadata = getattr(tm, "metadata", None) if tm is not None else {**margs, **(a.get("metadata") or {})}
            check_fits(model, margs, list(a.get("tasks") or ()), dict(metadata or {}))
        return original(*args, **kwargs)

    simple_evaluate._peeval_checked = True
    module.simple_evaluate = simple_evaluate


def raised_in_peeval(e: BaseException) -> bool:
    """``e`` was raised by a line of peeval's own code (its innermost frame is in the package)."""
    root = _peeval_dir()
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = os.path.abspath(tb.tb_frame.f_code.co_filename) if tb is not None else ""
    return bool(root) and where.startswith(os.path.abspath(root) + os.sep)


def _on_main(module) -> None:
    original = module.cli_evaluate
    if getattr(original, "_peeval_one_line", False):
        return

    def cli_evaluate(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except ValueError as e:
            if not raised_in_peeval(e):
                raise  # lm-eval's, transformers' own: as they print them
            print(f"lm_eval: error: {' '.join(str(e).split()) or type(e).__name__}", file=sys.stderr)
            raise SystemExit(2) from None

    cli_evaluate._peeval_one_line = True
    cli_evaluate.__doc__ = original.__doc__
    module.cli_evaluate = cli_evaluate


class _PendingPeeval(dict):
    """transformers' ``CONFIG_MAPPING._extra_content`` with ``peeval`` known before it is loaded.

    Registering ``PeevalConfig`` for real imports ``LlamaConfig``, which pulls ~1000 modules
    (torch._dynamo, ...) into every process that merely imports an Auto class. So ``peeval``
    answers ``in`` at once and ``peeval.models`` is imported and registered (through
    ``AutoConfig.register``) only when it is looked up.
    """

    def __init__(self, entries: dict) -> None:
        super().__init__(entries)
        self.pending = "peeval" not in entries

    def _load(self, strict: bool = True) -> None:
        if not self.pending:
            return
        self.pending = False
        try:
            from peeval.models import register_config

            register_config()  # AutoConfig.register stores PeevalConfig in this dict
        except Exception as e:
            if strict:  # looking up "peeval" itself: the error is the answer
                raise
            print(f"peeval: could not register with transformers ({e!r})", file=sys.stderr)

    def __setitem__(self, key, value) -> None:
        if key == "peeval":
            self.pending = False
        super().__setitem__(key, value)

    def __contains__(self, key) -> bool:
        return (key == "peeval" and self.pending) or super().__contains__(key)

    def __getitem__(self, key):
        if key == "peeval":
            self._load()
        return super().__getitem__(key)

    def get(self, key, default=None):
        return self[key] if key in self else default  # noqa: SIM401  (dict.get would skip the load)

    def keys(self):
        return [*super().keys(), *(["peeval"] if self.pending else [])]

    def values(self):  # a scan over every registered config (never break it for others)
        self._load(strict=False)
        return super().values()

    def items(self):
        self._load(strict=False)
        return super().items()


def _on_auto_config(module) -> None:
    mapping = module.CONFIG_MAPPING
    extra = getattr(mapping, "_extra_content", None)
    if isinstance(extra, _PendingPeeval):
        return
    if type(extra) is not dict:
        raise TypeError(f"transformers' CONFIG_MAPPING._extra_content is {type(extra).__name__}, expected a dict")
    mapping._extra_content = _PendingPeeval(extra)


WATCH = {
    "transformers.models.auto.configuration_auto": _on_auto_config,
    "lm_eval.api.registry": _on_registry,
    "lm_eval.tasks.manager": _on_task_manager,
    "lm_eval.api.task": _on_task,
    "lm_eval.evaluator": _on_evaluator,
    "lm_eval.__main__": _on_main,
}


class _PostImportFinder:
    """A meta-path finder that runs a callback right after a watched module executes."""

    def find_spec(self, name, path=None, target=None):
        if name not in WATCH:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_hook(module):
            exec_module(module)
            try:
                WATCH[name](module)
            except Exception as e:  # never break lm_eval / transformers themselves
                lib = name.partition(".")[0]
                print(f"peeval: could not register with {lib} ({e!r})", file=sys.stderr)

        spec.loader.exec_module = exec_then_hook
        return spec


def install() -> None:
    if getattr(sys, _FLAG, False):
        return
    if os.environ.get(OFF_SWITCH, "").strip().lower() in ("0", "false", "no", "off"):
        return  # the user turned peeval's registration off: lm-eval and transformers as installed
    setattr(sys, _FLAG, True)
    for name, callback in WATCH.items():  # lm_eval already imported (e.g. a late import)
        if name in sys.modules:
            callback(sys.modules[name])
    sys.meta_path.insert(0, _PostImportFinder())


install()
