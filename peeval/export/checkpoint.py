"""``peeval export CKPT OUT``: a checkpoint folder that plain transformers loads, without peeval.

Two formats:

- ``llama`` (``--as-llama``; the default for ``pe="rope"`` with no ``pe_options``): a plain
  ``LlamaForCausalLM`` folder. peeval's RoPE is transformers' own (``rotate_half``, the same
  frequencies and scalings) and the weight names are Llama's, so the logits are identical.
- ``remote-code`` (every other encoding, or ``--as-peeval``): the peeval checkpoint plus
  peeval's modelling code copied in as flat sibling files, named by an ``auto_map`` in
  config.json: ``AutoModelForCausalLM.from_pretrained(OUT, trust_remote_code=True)``.
  The copied code imports only torch, transformers (and its huggingface_hub) and the standard
  library; optional kernels (flash-attn, triton) stay optional. The relative imports are
  rewritten to the flat names (transformers copies the files an ``auto_map`` module names
  through ``from .x import``, recursively); an import this module cannot rewrite is an error
  here, never a folder that fails on someone else's machine.

Both carry the tokenizer, the run's ``train_summary.json`` (when the checkpoint has one) and a
model card (README.md) with that provenance. ``--push-to-hub REPO`` uploads the folder with
huggingface_hub's own ``create_repo`` / ``upload_folder``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from .._io import check_safetensors, dumps_json, replace_dir
from .._io.outputs import OutputRefused, check_output_dir, is_own_folder, overlap, write_manifest

PACKAGE = Path(__file__).resolve().parent.parent  # peeval/
FORMATS = ("llama", "remote-code")
#: the config fields peeval adds to LlamaConfig (dropped in a Llama export)
PEEVAL_FIELDS = ("pe", "pe_options", "pe_options_effective", "attn_backend", "random_offset", "auto_map")
AUTO_MAP = {
    "AutoConfig": "configuration_peeval.PeevalConfig",
    "AutoModel": "modeling_peeval.PeevalModel",
    "AutoModelForCausalLM": "modeling_peeval.PeevalForCausalLM",
}
SUMMARY = "train_summary.json"
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RELATIVE = re.compile(
    r"^(?P<indent>\s*)from\s+(?P<dots>\.+)(?P<mod>[\w.]*)\s+import\s+(?P<names>.+?)\s*(?P<comment>#.*)?$"
)
_ENCODING_IMPORT = 'importlib.import_module(f"{__name__}.{module}")'


class ExportError(ValueError):
    """The code or checkpoint cannot be exported as asked (the CLI's one line, exit 2)."""


# ----------------------------------------------------------------------------- the code
def code_modules() -> dict[str, Path]:
    """peeval module -> its file, for every module the exported model code needs."""
    mods = {
        "peeval._log": PACKAGE / "_log.py",
        "peeval.registry": PACKAGE / "registry" / "__init__.py",
        "peeval.models.configuration_peeval": PACKAGE / "models" / "configuration_peeval.py",
        "peeval.models.modeling_peeval": PACKAGE / "models" / "modeling_peeval.py",
        "peeval.models.attention": PACKAGE / "models" / "attention.py",
        "peeval.models.attention_ops": PACKAGE / "models" / "attention_ops.py",
        "peeval.models.linear_loss": PACKAGE / "models" / "linear_loss.py",
        "peeval.models.encodings": PACKAGE / "models" / "encodings" / "__init__.py",
    }
    for f in sorted((PACKAGE / "models" / "encodings").glob("*.py")):
        if f.stem != "__init__":
            mods[f"peeval.models.encodings.{f.stem}"] = f
    for f in sorted((PACKAGE / "kernels").glob("*.py")):
        if f.stem != "__init__":
            mods[f"peeval.kernels.{f.stem}"] = f
    return mods


def flat_name(module: str) -> str:
    """The file name (without .py) a peeval module gets in the exported folder."""
    if module in ("peeval.models.configuration_peeval", "peeval.models.modeling_peeval"):
        return module.rpartition(".")[2]  # the names auto_map points at
    rest = module.removeprefix("peeval.").removeprefix("models.")
    return "peeval_" + rest.replace(".", "_").replace("__", "_").strip("_")


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _rewrite_line(line: str, module: str, path: Path, known: dict[str, Path]) -> list[str]:
    m = _RELATIVE.match(line)
    if m is None:
        if re.match(r"^\s*(from|import)\s+peeval\b", line):
            raise ExportError(f"{path}: an absolute import of peeval cannot be exported: {line.strip()}")
        return [line]
    if m["names"].startswith("(") and not m["names"].endswith(")"):
        raise ExportError(f"{path}: a multi-line relative import cannot be exported: {line.strip()}")
    parts = _package_of(module, path).split(".")
    up = len(m["dots"]) - 1
    base = ".".join(parts[: len(parts) - up] if up else parts)
    target = f"{base}.{m['mod']}" if m["mod"] else base
    indent, comment = m["indent"], f"  {m['comment']}" if m["comment"] else ""
    if target in known:
        return [f"{indent}from .{flat_name(target)} import {m['names']}{comment}"]
    out = []
    for item in m["names"].strip("()").split(","):
        name, _, alias = (s.strip() for s in item.strip().partition(" as "))
        sub = f"{target}.{name}"
        if sub not in known:
            raise ExportError(f"{path}: {sub} is not part of the exported code: {line.strip()}")
        flat = flat_name(sub)
        # `from . import x` names no file for transformers' copy (it reads `from .x import`): name it too
        out.append(f"{indent}from .{flat} import __name__ as _{flat}_module  # noqa: F401")
        out.append(f"{indent}from . import {flat} as {alias or name}{comment}")
    return out


def exported_source(module: str, path: Path, known: dict[str, Path]) -> str:
    """The text of ``module`` with its relative imports pointing at the flat sibling files."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        lines += _rewrite_line(line, module, path, known)
    text = "\n".join(lines) + "\n"
    if module == "peeval.models.encodings":  # the registry imports its modules lazily, by name
        if text.count(_ENCODING_IMPORT) != 1:
            raise ExportError(f"{path}: the registry's lazy import changed; update peeval/export/checkpoint.py")
        prefix = flat_name("peeval.models.encodings.x")[:-1]
        text = text.replace(_ENCODING_IMPORT, f'importlib.import_module(f"{{__package__}}.{prefix}{{module}}")')
        subs = sorted(m for m in known if m.startswith("peeval.models.encodings."))
        text += "\n\ndef _exported_files():  # never called: names every encoding's file for transformers' copy\n"
        text += "".join(f"    from .{flat_name(s)} import __name__ as _{flat_name(s)}  # noqa: F401\n" for s in subs)
    return f"# copied from {module} by `peeval export` (relative imports rewritten to flat sibling files)\n" + text


def write_code(out: Path) -> list[str]:
    """Write every module of the model code into ``out``; returns the file names."""
    known = code_modules()
    names = []
    for module, path in known.items():
        name = f"{flat_name(module)}.py"
        (out / name).write_text(exported_source(module, path, known), encoding="utf-8")
        names.append(name)
    return names


# ----------------------------------------------------------------------------- the checkpoint
def _read_config(ckpt: Path) -> dict:
    f = ckpt / "config.json"
    if not f.is_file():
        raise ExportError(f"{ckpt}: no config.json (not a checkpoint folder)")
    cfg = json.loads(f.read_text(encoding="utf-8"))
    if cfg.get("model_type") != "peeval":
        raise ExportError(f"{ckpt}: model_type {cfg.get('model_type')!r}, peeval export reads peeval checkpoints")
    return cfg


def choose_format(cfg: dict, as_llama: bool, as_peeval: bool) -> str:
    if as_llama and as_peeval:
        raise ExportError("--as-llama and --as-peeval exclude each other")
    llama_ok = cfg.get("pe") == "rope" and not cfg.get("pe_options")
    if as_llama and not llama_ok:
        why = "pe_options are set" if cfg.get("pe") == "rope" else f"pe is {cfg.get('pe')!r}"
        raise ExportError(f"--as-llama: only a pe=rope checkpoint without pe_options is a Llama ({why})")
    return "llama" if (as_llama or (llama_ok and not as_peeval)) else "remote-code"


def llama_config_dict(cfg: dict) -> dict:
    out = {k: v for k, v in cfg.items() if k not in PEEVAL_FIELDS}
    out["model_type"] = "llama"
    out["architectures"] = ["LlamaForCausalLM"]
    return out


def _save_model(ckpt: Path, out: Path, fmt: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from ..models import PeevalForCausalLM
    from ..models.loading import check_weights, load_complete

    model = load_complete(PeevalForCausalLM, str(ckpt), dtype=torch.float32)
    if fmt == "llama":
        cfg = LlamaConfig.from_dict(llama_config_dict(model.config.to_dict()))
        llama = LlamaForCausalLM(cfg)
        state = {k: v for k, v in model.state_dict().items() if not k.startswith("model.pe.")}
        info = llama.load_state_dict(state, strict=False)
        check_weights(f"{ckpt} as Llama", info.missing_keys, info.unexpected_keys)
        llama.save_pretrained(out)
        return
    model.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    cfg["auto_map"] = dict(AUTO_MAP)
    (out / "config.json").write_text(dumps_json(cfg, indent=2) + "\n", encoding="utf-8")
    write_code(out)


def _save_tokenizer(ckpt: Path, out: Path) -> bool:
    if not any((ckpt / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        return False
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(ckpt)).save_pretrained(out)
    return True


#: the model card's words naming its writer (what --overwrite may replace is proven by the manifest, not by them)
EXPORT_MARK = "exported by `peeval export`"


def is_export(folder: Path) -> bool:
    """A folder ``peeval export`` wrote and nobody changed since: its manifest (``peeval._io.outputs.MANIFEST``)
    lists every file in it with its sha256 (a README that merely says so is not enough: the folder may hold a
    ``.git/`` or the user's files)."""
    return is_own_folder(folder, "peeval export")


def model_card(ckpt: Path, cfg: dict, fmt: str, summary: dict | None, tokenizer: bool, where: str = ".") -> str:
    """The folder's README.md; its code block runs as written (``where``: the folder, as ``path``), and a remote-code
    export passes ``trust_remote_code=True`` to both loads (without it transformers stops at a "[y/N]" prompt)."""
    pe = cfg.get("pe")
    trust = "" if fmt == "llama" else ", trust_remote_code=True"
    load = f"AutoModelForCausalLM.from_pretrained(path{trust})"
    front = ["---", "library_name: transformers", "tags:", "- peeval", f"- pe-{pe}", "---", ""]
    body = [
        f"# peeval checkpoint: pe={pe}",
        "",
        f"A {cfg.get('num_hidden_layers')}-layer decoder (hidden {cfg.get('hidden_size')}, "
        f"{cfg.get('num_attention_heads')} heads) with the positional encoding `{pe}`"
        + (f" (options {json.dumps(cfg.get('pe_options'))})" if cfg.get("pe_options") else "")
        + f", {EXPORT_MARK} from `{ckpt.name}`.",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM" + (", AutoTokenizer" if tokenizer else ""),
        "",
        f"path = {json.dumps(where)}  # this folder (on the hub: its repo id)",
        f"model = {load}",
        *([f"tokenizer = AutoTokenizer.from_pretrained(path{trust})"] if tokenizer else []),
        "```",
        "",
    ]
    if fmt == "llama":
        body += ["Format: a plain `LlamaForCausalLM` (peeval's RoPE is transformers' Llama RoPE; same logits).", ""]
    else:
        body += [
            "Format: peeval's `PeevalForCausalLM` as remote code (the `*.py` files here, named by `auto_map` in "
            "config.json); they need only torch and transformers.",
            "",
        ]
    body += ["## Provenance", ""]
    if summary is None:
        body += ["The checkpoint has no `train_summary.json`: its training run is not recorded.", ""]
    else:
        keys = ("pe", "task", "profile", "seed", "params", "steps", "tokens", "final_val_ppl", "train_time_s")
        body += [f"- {k}: {summary[k]}" for k in keys if k in summary]
        body += ["", f"The run's full record is `{SUMMARY}`:", "", "```json", dumps_json(summary, indent=1), "```", ""]
    return "\n".join(front + body)


def export(
    ckpt: str | Path,
    out: str | Path,
    *,
    as_llama: bool = False,
    as_peeval: bool = False,
    overwrite: bool = False,
    push_to_hub: str | None = None,
    private: bool = False,
) -> dict:
    """Export ``ckpt`` into ``out`` (built beside it, swapped in when complete); returns what was written."""
    ckpt, out = Path(ckpt), Path(out)
    if push_to_hub is not None and not REPO_ID.match(push_to_hub):
        raise ExportError(f"--push-to-hub {push_to_hub!r}: a hub repository id is owner/name")
    cfg = _read_config(ckpt)  # not a checkpoint: said first
    try:  # a truncated or corrupt weights file: one line naming it (safetensors' own error names no file)
        check_safetensors(ckpt)
    except ValueError as e:
        raise ExportError(str(e)) from None
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder")
    if overlap(out, [ckpt], folder=True) is not None:  # CKPT/inner: a second copy of the weights inside them
        raise ExportError(f"{out} is or holds the checkpoint {ckpt}, or lies inside it: export to another folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ExportError(f"{out} exists and is not empty (--overwrite replaces it)")
    try:  # --overwrite replaces an export (its model card), never a checkpoint or a user's folder
        check_output_dir(
            out, "OUT", is_export, "an export of peeval (no manifest of `peeval export` listing every file, unchanged)"
        )
    except OutputRefused as e:
        raise ExportError(str(e)) from None
    fmt = choose_format(cfg, as_llama, as_peeval)
    summary = None
    if (ckpt / SUMMARY).is_file():
        summary = json.loads((ckpt / SUMMARY).read_text(encoding="utf-8"))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-export-", dir=out.parent))
    try:
        _save_model(ckpt, tmp, fmt)
        tokenizer = _save_tokenizer(ckpt, tmp)
        if summary is not None:
            shutil.copyfile(ckpt / SUMMARY, tmp / SUMMARY)
        (tmp / "README.md").write_text(model_card(ckpt, cfg, fmt, summary, tokenizer, str(out)), encoding="utf-8")
        write_manifest(tmp, "peeval export")
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"format": fmt, "out": str(out), "files": sorted(p.name for p in out.iterdir())}
    if push_to_hub is not None:
        result["url"] = push(out, push_to_hub, private=private)
    return result


def push(folder: Path, repo_id: str, private: bool = False) -> str:
    """Upload ``folder`` with huggingface_hub's own client (its token, endpoint and errors)."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    info = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                             commit_message="peeval export")  # fmt: skip
    return str(getattr(info, "commit_url", None) or f"https://huggingface.co/{repo_id}")
