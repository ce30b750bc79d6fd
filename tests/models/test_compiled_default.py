"""Issue 57: the one table of default attention back-ends, and the compiled training step on CUDA.

CUDA is simulated on the CPU where the choice is made (``attention._is_cuda``): every encoding's CUDA
training back-end then runs on CPU tensors, so dynamo can show that its forward has no graph break
and the compiled step can be compared with the eager one. FlexAttention has no CPU backward
(torch 2.13), so alibi's CUDA training entry (flex) runs as its CUDA fallback, sdpa with the bias.
"""

import pytest
import torch
from conftest import randomize_, tiny_model

import peeval.models.attention as attn
from peeval.models.encodings import ENCODINGS
from peeval.models.encodings.base import PEContext
from peeval.training.speed import summed_loss


@pytest.fixture
def cuda_plan(monkeypatch):
    """Plans as on CUDA; no back-end known broken."""
    monkeypatch.setattr(attn, "_is_cuda", lambda t: True)
    monkeypatch.setattr(attn, "BROKEN", set())


def test_the_table_names_every_encoding_and_never_blocked_on_cuda():
    assert set(attn.DEFAULT_BACKENDS) == set(ENCODINGS)
    for pe, d in attn.DEFAULT_BACKENDS.items():
        assert {d.cpu, d.cuda, d.cuda_train} <= set(attn.BACKENDS), pe
        assert "blocked" not in (d.cuda, d.cuda_train), pe  # issue 46: fire fell to blocked (32x rope)
        # every layer's N x N probabilities (fire: 58.8 GiB); t5 trains on eager, its measured winner (issue 65,
        # tests/models/test_default_evidence.py), at 1.22x rope's memory (t5@eager, gpu_train_h200_alt.json)
        assert d.cuda != "eager" and (d.cuda_train != "eager" or pe == "t5"), pe


def ctx_for(n):
    pos = torch.arange(n)[None]
    return PEContext(position_ids=pos, key_position_ids=pos, past_length=0, n_positions=n, max_distance=n)


@pytest.mark.parametrize("pe", sorted(ENCODINGS))
def test_plan_takes_the_tables_entry(pe, cuda_plan, monkeypatch):
    """A whole causal pass of the default request runs the table's back-end, on CUDA (training and
    inference) and on the CPU; a padded call on CUDA never falls to blocked."""
    monkeypatch.setattr(attn, "flex_available", lambda q: True)
    enc = tiny_model(pe).model.pe
    if pe == "randpe":
        enc = enc.base  # the encoding whose hooks run
    d = attn.DEFAULT_BACKENDS[pe]
    q = torch.zeros(1, 4, 8, 8, requires_grad=True)

    def plan(mask=None):
        return attn.plan(attn.AttentionCall(enc, 0, "sdpa", ctx_for(8), q, attention_mask=mask))

    want_train = d.cuda_train if pe != "randpe" else attn.DEFAULT_BACKENDS[enc.name].cuda_train
    want_infer = d.cuda if pe != "randpe" else attn.DEFAULT_BACKENDS[enc.name].cuda
    assert plan() == want_train
    with torch.no_grad():
        assert plan() == want_infer
    padded = torch.ones(1, 8, dtype=torch.long)
    padded[0, 0] = 0
    assert plan(padded) != "blocked"
    monkeypatch.setattr(attn, "_is_cuda", lambda t: False)
    assert plan() == (d.cpu if pe != "randpe" else attn.DEFAULT_BACKENDS[enc.name].cpu)


def trained(pe):
    m = tiny_model(pe, **({"pe_options": {"max_positions": 64}} if pe == "randpe" else {})).train()
    randomize_(m)
    return m


#: with a padding mask: the mask's own reads (modeling, attention: every encoding's) through rope, and the encodings
#: whose positions were read from data on that path (cope and t5: its other diagnostic models)
PADDED = ("rope", "learned", "sinusoidal", "randpe", "cope", "t5")


def breaks(m, x, mask=None):
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda x, mk: summed_loss(m, x, x, mk))(x, mask)
    return explained, [(b.user_stack[-1].filename.rsplit("/", 1)[-1], str(b.reason).splitlines()[0])
                       for b in explained.break_reasons]  # fmt: skip


