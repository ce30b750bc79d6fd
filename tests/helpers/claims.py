"""A minimal valid claim of leaderboard/claims.yaml (PoPE's indirect indexing), shared by the claims tests."""

#: every required field once; tests change one field at a time
CLAIM = {
    "id": "ii",
    "paper": "PoPE",
    "ref": "Table 1",
    "title": "t",
    "task": "peeval_diag_indirect_indexing_test",
    "metric": "acc",
    "unit": "acc_pct",
    "higher_is_better": True,
    "focus": "a",
    "variants": {"a": {"pe": "pope", "paper": 90.0}, "b": {"pe": "rope", "paper": 10.0}},
    "setting": "s",
    "cpu": "testable",
    "cpu_note": "n",
}
