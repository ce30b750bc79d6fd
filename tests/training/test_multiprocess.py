"""Multi-process training and evaluation on the CPU (gloo), against one process.

2 processes (torchrun, OMP_NUM_THREADS=1) at the same global batch must give the same loss
curve, learning rates and final weights as one process (float round-off), resume after a
kill, write the checkpoint once, and ``peeval eval`` must give the same metrics through
lm-eval's data-parallel path. The global-token-mean loss is checked by hand in float64.
"""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.data_mirror import sh
from safetensors.torch import load_file

from peeval.training.data import Batches
from peeval.training.loop import n_targets
from peeval.training.pretrain import count_params, flops_per_token, run_train
from peeval.training.state import STATE_FILE

REPO = Path(__file__).resolve().parents[2]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
#: the diagnostic and its settings: addition has answers of different lengths (so per-process
#: means would weight tokens differently), batch 7 splits 4 + 3, two micro-batches per step
DIAG = dict(task="addition", profile="smoke", steps=6, batch_size=7, grad_accum=2, eval_every=2, save_every=3)
SETS = [f"{k}={v}" for k, v in DIAG.items() if k not in ("task", "profile")]


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        env.pop(k, None)
    return env


def _launch(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TORCHRUN, *args], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def _train_cli(out: Path) -> list[str]:
    cmd = ["-m", "peeval.cli", "train", "--pe", "rope", "--task", DIAG["task"], "--profile", "smoke"]
    return [*cmd, "--out", str(out), *(a for s in SETS for a in ("--set", s))]


def _curve(d: Path) -> list[dict]:
    with open(d / "train_curve.csv") as f:
        return list(csv.DictReader(f))


def _one_process(out: Path) -> dict:
    return run_train(out, "rope", **DIAG)


def _assert_same_run(one: Path, two: Path) -> None:
    """Same learning rates and tokens, same losses and weights up to float round-off."""
    a, b = _curve(one), _curve(two)
    assert [(r["step"], r["tokens"], r["lr"]) for r in a] == [(r["step"], r["tokens"], r["lr"]) for r in b]
    for ra, rb in zip(a, b, strict=True):
        assert float(ra["train_loss"]) == pytest.approx(float(rb["train_loss"]), abs=2e-5), (ra, rb)
        assert (ra["val_loss"] == "") == (rb["val_loss"] == "")
        if ra["val_loss"]:
            assert float(ra["val_loss"]) == pytest.approx(float(rb["val_loss"]), abs=2e-5), (ra, rb)
    wa, wb = load_file(str(one / "model.safetensors")), load_file(str(two / "model.safetensors"))
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=2e-5, msg=k)


# -- fast: the loss normalisation by hand, the accelerate --cpu trap --------------------------------
def test_global_token_mean_by_hand():
    """Shard sums scaled by world / n_target, then averaged over processes (what DDP does), give the
    gradient of the token mean over the whole global batch; per-shard means do not."""
    torch.manual_seed(0)
    w = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(7, 4, 5, dtype=torch.float64)
    labels = torch.randint(0, 3, (7, 4))
    labels[0, 1:] = -100  # targets are labels[:, 1:]: rows 0, 3, 5 keep 0, 1 and 2 of their 3
    labels[3, 2:] = -100
    labels[5, 3:] = -100
    batches = Batches({"input_ids": labels.clamp(min=0), "labels": labels}, {"input_ids": labels[:1]})

    def loss_sum(rows):
        logits, tgt = (x[rows] @ w)[:, :-1], labels[rows][:, 1:]
        m = tgt != -100
        return torch.nn.functional.cross_entropy(logits[m], tgt[m], reduction="sum"), int(m.sum())

    idx = torch.arange(7)
    n_target = n_targets(batches, idx)
    total, n = loss_sum(idx)
    assert n_target == n == 3 * 7 - 3 - 2 - 1
    (want,) = torch.autograd.grad(total / n, w)
    world = 2
    shards = [torch.autograd.grad(loss_sum(idx[r::world])[0] * (world / n_target), w)[0] for r in range(world)]
    torch.testing.assert_close(sum(shards) / world, want, rtol=1e-12, atol=1e-14)
    means = [torch.autograd.grad(loss_sum(idx[r::world])[0] / loss_sum(idx[r::world])[1], w)[0] for r in range(world)]
    assert not torch.allclose(sum(means) / world, want)  # the pre-fix weighting differs here


