"""Every string format that crosses a file boundary downstream of ``results.json``, and the statistics the
leaderboard and the claims share (torch-free).

One package writes and reads them, so a producer (task, ``peeval eval``, shift measurement, training) and a
consumer (``leaderboard.ingest``, the site, the claims) cannot drift apart. Rule: nothing parses a metric name,
task name, label or curve column that is not defined here. One module per reason to change:

- :mod:`.names`: task names (``ppl_task``, ``PASSKEY_TASK``, ``SHIFT_TASK``, ``diag_task`` / ``split_diag_task``),
  the metric-cell grammar (``ppl@512``, ``acc@512@0.5``, ``acc@3x5``, ``attn_diff@shift_ids@3``, ``nll_pos@128``:
  encode / parse pairs, ``family_metric``, ``metric_base``, ``is_cell``) and lm-eval's results keys
  (``result_key`` ``"acc,none"``, ``stderr_key``, ``parse_result_key``);
- :mod:`.provenance`: :class:`Provenance`, the record of ``peeval eval`` / the shift measurement under
  ``results["peeval"]`` (``PROVENANCE_KEY``);
- :mod:`.labels`: row and run names (``encoding_label``, ``adapt_label``, ``shipped_name``, ``adapted_name``,
  ``external_name``, ``published_name``, sources) and the data a task read (``DATA_SOURCES``, ``data_label``,
  ``task_label``);
- :mod:`.formats`: ``clip_text``, ``CURVE_COLUMNS`` (``train_curve.csv``), ``fmt_number`` (the site's numbers);
- :mod:`.metrics`: the metric registry :data:`METRICS` (:class:`MetricSpec`: kind, direction, headline rank,
  aggregation over seeds, per-example outcome) and its readers (``metric_spec``, ``higher_is_better``, ...);
- :mod:`.stats`: ``seed_stderr`` / ``mean_stderr`` / ``binomial_stderr``, :func:`seed_estimate` (the one
  mean ± stderr over seeds the leaderboard and the claims show), Student's t (``t_sf``, ``t_quantile``: scipy's)
  and the Welch interval of a difference (:func:`welch_difference`); leaderboard/claims/ uses these.

``from peeval.records import X`` keeps working for every public name of those modules.

Row 1 of the layer table (docs/design.md): imports ``peeval.registry`` only (torch-free); the tasks,
training, evaluation and the whole leaderboard import it.
"""

from . import formats, labels, metrics, names, provenance, stats
from .formats import *  # noqa: F403
from .labels import *  # noqa: F403
from .metrics import *  # noqa: F403
from .names import *  # noqa: F403
from .provenance import *  # noqa: F403
from .stats import *  # noqa: F403

__all__ = [*names.__all__, *provenance.__all__, *labels.__all__, *formats.__all__, *metrics.__all__, *stats.__all__]
