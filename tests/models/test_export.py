"""``peeval export``: checkpoints plain transformers loads in a process where peeval cannot be imported."""

import ast
import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import randomize_, tiny_model

from peeval.cli import main
from peeval.export import checkpoint as ex

#: run in a child with peeval unimportable (sys.modules entry None), its .pth hook off, no PYTHONPATH
LOADER = """
import sys
sys.modules["peeval"] = None
import torch
from transformers import AutoModelForCausalLM
path, ids, dest, remote = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
kw = {"trust_remote_code": True} if remote else {}
model = AutoModelForCausalLM.from_pretrained(path, **kw).eval()
with torch.no_grad():
    logits = model(torch.load(ids)).logits
torch.save({"logits": logits, "cls": type(model).__module__ + "." + type(model).__name__,
            "peeval": [m for m in sys.modules if m.startswith("peeval") and sys.modules[m] is not None]}, dest)
"""

SUMMARY = {"pe": "tape", "task": None, "profile": "smoke", "seed": 7, "steps": 3, "final_val_ppl": 123.4}


def _checkpoint(path, pe, **kw):
    model = tiny_model(pe, **kw)
    randomize_(model)
    model.save_pretrained(path)
    (path / "train_summary.json").write_text(json.dumps({**SUMMARY, "pe": pe}))
    return model


