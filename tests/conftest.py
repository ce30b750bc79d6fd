import os

import pytest

# setuptools' distutils shim first, before any test imports the standard library's distutils: inductor's C++ build
# (torch.compile on the CPU) imports setuptools late, and its shim then asserts on the stdlib copy already loaded
# (measured: tests/training/test_fast_diag.py failed only inside the full suite, BackendCompilerFailed)
import setuptools  # noqa: E402, F401
import torch

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

#: fixtures shared across files live in tests/helpers (tests/ is on sys.path: pytest prepends this folder)
pytest_plugins = ["helpers.training", "helpers.data_mirror"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def _own_pack_cache(tmp_path_factory):
    """The tests' packed corpora go to a folder of their own (and subprocesses inherit it), never ~/.cache."""
    os.environ.setdefault("PEEVAL_CACHE", str(tmp_path_factory.mktemp("peeval_cache")))


def tiny_config(pe: str = "rope", **kw):
    """A 2-layer model small enough for exhaustive CPU tests (GQA on: 4 query, 2 KV heads)."""
    from peeval.models import PeevalConfig

    base = dict(
        vocab_size=61,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        rope_theta=100.0,
        pe=pe,
    )
    base.update(kw)
    return PeevalConfig(**base)


def tiny_model(pe: str = "rope", seed: int = 0, **kw):
    from peeval.models import PeevalForCausalLM

    torch.manual_seed(seed)
    return PeevalForCausalLM(tiny_config(pe, **kw)).eval()


def randomize_(model, seed: int = 1, std: float = 0.2) -> None:
    """Give every parameter (incl. zero-initialised encoding ones) random non-zero values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * std)


def cache_name() -> str:
    """The name this transformers release passes the KV cache under (``cache`` from 5.24 on)."""
    from transformers.modeling_outputs import BaseModelOutputWithPast

    return "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def decode_logits(model, x: torch.Tensor, prefix: int, end: int | None = None) -> torch.Tensor:
    """Logits of ``x[:, :end]`` from one forward of the first ``prefix`` tokens, then token by token
    through the KV cache (no grad): what generation computes, to compare with one full forward."""
    end = x.shape[1] if end is None else end
    name = cache_name()
    with torch.no_grad():
        out = model(x[:, :prefix], use_cache=True)
        steps, cache = [out.logits], getattr(out, name)
        for t in range(prefix, end):
            out = model(x[:, t : t + 1], use_cache=True, **{name: cache})
            steps.append(out.logits)
            cache = getattr(out, name)
    return torch.cat(steps, 1)


@pytest.fixture
def tmp_ckpt(tmp_path):
    return tmp_path / "ckpt"


@pytest.fixture
def hub_offline(monkeypatch):
    """No hub access at all, even where datasets / huggingface_hub read their flags at import."""
    import datasets
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
