"""A minimal valid claim of leaderboard/claims/claims.yaml (PoPE's indirect indexing), shared by the claims tests."""

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


def write_claims_file(tmp_path, entries: list[dict], base: dict | None = None):
    """A claims.yaml in ``tmp_path`` with one claim per entry: ``base`` (default :data:`CLAIM`) updated by it."""
    import copy

    import yaml

    out = []
    for e in entries:
        d = copy.deepcopy(CLAIM if base is None else base)
        d.update(e)
        out.append(d)
    p = tmp_path / "claims.yaml"
    # every pair declared testable for every profile (issue 55's pre-registered families): these tests are about
    # the rest of the rule; tests/leaderboard/test_claims_rules.py tests the families themselves
    pairs = [f"{d['id']}:{d['focus']}-vs-{o}" for d in out for o in d["variants"] if o != d["focus"]]
    profiles = ("cpu", "cpu-claims", "gpu", "paper", "smoke")
    p.write_text(yaml.safe_dump({"version": 1, "claims": out, "families": dict.fromkeys(profiles, pairs)}))
    return p
