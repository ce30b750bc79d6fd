"""Ships the lm-eval / transformers hook: ``peeval_lm_eval.pth`` + ``_peeval_lm_eval_hook.py`` at the top of
site-packages, for ``pip install .`` and ``pip install -e .`` alike (see peeval/evaluation/lm_eval_hook.py)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
PTH = "peeval_lm_eval.pth"
PTH_LINE = "import _peeval_lm_eval_hook\n"
HOOK = "_peeval_lm_eval_hook.py"


def hook_source() -> str:
    with open(os.path.join(HERE, "peeval", "evaluation", "lm_eval_hook.py"), encoding="utf-8") as f:
        return f.read()


class BuildPyWithHook(build_py):
    def run(self):
        super().run()
        self.mkpath(self.build_lib)
        for name, text in ((PTH, PTH_LINE), (HOOK, hook_source())):
            with open(os.path.join(self.build_lib, name), "w", encoding="utf-8") as f:
                f.write(text)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, n) for n in (PTH, HOOK)]


class EditableWheelWithHook(editable_wheel):
    def _select_strategy(self, name, tag, build_lib):
        strategy = super()._select_strategy(name, tag, build_lib)

        class WithHook:
            def __call__(self, wheel, files, mapping):
                strategy(wheel, files, mapping)
                wheel.writestr(PTH, PTH_LINE)
                wheel.writestr(HOOK, hook_source())

            def __enter__(self):
                strategy.__enter__()
                return self

            def __exit__(self, *exc):
                return strategy.__exit__(*exc)

        return WithHook()


setup(cmdclass={"build_py": BuildPyWithHook, "editable_wheel": EditableWheelWithHook})
