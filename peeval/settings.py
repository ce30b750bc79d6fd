"""Typed settings: how every settings file and option of peeval is declared, composed and checked.

Declared with pydantic models (strict: ``"128"`` is not an integer, ``true`` not a number; unknown
keys refused). A :class:`pydantic.ValidationError` never reaches a user: :func:`check` turns its
first error into ONE line naming the dotted key, the value and what is allowed
(``params.yaml shift.length='128': an integer >= 2``; an unknown key gets a "did you mean").
What is allowed is read from the field itself: an :class:`Allowed` text in its metadata (the
constructors below write one), else the field's type; a validator's own ``ValueError`` text
wins, and :class:`At` lets a cross-key validator name the key it is about.

Settings files compose (:func:`compose`): a table of named mappings where an entry may say
``extends: <name>`` and list only what it changes; mappings merge key by key (deeply), any other
value (a list, a number, null) replaces the inherited one. The training profiles
(peeval/training/profiles.yaml) and the pipeline's parameter files (params/*.yaml) compose so.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

#: the key of a composed entry that names the entry it extends
EXTENDS = "extends"


class SettingsError(ValueError):
    """One line: the key, its value and what is allowed."""


class Strict(BaseModel):
    """The base of every settings model: strict types, unknown keys refused, read-only."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Lenient(Strict):
    """A model of the keys one reader declares in a shared mapping (lm-eval task metadata): the
    other keys are ignored here (``peeval.tasks.metadata_keys`` refuses the unknown ones)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


@dataclass(frozen=True)
class Allowed:
    """Field metadata: what the field allows, in words (the end of its error line)."""

    text: str


class At(ValueError):
    """Raised by a validator about a key below the one it validates (``key`` dotted, relative)."""

    def __init__(self, key: str, text: str, value: Any = ...):
        super().__init__(text)
        self.key, self.text, self.value = key, text, value


# -- field types ---------------------------------------------------------------------------------------
def _integral(v: Any) -> Any:
    """``1e3`` (a float from JSON / YAML) is the integer 1000; anything else as given."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _nullable(tp: Any, text: str, null: bool) -> Any:
    return Annotated[tp | None, Allowed(text + " or null")] if null else Annotated[tp, Allowed(text)]


def integer(lo: int, *, null: bool = False) -> Any:
    """An integer >= ``lo`` (an integral float counts), or null where ``null``."""
    return _nullable(Annotated[int, BeforeValidator(_integral), Field(ge=lo)], f"an integer >= {lo}", null)


def number(lo: float, hi: float | None = None, *, lo_open: bool = False, null: bool = False) -> Any:
    """A finite number >= ``lo`` (> ``lo`` where ``lo_open``), <= ``hi`` when given."""
    bound = Field(gt=lo, allow_inf_nan=False) if lo_open else Field(ge=lo, allow_inf_nan=False)
    text = f"a number {'>' if lo_open else '>='} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
    tp = Annotated[float, bound, Field(le=hi)] if hi is not None else Annotated[float, bound]
    return _nullable(tp, text, null)


def choice(*values: str) -> Any:
    return Annotated[typing.Literal[values], Allowed(" or ".join(map(repr, values)))]


def null_is_empty(v: Any) -> Any:
    return {} if v is None else v


