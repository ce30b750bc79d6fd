"""A model is evaluated only with all of its weights.

transformers initialises a tensor the checkpoint lacks at random (and one of the wrong shape with
``ignore_mismatched_sizes``) and only logs a report; an evaluation of that model is a silent wrong
number. Every peeval load of a checkpoint (peeval's own, a Llama folder, a GGUF file, an adapter)
goes through :func:`load_complete` / :func:`check_weights`: missing, unexpected or wrongly shaped
tensors are one ``IncompleteCheckpointError`` (a ``ValueError``: the CLI's one line and exit 2)
naming the tensors and the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .._log import muted

SHOWN = 4  # tensor names shown in the message


class IncompleteCheckpointError(ValueError):
    """The checkpoint does not hold exactly the tensors the model needs."""


def _names(keys: list[str]) -> str:
    more = f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else ""
    return ", ".join(keys[:SHOWN]) + more


def check_weights(
    where: str,
    missing: Iterable[str] = (),
    unexpected: Iterable[str] = (),
    mismatched: Iterable[tuple] = (),
    errors: Iterable[str] = (),
) -> None:
    """Raise one ``IncompleteCheckpointError`` naming what does not fit (nothing when all fits)."""
    missing, unexpected = sorted(missing), sorted(unexpected)
    parts = []
    if missing:
        parts.append(f"missing {_names(missing)}")
    if unexpected:
        parts.append(f"unexpected {_names(unexpected)}")
    for key, ckpt_shape, model_shape in sorted(mismatched)[:SHOWN]:
        parts.append(f"{key} has shape {tuple(ckpt_shape)}, the model needs {tuple(model_shape)}")
    parts += [str(e) for e in errors][:SHOWN]
    if parts:
        raise IncompleteCheckpointError(
            f"{where}: the checkpoint does not hold the model's weights: {'; '.join(parts)} "
            "(refused: a tensor left at its random initialisation gives a wrong number)"
        )


def load_complete(auto_cls, pretrained, *args, allow_unexpected: Callable[[str], bool] | None = None, **kwargs):
    """``auto_cls.from_pretrained(pretrained, ...)`` that refuses an incomplete checkpoint.

    ``allow_unexpected(name)``: tensors the caller leaves out on purpose (layers cut by ``max_layers``).
    """
    kwargs = {**kwargs, "output_loading_info": True, "ignore_mismatched_sizes": True}
    with muted("transformers.modeling_utils"):  # its load report: what we raise, in one line
        model, info = auto_cls.from_pretrained(pretrained, *args, **kwargs)
    where = str(pretrained) + (f" ({kwargs['gguf_file']})" if kwargs.get("gguf_file") else "")
    unexpected = [k for k in info.get("unexpected_keys") or () if not (allow_unexpected and allow_unexpected(k))]
    errors = list(info.get("error_msgs") or ())
    errors += [f"{k}: {v}" for k, v in (info.get("conversion_errors") or {}).items()]
    check_weights(where, info.get("missing_keys") or (), unexpected, info.get("mismatched_keys") or (), errors)
    return model


class CompleteLoader:
    """Stands in for an Auto class whose ``from_pretrained`` a library calls (lm-eval's HFLM)."""

    def __init__(self, auto_cls):
        self.auto_cls = auto_cls

    def from_pretrained(self, pretrained, *args, **kwargs):
        return load_complete(self.auto_cls, pretrained, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.auto_cls, name)
