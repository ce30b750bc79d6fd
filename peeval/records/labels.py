"""The names the leaderboard gives rows, runs, sources and the data a task read.

Changes when what a reader sees a run called changes, never with a metric's grammar or a statistic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .families import family_of
from .names import ppl_corpus


def encoding_label(pe: str | None, pe_options: dict | None) -> str:
    """The leaderboard name of an encoding: ``pe`` or ``pe(k=v,...)`` (keys sorted)."""
    opts = pe_options or {}
    if not opts:
        return str(pe)
    return f"{pe}(" + ",".join(f"{k}={opts[k]}" for k in sorted(opts)) + ")"


#: the training settings that make a language model's shape (``train_summary.json`` ``settings``): one encoding
#: trained at two shapes is two leaderboard rows, never two seeds of one (issue 43's ladder of sizes)
SHAPE_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
              "vocab_size")  # fmt: skip
#: what a shape that follows the default's proportions does not repeat in its name: (key, word)
_SHAPE_EXTRAS = (("num_attention_heads", "heads"), ("num_key_value_heads", "kv heads"),
                 ("intermediate_size", "ffn"), ("vocab_size", "vocab"))  # fmt: skip
#: the size part of a row name (``rope [4x32]``, ``rope [4x32, 8 heads] @cpu-claims``)
_SIZED = re.compile(r" \[(\d+)x(\d+)(?:, [^\]]*)?\](?= @|$)")


def model_shape(settings: Mapping | None) -> dict[str, int] | None:
    """The shape keys of a profile's or a summary's settings; None when one is missing or not an integer."""
    if not isinstance(settings, Mapping):
        return None
    shape = {k: settings.get(k) for k in SHAPE_KEYS}
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in shape.values())
    return shape if ok else None


def shape_suffix(shape: Mapping | None, default: Mapping | None) -> str:
    """``""`` at the profile's default shape (or either unknown: every name made before the ladder stays), else
    `` [<layers>x<width>]``, plus each of heads, kv heads, SwiGLU width and vocabulary that is not the default's
    scaled to this width (rounded up), so that two shapes never share a name."""
    if shape is None or default is None or dict(shape) == dict(default):
        return ""
    width, width0 = shape["hidden_size"], default["hidden_size"]
    extra = []
    for key, word in _SHAPE_EXTRAS:
        scaled = default[key] if key == "vocab_size" else -(-default[key] * width // width0)  # ceil, exact
        if shape[key] != scaled:
            extra.append(f"{word} {shape[key]}" if word in ("ffn", "vocab") else f"{shape[key]} {word}")
    return f" [{shape['num_hidden_layers']}x{width}{''.join(', ' + e for e in extra)}]"


def size_tag(settings: Mapping | None, default: Mapping | None) -> str | None:
    """A trained model's size when its shape is not ``default``'s (``4x32``, ``4x32, 8 heads``), else None: the
    store's ``runs.size``, and the part in brackets of its row name."""
    suffix = shape_suffix(model_shape(settings), model_shape(default))
    return suffix[2:-1] if suffix else None


def sized_label(label: str, settings: Mapping | None, default: Mapping | None) -> str:
    """A trained model's row name: its encoding label, with its size when its shape is not ``default``'s."""
    size = size_tag(settings, default)
    return label + (f" [{size}]" if size else "")


def task_setting(task_params: Mapping | None, defaults: Mapping | None) -> str | None:
    """The generator parameters a diagnostic model trained with that are not its task's defaults, as ``k=v,...``
    (keys sorted; flip-flop ``n_instr=256``), else None: the store's ``runs.task_setting``. No defaults known:
    every parameter is named."""
    defaults = defaults or {}
    extra = {k: v for k, v in (task_params or {}).items() if k not in defaults or defaults[k] != v}
    return ",".join(f"{k}={extra[k]}" for k in sorted(extra)) if extra else None


def task_setting_label(label: str, task_params: Mapping | None, defaults: Mapping | None) -> str:
    """A diagnostic model's row name: its encoding label, with `` {k=v,...}`` for each generator parameter it
    trained with that is not its task's default (flip-flop ``{n_instr=256}``, counting ``{n_vars=3}``): two
    settings of one task are two rows, never seeds of one."""
    setting = task_setting(task_params, defaults)
    return label + (" {" + setting + "}" if setting else "")


def size_of(name: str) -> tuple[int, int] | None:
    """(layers, width) of a row name that carries a size (``rope [4x32]``); None for a default-shape row. For what
    only has a name (a chart's series); a run's size is its ``runs.size``."""
    m = _SIZED.search(str(name))
    return (int(m[1]), int(m[2])) if m else None


def adapt_label(method: str) -> str:
    """An adaptation method's encoding label: ``adapt:<method>``."""
    return f"adapt:{method}"


#: packaged base models of `peeval adapt` (file name -> row label); the GGUF is
#: ``peeval.models.llama_adapters.SMOLLM2_GGUF`` (SmolLM2-135M-Instruct, Q4_1, dequantised to float32)
#: the label names the file that is measured (the Instruct model, 4-bit Q4_1), not the base SmolLM2-135M it
#: was made from: rows of it answer what adaptation costs this packaged model
SHIPPED_MODELS = {"SmolLM2-135M-Instruct.Q4_1.gguf": "SmolLM2-135M-Instruct (GGUF Q4_1)"}


def base_model_label(gguf_file: str | None) -> str | None:
    """The row label of a packaged base model, or None for any other checkpoint."""
    return SHIPPED_MODELS.get(str(gguf_file)) if gguf_file else None


