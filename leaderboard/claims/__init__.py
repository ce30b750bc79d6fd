"""The papers' headline claims next to peeval's own numbers, with an honest verdict.

``leaderboard/claims/claims.yaml`` lists each claim (paper, table, task, metric, compared encodings,
the paper's numbers and setting). The package reads peeval's numbers from the DuckDB store
(runs, metrics, the diagnostic_cells view, training_curves, efficiency, samples) and writes the
``claims`` and ``claim_values`` tables (DDL in ``leaderboard/store/schema.sql``); the DVC stage
``claims`` (pipelines/claims.py) runs it after ``ingest``. A claim goes down one line, a module per step:

- parse, ``schema``: claims.yaml loading and validation (names checked against peeval, no torch);
- find runs, ``matching``: the store read, runs <-> claim variants, metric resolution (``find_runs``);
- estimate, ``stats`` (units, mean ± stderr over seeds: ``estimate_pairs``) then ``paired`` (McNemar / the
  paired standard error where both encodings answered the same examples, else unpaired: ``differences``);
- controls, ``controls``: the step-0 untrained controls judged by the same rule (a pair they decide too "holds at
  initialisation"), and the positive control trained vs step 0 (issue 67);
- decide, ``verdicts``: the p-values (``decision``: t with its degrees of freedom, McNemar, TOST), Holm's
  correction over the store, the verdict rule ("not decidable here": a ``beyond_window`` claim measured inside
  the runs' window), "not measured" rows naming the profile that measures them
  (``profiles``), the rows of both tables, writing them (``evaluate_claims``).
- registered, ``registration``: what decides a profile's verdicts (families, test, gates, margins), hashed and
  dated by git; publish records it in SOURCE.json and the claims page says whether it predates the data.

Imports no torch: peeval's names and option defaults come from ``peeval.registry.declarations``.

The package owns the claims (``claims.yaml``) and their verdicts. Row 7 of leaderboard's column
(docs/design.md): may import ``leaderboard.store`` and peeval's library (rows 0-5); never ingest, site or publish.
"""

from __future__ import annotations

from . import calibration, controls, decision, learned, paired, profiles, replication
from .matching import Evidence, Store, find_runs, matching_runs, measured_length, read_store, resolve_metric
from .schema import (
    ACC_UNITS,
    CPU,
    DEFAULT_PATH,
    PAPERS,
    UNITS,
    Claim,
    ClaimsError,
    Variant,
    _leaf_tasks,
    lm_eval_task_names,
    load_claims,
    validate,
)
from .stats import Estimate, binomial_stderr, combine_seeds, estimate_pairs, to_unit
from .verdicts import (
    ALPHA,
    TABLES,
    UNDECIDABLE,
    VERDICTS,
    compute_claims,
    evaluate_claims,
    p_value,
    summary,
    table_ddl,
    verdict,
    write_claims,
)

__all__ = [
    "ACC_UNITS",
    "ALPHA",
    "CPU",
    "DEFAULT_PATH",
    "PAPERS",
    "TABLES",
    "UNDECIDABLE",
    "UNITS",
    "VERDICTS",
    "Claim",
    "ClaimsError",
    "Estimate",
    "Evidence",
    "Store",
    "Variant",
    "_leaf_tasks",
    "binomial_stderr",
    "calibration",
    "combine_seeds",
    "controls",
    "compute_claims",
    "decision",
    "estimate_pairs",
    "evaluate_claims",
    "find_runs",
    "learned",
    "lm_eval_task_names",
    "load_claims",
    "matching_runs",
    "measured_length",
    "p_value",
    "paired",
    "profiles",
    "read_store",
    "replication",
    "resolve_metric",
    "summary",
    "table_ddl",
    "to_unit",
    "validate",
    "verdict",
    "write_claims",
]
