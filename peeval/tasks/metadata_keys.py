"""Every task metadata key is known: a misspelt key (``lenghts``) is one ``ValueError`` with a
"did you mean" hint, raised when the task is built, never a default scored in silence.

lm-eval hands every task of a run one merged dict: the YAML's ``metadata``, ``--metadata`` (one
dict for all tasks: ppl and passkey share it in one run), and, under plain ``lm_eval``, every
``--model_args`` entry. So a task accepts the keys any peeval task reads, lm-eval's
own, and the model-argument names of the models these tasks run on; everything else is refused.
The keys each task reads are its family's (``peeval.tasks.family``).
``peeval eval``, which knows the tasks it runs, is stricter: each ``--metadata`` key must be read
by one of them (:func:`check_requested`).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from peeval.settings import did_you_mean
from peeval.tasks.family import families, family_of

#: what lm-eval itself writes into a task's metadata (lm_eval/tasks/_factory.py: the YAML's path,
#: a non-dict metadata, a python task's placeholder)
LM_EVAL_KEYS = frozenset({"version", "config_source", "_metadata", "config"})


def keys_for(task: str) -> set[str] | None:
    """The keys task ``task`` reads (None: not a task of a family that declares its keys): its family's
    ``metadata_keys`` and ``more_keys`` (the diagnostics' generator parameters; ``peeval.tasks.family``)."""
    fam = family_of(task)
    if fam is None or fam.metadata_keys is None:
        return None
    return set(fam.metadata_keys) | (fam.more_keys() if fam.more_keys else set())


@functools.cache
def _any_task_keys() -> frozenset[str]:
    return frozenset(k for f in families() if f.metadata_keys is not None for k in keys_for(f.prefix or f.tasks[0]))


@functools.cache
def model_arg_names() -> frozenset[str]:
    """The ``--model_args`` names lm-eval may have merged into the metadata (read only when a key
    is unknown: it imports the model wrappers)."""
    from peeval.harness.plugin import PeevalLlamaLM, PeevalLM

    return frozenset(PeevalLM.allowed_args()) | frozenset(PeevalLlamaLM.allowed_args())


def _refuse(where: str, key: str, known: set[str], reads: str) -> None:
    raise ValueError(f"{where}: unknown key {key!r}{did_you_mean(key, known)}; {reads}")


def check_keys(task: str, metadata: dict) -> None:
    """Refuse a metadata key that no peeval task reads and that is neither lm-eval's nor a model
    argument: one line naming it and the closest key task ``task`` reads."""
    unknown = sorted(set(metadata) - _any_task_keys() - LM_EVAL_KEYS)
    if unknown:
        unknown = [k for k in unknown if k not in model_arg_names()]
    if unknown:
        own = keys_for(task) or set()
        reads = f"{task} reads {', '.join(sorted(own))}" if own else f"{task} reads no metadata key"
        _refuse(f"{task} metadata", unknown[0], own | _any_task_keys(), reads)


def check_requested(tasks: list[str], metadata: dict) -> None:
    """``peeval eval --metadata``: every key is read by one of the requested peeval tasks (when they
    are all peeval tasks: a group or another lm-eval task may read keys of its own)."""
    per_task = [keys_for(t) for t in tasks]
    if not metadata or not tasks or any(k is None for k in per_task):
        return
    read = set().union(*per_task)
    for key in sorted(metadata):
        if key not in read and key not in LM_EVAL_KEYS:
            _refuse("--metadata", key, read, f"the tasks {', '.join(tasks)} read {', '.join(sorted(read)) or 'none'}")


#: the only revision ``hub_copy`` pins: a commit (a branch moves)
_COMMIT = re.compile(r"[0-9a-f]{40}")


def _hub_copies() -> dict:
    """corpus -> {repository: peeval.data.HubCopy}: every corpus read from a hub copy, the first its default."""
    from peeval.data import HUB_COPIES

    return HUB_COPIES


def chosen_copy(task: str, corpus: str, metadata: dict):
    """The hub copy ``hub_copy`` names for ``corpus`` (a ``peeval.data.HubCopy``), or None when it names none.

    ``hub_copy`` is ``<org>/<name>`` or ``<org>/<name>@<commit>`` (40 hex: another pin), or a list of them,
    one per corpus: one ``--metadata`` serves every task of a run, so an entry naming another corpus's copy
    is left to that corpus. An entry no corpus reads, a commit that is not 40 hex, or two entries for one
    corpus: one ``ValueError`` naming the key and what is allowed, raised when the task is built."""
    value = metadata.get("hub_copy")
    if value is None:
        return None
    tables = _hub_copies()
    known = "; ".join(f"{c}: {', '.join(t)}" for c, t in tables.items())
    allowed = f"'<org>/<name>' or '<org>/<name>@<40-hex commit>', or a list of them (one per corpus), of {known}"
    mine = []
    for entry in value if isinstance(value, list) and value else [value]:
        repo, at, commit = entry.partition("@") if isinstance(entry, str) else (None, "", "")
        owner = next((c for c, copies in tables.items() if repo in copies), None)
        if owner is None or (at and not _COMMIT.fullmatch(commit)):
            raise ValueError(f"{task} metadata hub_copy={entry!r}: must be {allowed}")
        if owner == corpus:
            copy = tables[corpus][repo]
            mine.append(dataclasses.replace(copy, revision=commit) if at else copy)
    if len(mine) > 1:
        raise ValueError(f"{task} metadata hub_copy={value!r}: names {len(mine)} copies of {corpus}: give one")
    return mine[0] if mine else None
