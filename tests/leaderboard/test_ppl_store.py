"""Issue 27 items 1-2 in the store: each perplexity run's (document, length) sums land in ``ppl_blocks``
(the same targets at every length, so lengths and encodings pair document by document), the loss by
position in the view ``loss_by_position``, and the perplexity page draws it."""

import json
import math

import pytest
from helpers.checkpoints import save_tiny_checkpoint
from helpers.data_mirror import needs_mirror


@needs_mirror("local", "gutenberg-eval")
def test_blocks_and_loss_by_position_reach_the_store_and_the_page(tmp_path, capsys):
    from leaderboard.ingest import connect, ingest
    from leaderboard.site import build_site
    from peeval.cli import main

    ck = save_tiny_checkpoint(tmp_path / "ck" / "rope", ["the cat sat on the mat 0123456789 and the dog ran"],
                              pe="rope", vocab_size=300, max_positions=64)  # fmt: skip
    md = {"lengths": [16, 32], "targets": 60, "skip": 0, "max_docs": 2, "position_buckets": 4}
    rc = main(["eval", "--model", "peeval", "--model_args", f"pretrained={ck}", "--tasks", "peeval_ppl_pg19",
               "--device", "cpu", "--metadata", json.dumps(md), "--output_path", str(tmp_path / "results"),
               "--run_name", "rope"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err[-2000:]
    samples = (tmp_path / "results" / "rope" / "samples_peeval_ppl_pg19.jsonl").stat().st_size
    assert samples < 200_000  # the books are clipped in the samples (4 rows of ~400 kB each otherwise)

    db = tmp_path / "peeval.duckdb"
    ingest([tmp_path / "results"], db, root=tmp_path)
    con = connect(db, read_only=True)
    blocks = con.execute("select doc_id, length, ll, tokens, protocol, target_start, target_end from ppl_blocks "
                         "order by doc_id, length").fetchall()  # fmt: skip
    assert [(b[0], b[1]) for b in blocks] == [(0, 16), (0, 32), (1, 16), (1, 32)]
    for doc in (0, 1):  # one target run per document, the same at both lengths: 60 targets / 2 documents
        a, b = (x for x in blocks if x[0] == doc)
        assert a[4] == b[4] == "targets" and a[5:] == b[5:] and a[6] - a[5] == 30 == a[3] == b[3]
    metrics = dict(con.execute("select metric, value from metrics where task = 'peeval_ppl_pg19'").fetchall())
    for L in (16, 32):  # ppl@L is exp(-Σll / Σtokens) over the blocks of that length
        ll = sum(b[2] for b in blocks if b[1] == L)
        assert metrics[f"ppl@{L}"] == pytest.approx(math.exp(-ll / 60), rel=1e-9)
    pos = con.execute("select corpus, position, nll from loss_by_position order by position").fetchall()
    assert [(c, p) for c, p, _ in pos] == [("pg19", 0), ("pg19", 8), ("pg19", 16), ("pg19", 24)]
    assert all(0 < nll < 20 for *_, nll in pos)
    proto = con.execute("select protocol from runs").fetchone()[0]
    con.close()
    assert proto == "fixed targets: 60 tokens, skip 0, seed 0, max_docs 2"  # max_docs: part of the protocol (issue 66)

    site = build_site(db, tmp_path / "site").parent
    page = (site / "ppl.html").read_text()
    assert "loss by position in the longest windows" in page and "fixed targets: 60 tokens" in page