@pytest.mark.parametrize("pe", sorted(ENCODINGS))
def test_no_graph_break_in_the_cuda_training_forward(pe, cuda_plan):
    """The loss of a training step (``speed.summed_loss``, what ``peeval train`` compiles) is one graph:
    distance tables and position tables are sized from the shapes, not read back from the device; with a
    padding mask too (diagnostic batches), but for randpe, whose draw needs the longest row's length."""
    m = trained(pe)
    x = torch.randint(0, 61, (2, 16))
    explained, where = breaks(m, x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, where
    if pe not in PADDED:
        return
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[0, 11:] = 0
    explained, where = breaks(m, x, mask)
    if pe == "randpe":
        assert {w[0] for w in where} == {"randpe.py"}, where
    else:
        assert explained.graph_break_count == 0, where


@pytest.mark.slow  # FlexAttention's eager CPU forward: 4-5 s each
@pytest.mark.parametrize("pe", ["alibi", "fire"])  # a distance table's score_mod (t5 and kerple share it), fire's own
def test_no_graph_break_in_the_cuda_inference_forward(pe, cuda_plan, monkeypatch):
    """CUDA inference of a position bias runs FlexAttention (the table): traced inside the model's graph, the
    block mask and score_mod included (FlexAttention's forward runs on the CPU)."""
    ran = set()
    attend = attn.attend
    monkeypatch.setattr(attn, "attend", lambda how, call: ran.add(how) or attend(how, call))
    torch._dynamo.reset()
    m = tiny_model(pe)
    with torch.no_grad():
        explained = torch._dynamo.explain(lambda x: m(input_ids=x, use_cache=False).logits)(
            torch.randint(0, 61, (2, 16))
        )
    assert explained.graph_break_count == 0, [str(b.reason).splitlines()[0] for b in explained.break_reasons]
    assert ran == {"flex"}


def grads(m, fn, x):
    m.zero_grad(set_to_none=True)
    loss = fn(m, x, x)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}


def compiled_equals_eager(pe, backend):
    torch._dynamo.reset()
    m = trained(pe).double()
    if pe == "randpe":  # a fresh draw each forward: the same draw for both
        m.eval()
    x = torch.randint(0, 61, (2, 16))
    ref_loss, ref = grads(m, summed_loss, x)
    got_loss, got = grads(m, torch.compile(summed_loss, backend=backend, dynamic=False), x)
    torch.testing.assert_close(got_loss, ref_loss, rtol=1e-5, atol=1e-4)  # summed_loss's logits are float32
    assert set(got) == set(ref)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-5, msg=name)


#: in the default suite: plain sdpa, and a bias through sdpa (CoPE's blocks: test_cope_cuda_blocks_equal_the_reference
#: in float64); the others are slow (5-14 s each on a loaded core)
FAST = ("rope", "t5")


@pytest.mark.parametrize("pe", [p if p in FAST else pytest.param(p, marks=pytest.mark.slow) for p in sorted(ENCODINGS)])
def test_compiled_step_equals_eager(pe, cuda_plan):
    """dynamo + AOTAutograd (``aot_eager``: the graphs inductor compiles, run by eager kernels) give the eager
    loss and every gradient, on the CUDA path; ``test_inductor_equals_eager`` runs inductor itself (slow)."""
    compiled_equals_eager(pe, "aot_eager")


@pytest.mark.slow
@pytest.mark.parametrize("pe", sorted(ENCODINGS))
def test_inductor_equals_eager(pe, cuda_plan):
    """Inductor's CPU kernels (30-60 s of compilation per encoding on one core)."""
    compiled_equals_eager(pe, "inductor")


def test_cope_blocks_are_sized_for_the_device():
    """CUDA: the gpu profile's 64 x 512 (8 heads) in one query block, 16 x 2,048 in four (issue 46: 32-row blocks,
    33.9x rope); the CPU keeps its cache-sized budget."""
    from types import SimpleNamespace

    from peeval.models.encodings import cope as cope_mod

    cuda, cpu = SimpleNamespace(is_cuda=True), SimpleNamespace(is_cuda=False)

    def rows(t, b, n, h=8):
        return max(cope_mod.MIN_BLOCK_ROWS, cope_mod.block_elements(t) // (b * h * n))

    assert rows(cuda, 64, 512) >= 512 and -(-2048 // rows(cuda, 16, 2048)) == 4
    assert rows(cpu, 64, 512) == cope_mod.MIN_BLOCK_ROWS


def test_cope_cuda_blocks_equal_the_reference_in_float64(monkeypatch):
    """The CUDA budget's blocks (checkpointed, as under autograd at the gpu profile's size) give the eager
    reference's loss and gradients in float64."""
    from peeval.models.encodings import cope as cope_mod

    monkeypatch.setattr(cope_mod, "block_elements", lambda t: cope_mod.BLOCK_ELEMENTS_CUDA)
    monkeypatch.setattr(cope_mod, "CHECKPOINT_ELEMENTS", 1)
    m = trained("cope").double()
    x = torch.randint(0, 61, (2, 40))
    out = {}
    for backend in ("eager", "sdpa"):
        m.config.attn_backend = backend
        out[backend] = grads(m, lambda m, x, y: m(x, labels=y, use_cache=False).loss, x)
    torch.testing.assert_close(out["sdpa"][0], out["eager"][0], rtol=1e-10, atol=1e-10)
    for name, g in out["eager"][1].items():
        torch.testing.assert_close(out["sdpa"][1][name], g, rtol=1e-9, atol=1e-10, msg=name)
