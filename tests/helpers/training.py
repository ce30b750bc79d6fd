"""The tiny corpus and model sizes shared by the training tests; its fixtures (`corpus`, `tok_dir`) are
registered for every test by ``pytest_plugins`` in tests/conftest.py, so no test module imports another."""

import pytest

TEXT = (
    "The quick brown fox jumps over the lazy dog. The lazy dog sleeps under the old oak tree. "
    "A fox and a dog are friends in the green field near the river. "
) * 30

#: `run_train` settings of a 2-layer model that trains in a second on the CPU
TINY = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    seq_len=32,
    batch_size=4,
    eval_batches=2,
    train_chars=None,
    val_chars=None,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    for i in range(4):
        (d / f"{i:02d}.txt").write_text(TEXT)
    return str(d)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from peeval.training.data import train_bpe

    d = tmp_path_factory.mktemp("tok")
    train_bpe([TEXT], 200).save_pretrained(d)
    return str(d)