def shipped_name(label: str) -> str:
    """The base model evaluated without adaptation: ``<label> as shipped``."""
    return f"{label} as shipped"


def trained_base_label(pe: str, pe_options: dict | None, window: int | None) -> str:
    """A peeval-pretrained model as the base of an adaptation (params.yaml ``extend``): ``rope (256 tokens)``."""
    label = encoding_label(pe, pe_options or {})
    return f"{label} ({window} tokens)" if window else label


def adapted_name(label: str, method: str) -> str:
    """The base model after one adaptation method: ``<label> + <method>``."""
    return f"{label} + {method}"


def shipped_first(name: str) -> tuple[str, int, str]:
    """Sort key of row names: a packaged model as shipped right above its adaptations (its reference row;
    by name alone ``as shipped`` would sort after ``+ lora``), every other name by itself."""
    for label in SHIPPED_MODELS.values():
        if name == shipped_name(label):
            return label, 0, name
        if name.startswith(adapted_name(label, "")):
            return label, 1, name
    return name, 0, name


def external_name(model: str, checkpoint_name: str | None) -> str:
    """A run of a model peeval did not train: ``<model>:<checkpoint folder>`` or ``<model>``."""
    return str(model) if checkpoint_name is None else f"{model}:{checkpoint_name}"


def published_name(name: str, profile: str) -> str:
    """A published run's name: ``<name> @<profile>``."""
    return f"{name} @{profile}"


#: ``runs.source`` of a run made by this repository's own pipeline (schema.sql's default)
LOCAL_SOURCE = "local"
_PUBLISHED = "published/"


def published_source(profile: str) -> str:
    """``runs.source`` of a published run: ``published/<profile>``."""
    return _PUBLISHED + profile


def published_profile(source: str) -> str | None:
    """The profile of a ``published/<profile>`` source, None for a local run."""
    return source[len(_PUBLISHED) :] if source.startswith(_PUBLISHED) else None


# ----------------------------------------------------------------------------- the data a task read
#: where a task's documents came from (results.json ``peeval.data``, the store's ``task_data.source``):
#: the offline mirror, the hub, a folder given by path, or generated by the task's own code
DATA_SOURCES = ("mirror", "hub", "local", "generated")
#: corpora by where they were read. A mirror corpus that stands in for a hub dataset (peeval.data.LOCAL) is
#: named as what it is, never as the dataset it replaces: their numbers are not the paper's numbers.
DATA_NAMES = {
    ("hub", "deepmind/pg19"): "PG-19 test",
    ("hub", "emozilla/pg19-test"): "PG-19 test",  # parquet copies of PG-19's test split (peeval.data.HUB_COPIES)
    ("hub", "emozilla/pg19"): "PG-19 test",
    ("mirror", "local/gutenberg-eval"): "Gutenberg books (PG-19 substitute)",
    ("hub", "hoskinson-center/proof-pile"): "proof-pile test",
    ("hub", "dwzhu/PoSE-Datasets"): "proof-pile test",  # PoSE's jsonl copy of proof-pile's test split
    ("mirror", "local/stacks-project"): "Stacks project (proof-pile substitute)",
}
#: a task whose run did not record what it read (written before peeval recorded it, or by plain lm_eval)
NOT_RECORDED = "data not recorded"


def data_label(source: str | None, location: str | None) -> str:
    """The name of what one read gave: ``DATA_NAMES``, else the hub id, the mirror's copy of one
    (``<id> (mirror copy)``: the mirror may hold a subset or a reconstruction), a folder or a generator."""
    if (source, location) in DATA_NAMES:
        return DATA_NAMES[(source, location)]
    if source == "hub":
        return str(location)
    if source == "mirror":
        return f"{str(location).removeprefix('hf/')} (mirror copy)"
    if source == "local":
        return f"{location} (local folder)"
    if source == "generated":
        return f"generated ({location})"
    return NOT_RECORDED


def task_label(task: str, reads: Iterable[tuple[str, str]]) -> str:
    """What the site calls a task's numbers, given its reads ((source, location) pairs): a perplexity task
    by its corpus as read; passkey and the diagnostics (generated by peeval's own code) by their name; another
    task by its name, with what it read after a `` · `` where that is not the hub or a generator. A mirror
    run and a hub run of one task never share a label."""
    if (fam := family_of(task)) is not None and fam.generated:  # generated by peeval's own code, never read
        return task
    reads = sorted(set(reads))
    names = " + ".join(dict.fromkeys(data_label(s, loc) for s, loc in reads))
    if (corpus := ppl_corpus(task)) is not None:
        return names or f"{corpus} ({NOT_RECORDED})"
    if not reads:
        return f"{task} · {NOT_RECORDED}"
    shown = [data_label(s, loc) for s, loc in reads if s not in ("hub", "generated")]
    return f"{task} · {' + '.join(dict.fromkeys(shown))}" if shown else task


__all__ = [
    "encoding_label",
    "SHAPE_KEYS",
    "model_shape",
    "shape_suffix",
    "size_tag",
    "sized_label",
    "task_setting",
    "task_setting_label",
    "size_of",
    "adapt_label",
    "SHIPPED_MODELS",
    "base_model_label",
    "shipped_name",
    "trained_base_label",
    "adapted_name",
    "shipped_first",
    "external_name",
    "published_name",
    "LOCAL_SOURCE",
    "published_source",
    "published_profile",
    "DATA_SOURCES",
    "DATA_NAMES",
    "NOT_RECORDED",
    "data_label",
    "task_label",
]
