"""peeval: measure positional encodings of language models."""

__version__ = "0.1.0"


def __getattr__(name):  # lazy: `import peeval` stays cheap (no torch) until a model is needed
    if name in ("PeevalConfig", "PeevalForCausalLM", "PeevalModel"):
        from . import models

        return getattr(models, name)
    raise AttributeError(name)
