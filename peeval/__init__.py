"""peeval: measure positional encodings of language models."""

__version__ = "0.1.0"

from .install.versions import warn_if_untested  # noqa: E402  (one log line if transformers / lm-eval are untested)

warn_if_untested()


def __getattr__(name):  # lazy: `import peeval` stays cheap (no torch) until a model is needed
    if name in ("PeevalConfig", "PeevalForCausalLM", "PeevalModel"):
        from . import models

        return getattr(models, name)
    raise AttributeError(name)
