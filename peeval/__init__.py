"""peeval: measure positional encodings of language models.

One package per part of the product (docs/design.md opens with the layer table: which may import which):
``models`` (+ ``kernels``), ``training``, ``tasks``, ``harness`` (the lm-eval integration), ``evaluation``,
``data``, ``bench``, ``export``, ``install`` (lock, tested versions, extras), ``records``, ``registry``, ``_io``;
the shared modules ``settings``, ``_log``, ``perplexity`` (the perplexity task's token plans: the task, the model
wrappers and the site read them), ``cli`` (+ ``cli_reference``, ``__main__``). This file stays cheap:
no torch until a model class is read.
"""

__version__ = "0.1.0"

from .install.versions import warn_if_untested  # noqa: E402  (one log line if transformers / lm-eval are untested)

warn_if_untested()


def __getattr__(name):  # lazy: `import peeval` stays cheap (no torch) until a model is needed
    if name in ("PeevalConfig", "PeevalForCausalLM", "PeevalModel"):
        from . import models

        return getattr(models, name)
    raise AttributeError(name)