def _load_elsewhere(tmp_path, out, ids, remote: bool):
    torch.save(ids, tmp_path / "ids.pt")
    (tmp_path / "loader.py").write_text(LOADER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PEEVAL_LM_EVAL_HOOK="0", HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    args = [str(tmp_path / "loader.py"), str(out), str(tmp_path / "ids.pt"), str(tmp_path / "got.pt"), str(int(remote))]
    run = subprocess.run([sys.executable, "-I", *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return torch.load(tmp_path / "got.pt")


@pytest.mark.parametrize(("pe", "flags"), [("tape", []), ("rope", ["--as-peeval"])])
def test_remote_code_export_loads_without_peeval(tmp_path, pe, flags):
    model = _checkpoint(tmp_path / "ckpt", pe)
    out = tmp_path / "exported"
    assert main(["export", str(tmp_path / "ckpt"), str(out), *flags]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["auto_map"]["AutoModelForCausalLM"] == "modeling_peeval.PeevalForCausalLM"
    ids = torch.randint(0, 61, (2, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(ids).logits
    got = _load_elsewhere(tmp_path, out, ids, remote=True)
    assert got["cls"].startswith("transformers_modules.") and got["cls"].endswith(".PeevalForCausalLM")
    assert got["peeval"] == []
    torch.testing.assert_close(got["logits"], want, rtol=0, atol=1e-6)
    card = (out / "README.md").read_text()
    assert "trust_remote_code=True" in card and '"seed": 7' in card
    assert json.loads((out / "train_summary.json").read_text())["pe"] == pe


def test_rope_exports_as_plain_llama_with_the_same_logits(tmp_path):
    model = _checkpoint(tmp_path / "ckpt", "rope")
    out = tmp_path / "exported"
    assert main(["export", str(tmp_path / "ckpt"), str(out)]) == 0  # the default for rope without options
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "llama" and "pe" not in cfg and "auto_map" not in cfg
    assert not list(out.glob("*.py"))
    ids = torch.randint(0, 61, (2, 20), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = model(ids).logits
    got = _load_elsewhere(tmp_path, out, ids, remote=False)
    assert got["cls"] == "transformers.models.llama.modeling_llama.LlamaForCausalLM"
    torch.testing.assert_close(got["logits"], want, rtol=0, atol=1e-5)
    assert "LlamaForCausalLM" in (out / "README.md").read_text()


def test_exported_code_imports_only_torch_transformers_and_siblings(tmp_path):
    from transformers.dynamic_module_utils import get_imports, get_relative_import_files

    ex.write_code(tmp_path)
    third_party = set()
    for f in tmp_path.glob("*.py"):
        third_party |= {m for m in get_imports(f) if m not in sys.stdlib_module_names}
        for node in ast.walk(ast.parse(f.read_text())):  # no absolute import of peeval, even in a try
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            assert not [n for n in names if n and n.split(".")[0] == "peeval"], f.name
    assert third_party <= {"torch", "transformers", "huggingface_hub"}
    # transformers copies exactly what the auto_map modules reach: every file, none missing
    reached = {os.path.basename(p) for p in get_relative_import_files(tmp_path / "modeling_peeval.py")}
    reached |= {"modeling_peeval.py"}
    assert reached == {f.name for f in tmp_path.glob("*.py")}


def test_export_refusals(tmp_path, capsys):
    _checkpoint(tmp_path / "ckpt", "tape")
    ckpt, out = str(tmp_path / "ckpt"), tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    capsys.readouterr()
    assert main(["export", ckpt, str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not empty" in err and "--overwrite" in err
    assert main(["export", ckpt, str(tmp_path / "o2"), "--as-llama"]) == 2
    assert "--as-llama" in capsys.readouterr().err and not (tmp_path / "o2").exists()
    assert main(["export", ckpt, str(tmp_path / "o3"), "--push-to-hub", "no-owner"]) == 2
    assert "owner/name" in capsys.readouterr().err and not (tmp_path / "o3").exists()
    assert main(["export", str(tmp_path), str(tmp_path / "o4")]) == 2  # not a checkpoint
    assert "config.json" in capsys.readouterr().err
    for holder in (ckpt, str(tmp_path)):  # --overwrite never replaces the checkpoint or a folder holding it
        assert main(["export", ckpt, holder, "--overwrite"]) == 2
        assert "holds the checkpoint" in capsys.readouterr().err and (tmp_path / "ckpt" / "config.json").is_file()
    # --overwrite replaces an export (its model card says so), never a folder of the user's (issue 56)
    assert main(["export", ckpt, str(out), "--overwrite"]) == 2
    assert "not an export of peeval" in capsys.readouterr().err and (out / "keep.txt").read_text() == "x"
    (out / "keep.txt").unlink()
    assert main(["export", ckpt, str(out)]) == 0  # empty: written
    assert main(["export", ckpt, str(out), "--overwrite"]) == 0  # its own kind: replaced
    assert (out / "modeling_peeval.py").is_file()
    assert not [p for p in tmp_path.iterdir() if "-export-" in p.name]  # no temporary folder left


def test_push_to_hub_uses_huggingface_hubs_upload(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    class FakeApi:
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw["repo_id"], kw))
            return type("Info", (), {"commit_url": f"https://hub.example/{kw['repo_id']}/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    _checkpoint(tmp_path / "ckpt", "rope")
    out = tmp_path / "out"
    result = ex.export(tmp_path / "ckpt", out, push_to_hub="me/tiny-rope", private=True)
    assert [c[:2] for c in calls] == [("create_repo", "me/tiny-rope"), ("upload_folder", "me/tiny-rope")]
    assert calls[0][2]["private"] is True and calls[1][2]["folder_path"] == str(out)
    assert result["url"].endswith("/commit/1") and result["format"] == "llama"


MANY_LOADER = """
import sys
sys.modules["peeval"] = None
import torch
from transformers import AutoModelForCausalLM
ids = torch.load(sys.argv[1])
out = {}
for path in sys.argv[3:]:
    model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True).eval()
    with torch.no_grad():
        out[path] = model(ids).logits
torch.save(out, sys.argv[2])
"""


def test_every_encoding_exports_and_loads_without_peeval(tmp_path):
    """One child loads every encoding's export (randpe's registry look-ups, cope's attention helpers, the
    kernels' lazy imports all resolve among the copied files)."""
    from peeval.models.encodings import ENCODINGS

    ids = torch.randint(0, 61, (1, 24), generator=torch.Generator().manual_seed(5))
    want, outs = {}, []
    for pe in sorted(ENCODINGS):
        model = _checkpoint(tmp_path / f"ckpt-{pe}", pe)
        out = tmp_path / f"out-{pe}"
        ex.export(tmp_path / f"ckpt-{pe}", out, as_peeval=True)
        with torch.no_grad():
            want[str(out)] = model(ids).logits
        outs.append(str(out))
    torch.save(ids, tmp_path / "ids.pt")
    (tmp_path / "many.py").write_text(MANY_LOADER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PEEVAL_LM_EVAL_HOOK="0", HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    args = [str(tmp_path / "many.py"), str(tmp_path / "ids.pt"), str(tmp_path / "got.pt"), *outs]
    run = subprocess.run([sys.executable, "-I", *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    got = torch.load(tmp_path / "got.pt")
    for path in outs:
        torch.testing.assert_close(got[path], want[path], rtol=0, atol=1e-5, msg=lambda m, p=path: f"{p}: {m}")


def test_the_tokenizer_travels_with_the_export(tmp_path):
    from helpers.checkpoints import save_tiny_checkpoint
    from transformers import AutoTokenizer

    text = "the quick brown fox jumps over the lazy dog"
    save_tiny_checkpoint(tmp_path / "ckpt", [text], pe="tape", vocab_size=280, max_positions=64)
    ex.export(tmp_path / "ckpt", tmp_path / "out")
    before = AutoTokenizer.from_pretrained(tmp_path / "ckpt")(text)["input_ids"]
    assert AutoTokenizer.from_pretrained(tmp_path / "out")(text)["input_ids"] == before
    card = (tmp_path / "out" / "README.md").read_text()
    assert "AutoTokenizer.from_pretrained(path, trust_remote_code=True)" in card
    # the card's code runs as written, where peeval is not installed and no one answers a prompt (issue 58: the
    # load line lacked trust_remote_code and stopped at "[y/N] run custom code?")
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    script = (
        "import sys\nsys.modules['peeval'] = None\n"
        + code
        + "\nprint(type(model).__name__, len(tokenizer('a b')['input_ids']))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PEEVAL_LM_EVAL_HOOK="0", HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    run = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert run.returncode == 0 and run.stdout.startswith("PeevalForCausalLM"), run.stderr[-2000:]


HUB_LOADER = """
import os, sys
sys.path.insert(0, sys.argv[1])  # tests/, for the loopback hub (stdlib only)
from pathlib import Path
from helpers.loopback_hub import LoopbackHub
sys.modules["peeval"] = None
out = Path(sys.argv[2])
with LoopbackHub({("model", "someone/exported"): {p.name: p for p in out.iterdir()}}) as hub:
    os.environ["HF_ENDPOINT"] = hub.endpoint  # read by huggingface_hub at import, below
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained("someone/exported", trust_remote_code=True).eval()
    with torch.no_grad():
        torch.save(model(torch.load(sys.argv[3])).logits, sys.argv[4])
"""


def test_remote_code_export_loads_from_a_hub_without_peeval(tmp_path):
    """From a hub repository transformers fetches every code file and checks each one's imports are installed
    (not only the auto_map module's, as for a local folder): flash-attn / triton must not be required."""
    model = _checkpoint(tmp_path / "ckpt", "tape")
    ex.export(tmp_path / "ckpt", tmp_path / "out")
    ids = torch.randint(0, 61, (1, 16), generator=torch.Generator().manual_seed(6))
    torch.save(ids, tmp_path / "ids.pt")
    (tmp_path / "hub_loader.py").write_text(HUB_LOADER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HF_"))}
    env.update(PEEVAL_LM_EVAL_HOOK="0", HF_HOME=str(tmp_path / "hf-home"))
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = [str(tmp_path / "hub_loader.py"), tests_dir, str(tmp_path / "out"), str(tmp_path / "ids.pt")]
    run = subprocess.run([sys.executable, "-I", *args, str(tmp_path / "got.pt")], cwd=tmp_path, env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    with torch.no_grad():
        torch.testing.assert_close(torch.load(tmp_path / "got.pt"), model(ids).logits, rtol=0, atol=1e-6)