@pytest.mark.parametrize("use_cpu", ["True", "False"])  # --cpu, or no --multi_gpu on a machine without GPUs
def test_accelerate_single_process_launch_is_refused(use_cpu, tmp_path, monkeypatch, capsys):
    """``accelerate launch [--cpu] --num_processes 2`` (no mpirun, no --multi_gpu) starts one process
    with ACCELERATE_USE_CPU and MASTER_ADDR but no WORLD_SIZE: one clear error, exit 2."""
    from peeval.cli import main

    for k in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ACCELERATE_USE_CPU", use_cpu)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    out = tmp_path / "x"
    argv = ["train", "--pe", "rope", "--task", "flip_flop", "--profile", "smoke", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torchrun --nproc_per_node" in err[0] and "--multi_gpu" in err[0], err
    assert not out.exists()  # nothing written


# -- torchrun: 2 CPU processes against 1 ------------------------------------------------------------
@pytest.mark.slow
def test_two_processes_train_like_one(tmp_path):
    """The issue's case: the prepared scheduler stepped twice per step under 2 processes, and
    per-process mean losses weighted the answer tokens differently (addition's answers vary)."""
    _one_process(tmp_path / "one")
    r = _launch(_train_cli(tmp_path / "two"))
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_same_run(tmp_path / "one", tmp_path / "two")
    s = json.loads((tmp_path / "two" / "train_summary.json").read_text())
    assert s["world_size"] == 2 and s["torch_threads"] == 1
    # the checkpoint is written once, by process 0; no temporary files are left behind
    assert r.stderr.count("peeval: checkpoint written to") == 1
    assert "by process 0 of 2" in r.stderr
    assert (
        sorted(
            p.name
            for p in (tmp_path / "two").iterdir()
            if (p.name.startswith(".") and p.name != ".peeval-manifest.json") or ".tmp" in p.name
        )
        == []
    )
    assert not (tmp_path / "two" / STATE_FILE).exists()


KILLED = """
import os, signal, sys
from peeval.training.pretrain import run_train
res = run_train(sys.argv[1], "rope", stop_after=4, **{DIAG!r})
assert res == {{"interrupted_at": 4}}, res
os.kill(os.getpid(), signal.SIGKILL)  # killed after step 4: the last saved state is step 3's
"""


@pytest.mark.slow
def test_two_processes_resume_after_a_kill(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED.format(DIAG=DIAG))
    out = tmp_path / "two"
    r = _launch([str(script), str(out)])
    assert r.returncode != 0  # torchrun reports the killed workers
    st = torch.load(out / STATE_FILE, weights_only=False)
    assert st["step"] == 3 and not (out / "model.safetensors").exists()
    r = _launch(_train_cli(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.count("peeval: checkpoint written to") == 1
    _one_process(tmp_path / "one")
    _assert_same_run(tmp_path / "one", out)


@pytest.mark.slow
def test_two_processes_eval_like_one(tmp_path):
    """``peeval eval`` under torchrun: lm-eval shards the requests over the 2 CPU processes
    (its data-parallel path), rank 0 gathers and writes once; the metrics equal one process's."""
    from peeval.cli import main

    ck = tmp_path / "ck"
    run_train(ck, "rope", task="flip_flop", profile="smoke", steps=4)
    task = "peeval_diag_flip_flop_test"
    args = ["eval", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", task]
    args += ["--metadata", json.dumps({"n": 24}), "--batch_size", "4", "--run_name", "r"]
    assert main([*args, "--output_path", str(tmp_path / "e1")]) == 0
    r = _launch(["-m", "peeval.cli", *args, "--output_path", str(tmp_path / "e2")])
    assert r.returncode == 0, r.stderr[-3000:]
    one, two = (json.loads((tmp_path / e / "r" / "results.json").read_text()) for e in ("e1", "e2"))
    assert two["peeval"]["world_size"] == 2 and one["peeval"]["world_size"] == 1
    m1, m2 = one["results"][task], two["results"][task]
    metrics = [k for k in m1 if k.endswith(",none") and "stderr" not in k]
    assert metrics and {k: m2[k] for k in metrics} == pytest.approx({k: m1[k] for k in metrics}, abs=1e-9)
    assert two["n-samples"] == one["n-samples"]

    def samples(e):
        rows = [json.loads(line) for line in (tmp_path / e / "r" / f"samples_{task}.jsonl").open()]
        return {r["doc_id"]: [float(x[0][0]) for x in r["resps"]] for r in rows}

    s1, s2 = samples("e1"), samples("e2")
    assert s1.keys() == s2.keys() and len(s1) == 24
    for d in s1:
        assert s2[d] == pytest.approx(s1[d], abs=1e-5), d


# -- params.yaml `launcher` -------------------------------------------------------------------------
def _launcher_module():
    import common

    return common


@pytest.mark.parametrize(
    "launcher, tail",
    [
        ("", None),
        ("torchrun --nproc_per_node 2", ["torch.distributed.run", "--nproc_per_node", "2"]),
        ("accelerate launch --multi_gpu --num_processes 2",
         ["accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]),
    ],
)  # fmt: skip
def test_launcher_argv(launcher, tail):
    argv = _launcher_module().launcher_argv(launcher)
    assert argv == ([] if tail is None else [sys.executable, "-m", *tail])


@pytest.mark.parametrize(
    "launcher, why",
    [
        ("mpirun -n 2", "allowed '' (one process)"),
        ("torchrun --nproc_per_node 2 train.py", "options only"),
        ("torchrun --no_such_option 2", "unrecognized arguments"),
        ("accelerate launch --cpu --num_processes 2", "starts ONE process here"),
        ("torchrun 'unclosed", "No closing quotation"),
        (8, "a string"),
    ],
)
def test_launcher_refused(launcher, why, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no accelerate default config of the machine's user
    import accelerate.commands.config as cfg

    monkeypatch.setattr(cfg, "default_config_file", str(tmp_path / "none.yaml"))
    with pytest.raises(ValueError, match="params.yaml launcher=") as e:
        _launcher_module().launcher_argv(launcher)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_bad_launcher_stops_the_stage_in_one_line(tmp_path):
    import yaml  # a valid parameter file but for the launcher (the stage checks the rest first)

    p = {**yaml.safe_load((REPO / "params" / "smoke.yaml").read_text()), "launcher": "mpirun -n 2"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    r = subprocess.run(
        [sys.executable, str(REPO / "pipelines" / "launch.py"), str(REPO / "pipelines" / "train.py"), "rope"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "launcher='mpirun -n 2'" in r.stderr and "torchrun" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


@pytest.mark.slow
def test_stage_under_a_launcher(tmp_path):
    """The diagnostics stage under `launcher: torchrun --standalone --nproc_per_node 2` trains
    what the stage without a launcher trains (same curve and weights), recorded as world size 2."""
    import yaml

    p = yaml.safe_load((REPO / "params" / "smoke.yaml").read_text())
    p["diagnostics"]["train"]["set"] = {"steps": 4, "batch_size": 6}
    p["diagnostics"]["runs"] = {"rope-flip_flop": {"pe": "rope", "task": "flip_flop"}}
    runs = {}
    for name, launcher in (("one", ""), ("two", "torchrun --standalone --nproc_per_node 2")):
        work = tmp_path / name
        work.mkdir()
        (work / "params.yaml").write_text(yaml.safe_dump({**p, "launcher": launcher}))
        script = [str(REPO / "pipelines" / "launch.py"), str(REPO / "pipelines" / "diagnostics.py")]
        r = subprocess.run([sys.executable, *script, "rope-flip_flop", "0"], cwd=work, env=_env(),
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = work / "checkpoints" / "diag" / "rope-flip_flop-s0"
    assert json.loads((runs["two"] / "train_summary.json").read_text())["world_size"] == 2
    assert json.loads((runs["one"] / "train_summary.json").read_text())["world_size"] == 1
    _assert_same_run(runs["one"], runs["two"])


# -- the gpu profile and its smoke-sized twin -------------------------------------------------------
#: the rate the gpu profile is sized with: ~10% of an H100's dense bf16 peak (989 TFLOP/s), eager
#: PyTorch at width 512 (docs/design.md "Sizing the gpu profile")
H100_FLOPS = 100e12


def _gpu_params() -> dict:
    import yaml

    return yaml.safe_load((REPO / "params" / "gpu.yaml").read_text())


def test_gpu_profile_is_consistent():
    """params/gpu.yaml has every key the other profiles have, names known encodings / tasks / suites,
    and every override is a setting of peeval's `gpu` profiles."""
    import yaml

    from peeval.models.encodings import ENCODINGS
    from peeval.tasks.diagnostics.generators import TASKS
    from peeval.training.profiles import get_profile

    p = _gpu_params()
    cpu = yaml.safe_load((REPO / "params" / "cpu.yaml").read_text())
    assert set(p) == set(cpu) and p["profile"] == "gpu" and p["launcher"] == ""
    assert all(e["pe"] in ENCODINGS for e in p["encodings"].values())
    paper = yaml.safe_load((REPO / "params" / "paper.yaml").read_text())
    gpu_pes = {e["pe"] for e in p["encodings"].values()}
    assert gpu_pes == {e["pe"] for e in paper["encodings"].values()}  # the paper's runs, on a GPU
    assert "learned" not in gpu_pes  # cannot extrapolate (an encoding absent from params needs no line there)
    d = p["diagnostics"]
    tasks = {r["task"] for r in d["runs"].values()}
    assert all(r["pe"] in ENCODINGS for r in d["runs"].values()) and tasks <= set(TASKS) and len(d["seeds"]) == 3
    for task in tasks:
        get_profile("diag", "gpu", {**d["train"]["set"], **(d["train"]["task_set"].get(task) or {})})
    get_profile("train", "gpu", p["train"]["set"])
    get_profile("adapt", "gpu", p["adapt"]["train"]["set"])
    assert set(p["eval"]["pretrain"]) | set(p["eval"]["adapt"]) <= set(p["eval"]["suites"])
    assert max(p["eval"]["suites"]["passkey_long"]["metadata"]["lengths"]) >= 2 * 8192  # beyond SmolLM2's 8192


def test_gpu_profile_stages_fit_ten_minutes_by_flops():
    """Training FLOPs (6N + attention, Kaplan, plus the output layer) of each gpu training stage at
    H100_FLOPS: the slowest (TAPE: ~2.3x rope's attention on the H100) must fit 10 minutes with 2x slack."""
    from peeval.models import PeevalConfig, PeevalForCausalLM
    from peeval.training.profiles import get_profile

    p = _gpu_params()

    def minutes(prof: dict, vocab: int, seq: int, tokens_per_step: int) -> float:
        keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
        cfg = PeevalConfig(vocab_size=vocab, max_position_embeddings=seq, pe="rope", **{k: prof[k] for k in keys})
        with torch.device("meta"):
            n = count_params(PeevalForCausalLM(cfg))["non_embedding"]
        per_token = flops_per_token(cfg, n, seq) + 6 * vocab * prof["hidden_size"]
        return per_token * tokens_per_step * prof["steps"] * prof["grad_accum"] / H100_FLOPS / 60

    t = get_profile("train", "gpu", p["train"]["set"])
    pre = minutes(t, t["vocab_size"], t["seq_len"], t["batch_size"] * t["seq_len"])
    assert pre > 0.5 and 2 * pre <= 10, pre
    d = p["diagnostics"]["train"]
    for task in {r["task"] for r in p["diagnostics"]["runs"].values()}:
        prof = get_profile("diag", "gpu", {**d["set"], **(d["task_set"].get(task) or {})})
        m = minutes(prof, 64, 128, prof["batch_size"] * 128)  # cpu-size examples: <= 128 tokens
        assert 2 * m <= 10, (task, m)


@pytest.mark.slow
def test_gpu_profile_smoke_twin_runs_on_the_cpu(tmp_path):
    """The gpu profile's twin (same stages, smoke sizes): DVC resolves every stage of the gpu
    structure, and one chain of each stage kind runs for real on the CPU."""
    import shutil

    import yaml

    from peeval.data import mirror_root

    mirror = mirror_root()
    if mirror is None or not (mirror / "local" / "gutenberg-train").is_dir():
        pytest.skip("no data mirror")
    twin = _launcher_module().smoke_twin(_gpu_params())
    twin["data"]["root"] = str(mirror.resolve())
    work = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, files):
        if (REPO / rel).is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, work / rel)
    (work / "params.yaml").write_text(yaml.safe_dump(twin, sort_keys=False))
    env = {**_env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PEEVAL_DATA_MIRROR": str(mirror.resolve())}  # fmt: skip
    dvc = str(Path(sys.executable).parent / "dvc")

    sh([dvc, "config", "--local", "core.no_scm", "true"], work, env, timeout=1500)
    stages = set(sh([dvc, "stage", "list", "--name-only"], work, env, timeout=1500).split())
    d, e = twin["diagnostics"], twin["eval"]
    want = len(twin["encodings"]) * (1 + len(e["pretrain"])) + 2 * len(d["runs"]) * len(d["seeds"])
    want += len(twin["adapt"]["methods"]) * (1 + len(e["adapt"])) + len(twin["shift"]["encodings"])
    want += len(e["base"])  # eval_base@<suite>: the adapters' base as shipped
    want += 5  # data, tokenizer, ingest, claims, site
    assert len(stages) == want, sorted(stages)
    enc, run, method = "rope", list(d["runs"])[-1], twin["adapt"]["methods"][0]
    targets = [f"eval_pretrain@{enc}-{s}" for s in e["pretrain"]] + [f"eval_diagnostics@{run}-0"]
    targets += [f"eval_adapt@{method}-{s}" for s in e["adapt"]] + [f"shift@{enc}"]
    assert set(targets) <= stages
    log = sh([dvc, "repro", *targets], work, env, timeout=1500)
    for t in targets:
        assert f"Running stage '{t}'" in log, t
    for s in e["pretrain"]:
        res = json.loads((work / "results" / "pretrain" / enc / s / "results.json").read_text())
        assert res["results"] and res["peeval"]["world_size"] == 1, s