def one_or_list(v: Any) -> Any:
    """A single number is a list of one; a tuple a list."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [v]
    return list(v) if isinstance(v, tuple) else v


def nonempty(text: str) -> AfterValidator:
    """A validator: the value (a list or mapping) is not empty, else ``text``."""

    def check_nonempty(v: Any) -> Any:
        if not v:
            raise ValueError(text)
        return v

    return AfterValidator(check_nonempty)


#: a mapping of setting names to values (``--set`` overrides, ``pe_options``); null is ``{}``
SetMap = Annotated[dict[str, Any], BeforeValidator(null_is_empty), Allowed("a mapping of names to values")]


# -- one line per error ------------------------------------------------------------------------------
def did_you_mean(key: Any, known) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known``, else ``''``."""
    close = difflib.get_close_matches(str(key), sorted(map(str, known)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unwrap(tp: Any) -> tuple[Any, list]:
    """(the type inside Annotated / Optional, the metadata met on the way)."""
    meta: list = []
    while True:
        if typing.get_origin(tp) is Annotated:
            meta += list(tp.__metadata__)
            tp = tp.__origin__
        elif typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp, meta
            tp = args[0]
        else:
            return tp, meta


def _walk(model: type[BaseModel], loc: list) -> tuple[Any, list]:
    """The type at ``loc`` below ``model`` and the metadata of its field (for the error text)."""
    tp, meta = model, []
    for part in loc:
        tp, _ = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return None, []
            tp, meta = _unwrap(field.annotation)
            meta = meta + list(field.metadata)  # the outermost Allowed last: it wins
        elif typing.get_origin(tp) in (dict, Mapping):
            tp, meta = _unwrap(typing.get_args(tp)[1])
        elif typing.get_origin(tp) is list:
            tp, meta = _unwrap(typing.get_args(tp)[0])
        else:
            return None, []
    return tp, meta


def _describe(tp: Any, meta: list) -> str:
    for m in reversed(meta):
        if isinstance(m, Allowed):
            return m.text
    if typing.get_origin(tp) is typing.Literal:
        return " or ".join(map(repr, typing.get_args(tp)))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"a mapping with {', '.join(tp.model_fields)}"
    return {str: "a string", bool: "true or false", int: "an integer", float: "a number", dict: "a mapping",
            list: "a list"}.get(typing.get_origin(tp) or tp, "another value")  # fmt: skip


def _at(raw: Any, loc: list) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return ...
    return raw


@dataclass(frozen=True)
class Problem:
    """The first thing wrong with some settings: ``kind`` is ``value``, ``unknown`` or ``missing``."""

    kind: str
    key: str  # dotted ('' for the top level)
    value: Any = ...  # the value at key (``...``: not shown)
    text: str = ""  # what is allowed (``unknown``: the allowed keys, with a did-you-mean)
    item: Any = ...  # the bad item, when the value is a list / tuple and one item is wrong
    item_text: str = ""  # what an item allows

    def line(self, prefix: str, show: Callable[[Any], str] = repr) -> str:
        """``<prefix> <key>=<value>: <text>`` (and the forms for an unknown or missing key), one line."""
        if self.kind == "missing":
            out = f"{prefix}: missing key {self.key}"
        elif self.kind == "unknown":
            out = f"{prefix} {self.key or '<top level>'}: {self.text}"
        else:
            value = "" if self.value is ... else f"={show(self.value)}"
            out = f"{prefix} {self.key}{value}: {self.text}" if self.key else f"{prefix}: {self.text}"
        return " ".join(out.splitlines())


def problem(err: ValidationError, model: type[BaseModel], raw: Any) -> Problem:
    """The first error of ``err`` (from validating ``raw`` as ``model``) in words."""
    errors = err.errors()  # an unknown key first: a misspelt key is also a missing one
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = list(e["loc"])
    exc = (e.get("ctx") or {}).get("error")
    text = str(exc) if e["type"] == "value_error" and exc is not None else None
    value: Any = ...
    item, item_text = ..., ""
    kind = e["type"]
    if "[key]" in loc:  # a bad mapping key: name it, there is no value to show
        loc = loc[: loc.index("[key]")]
    elif isinstance(exc, At):
        loc += exc.key.split(".") if exc.key else []
        value = exc.value
    else:
        first_index = next((i for i, p in enumerate(loc) if isinstance(p, int)), None)
        if first_index is not None:  # an item of a list / tuple (or one missing): name it, show it whole
            item, item_text = _at(raw, loc[: first_index + 1]), _describe(*_walk(model, loc[: first_index + 1]))
            loc = loc[:first_index]
            text, kind = None, "value"
        value = _at(raw, loc)
    dotted = ".".join(map(str, loc))
    if kind == "missing":
        return Problem("missing", dotted)
    if kind == "extra_forbidden":
        parent, key = loc[:-1], loc[-1]
        tp, _ = _walk(model, parent)
        known = list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []
        allowed = f"; allowed {', '.join(known)}" if known else ""
        return Problem(
            "unknown", ".".join(map(str, parent)), text=f"unknown key {key!r}{did_you_mean(key, known)}{allowed}"
        )
    if text is None:
        text = _describe(*_walk(model, loc))
    return Problem("value", dotted, value, text, item, item_text)


class Invalid(SettingsError):
    """:func:`validated`'s error: ``problem`` for a reader that words its own line."""

    def __init__(self, problem: Problem):
        super().__init__(problem.line("settings"))
        self.problem = problem


def validated(model: type[BaseModel], raw: Any):
    """``raw`` as ``model``, or :class:`Invalid` with the first :class:`Problem`."""
    if not isinstance(raw, Mapping):
        raise Invalid(Problem("value", "", text=f"a mapping with {', '.join(model.model_fields)} (got "
                              f"{type(raw).__name__})"))  # fmt: skip
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise Invalid(problem(err, model, raw)) from None


def check(model: type[BaseModel], raw: Any, prefix: str, show: Callable[[Any], str] = repr):
    """``raw`` as ``model``, or :class:`SettingsError`: one line starting with ``prefix``."""
    try:
        return validated(model, raw)
    except Invalid as e:
        raise SettingsError(e.problem.line(prefix, show)) from None


# -- composition ---------------------------------------------------------------------------------------
def merge(base: Mapping, over: Mapping) -> dict:
    """``base`` with ``over`` on top: mappings merge key by key, other values replace (a new key
    lands after the inherited ones; an inherited key keeps its place)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def compose(table: Mapping[str, Any], name: str, what: str = "entry", _seen: tuple = ()) -> dict:
    """Entry ``name`` of ``table`` with its ``extends`` chain resolved (``extends`` removed)."""
    if name not in table:
        raise SettingsError(f"unknown {what} {name!r}: allowed {', '.join(map(str, table))}{did_you_mean(name, table)}")
    entry = table[name]
    if not isinstance(entry, Mapping):
        raise SettingsError(f"{what} {name}: a mapping (got {type(entry).__name__})")
    parent = entry.get(EXTENDS)
    own = {k: v for k, v in entry.items() if k != EXTENDS}
    if parent is None:
        return dict(own)
    if name in _seen or parent == name:
        raise SettingsError(f"{what} {name}: {EXTENDS}: {parent} extends itself ({' -> '.join((*_seen, name))})")
    return merge(compose(table, parent, what, (*_seen, name)), own)
