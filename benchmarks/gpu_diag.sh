#!/usr/bin/env bash
# The gpu-diag profile in one device window (issue 57): every diagnostics run x seed of params/gpu-diag.yaml trained
# and evaluated, several at once on the one GPU; at most 8 files under $OUT (one a tarball for
# `python -m leaderboard.publish --profile gpu-diag --machine ... --tarball $OUT/gpu-diag.tar.gz`). docs/gpu.md.
#   OUT=/path benchmarks/gpu_diag.sh            # on a CUDA machine (JOBS=8 runs at once by default)
#   OUT=/path benchmarks/gpu_diag.sh --cpu      # the dry run at tiny sizes (CI: .ci/run)
#   OUT=/path benchmarks/gpu_diag.sh --runs cope [--window N]   # one paper's planned window (issue 64:
#       params/gpu-diag.yaml windows, benchmarks/diag_budget.py; refused without measured step times)
#   benchmarks/gpu_diag.sh --runs tape --plan   # print the plan, write nothing
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-$REPO/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
: "${OUT:=}"
case " $* " in *" --plan "*) ;; *) : "${OUT:?set OUT to an empty or new folder for the results}" ;; esac
exec "$PY" "$REPO/benchmarks/gpu_diag.py" ${OUT:+--out "$OUT"} ${JOBS:+--jobs "$JOBS"} "$@"
