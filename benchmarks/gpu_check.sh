#!/usr/bin/env bash
# Issue 46 on one GPU, from the repository root, in under 7 minutes; results under $OUT (7 files):
#   gpu_check.log            everything printed
#   bench_default.{json,md}  `peeval bench --train --profile gpu`: every encoding's default path (ratios to rope)
#   bench_alt.{json,md}      the alternatives: fire/t5/kerple @blocked|eager|flex, cope@eager, tape/pope@triton
#   fire_fallback.json       FIRE with attn_backend=flex trained 50 steps (the fallback, its log line, the loss)
#   pretrain_rope.json       part d: the gpu profile's `train@rope` stage end to end (tokenizer stage, then
#                            pipelines/train.py rope on the mirror's Gutenberg corpus), its summary and wall time;
#                            needs the mirror folders in ./.gpudata (local/gutenberg-train, tokenizers/gpt2) and
#                            datasets + pydantic wheels in ./.whl
# Needs torch (CUDA), transformers, pyyaml; no lm_eval / datasets / pydantic / network. Wheels in ./.whl are
# installed first (--no-deps --no-index) if that folder exists. Each part is time-boxed: one failure or
# hang does not eat the others. CPU dry run of the logic: `bash benchmarks/gpu_check.sh --cpu`.
set -u
OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/gpu_check_inductor}
PY=${PYTHON:-python3}
LOG="$OUT/gpu_check.log"
exec > >(tee -a "$LOG") 2>&1

if [ "${1:-}" = "--cpu" ]; then  # the same steps on a tiny model, for checking this script
  PROFILE=smoke DEVICE="--device cpu" T_DEFAULT=120 T_ALT=120 T_FIRE=60 FIRE_STEPS=5 T_PRE=120 STAGE_PROFILE=smoke \
    ALT="fire@blocked fire@eager fire@flex t5@blocked t5@flex t5@eager kerple@blocked kerple@eager cope@eager"
else
  PROFILE=gpu DEVICE="" T_DEFAULT=130 T_ALT=125 T_FIRE=70 FIRE_STEPS=50 T_PRE=190 STAGE_PROFILE=gpu
  # cheap ones first, the compiled ones last: a time-out loses the last rows only (rows are written as they come)
  ALT="fire@eager t5@blocked kerple@blocked t5@eager kerple@eager cope@eager fire@blocked pope@triton \
tape@triton t5@flex kerple@flex fire@flex"
fi
BENCH="--steps 5 --warmup 2 --entry_seconds 8"
t0=$(date +%s)
say() { echo "=== [$(( $(date +%s) - t0 )) s] $*"; }

say "setup: $(pwd), OUT=$OUT"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  say "installing wheels from .whl"
  $PY -m pip install --no-deps --no-index .whl/*.whl 2>&1 | tail -3
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
timeout 60 $PY - <<'EOF' || { echo "setup FAILED: peeval's bench path does not import (see above)"; }
import importlib, sys
import torch, transformers
print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__,
      "cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
for m in ("triton", "pydantic", "accelerate", "lm_eval", "datasets"):
    print(f"  {m}:", "present" if importlib.util.find_spec(m) else "absent")
import peeval.bench.train, peeval.models  # noqa: F401
print("peeval from", peeval.__file__, "imports lm_eval:", "lm_eval" in sys.modules, "datasets:", "datasets" in sys.modules)
EOF

say "part b1: every encoding's default path (timeout ${T_DEFAULT}s)"
timeout -k 10 "$T_DEFAULT" $PY -m peeval bench --train --profile $PROFILE $DEVICE $BENCH \
  --json "$OUT/bench_default.json" --md "$OUT/bench_default.md"
echo "part b1 exit $?"


say "part c: fire with attn_backend=flex, $FIRE_STEPS training steps (the fallback; timeout ${T_FIRE}s)"
timeout -k 10 "$T_FIRE" $PY benchmarks/fire_fallback_train.py --profile $PROFILE $DEVICE --steps "$FIRE_STEPS" \
  --json "$OUT/fire_fallback.json"
echo "part c exit $?"

say "part d: the $STAGE_PROFILE profile's train@rope stage end to end (timeout ${T_PRE}s)"
if [ -d .gpudata ]; then
  STAGE=$(mktemp -d /tmp/stage.XXXX)
  git ls-files -z 2>/dev/null | xargs -0 -I{} cp --parents {} "$STAGE"/ 2>/dev/null || cp -r peeval pipelines params dvc.yaml "$STAGE"/
  ( cd "$STAGE" && $PY pipelines/use_profile.py "$STAGE_PROFILE" \
    && sed -i "0,/root: ..\/shared\/data/s##root: $OLDPWD/.gpudata#" params.yaml \
    && s0=$(date +%s) && timeout -k 10 "$T_PRE" $PY pipelines/tokenizer.py \
    && s1=$(date +%s) && timeout -k 10 "$T_PRE" $PY pipelines/train.py rope \
    && s2=$(date +%s) && $PY -c "import json,sys; d=json.load(open('checkpoints/pretrain/rope/train_summary.json')); \
d['stage_wall_s']={'tokenizer': $s1-$s0, 'train@rope': $s2-$s1}; json.dump(d, open(sys.argv[1],'w'), indent=1); \
print('train@rope:', {k: d.get(k) for k in ('steps','tokens','final_val_loss','final_val_ppl','tokens_per_s','train_time_s','stage_wall_s')})" \
    "$OUT/pretrain_rope.json" )
  echo "part d exit $?"
else
  echo "part d skipped: no ./.gpudata mirror folders"
fi

say "part b2: the alternative back-ends (timeout ${T_ALT}s)"
# shellcheck disable=SC2086
timeout -k 10 "$T_ALT" $PY -m peeval bench --train --profile $PROFILE $DEVICE $BENCH --pe $ALT \
  --json "$OUT/bench_alt.json" --md "$OUT/bench_alt.md"
echo "part b2 exit $?"

say "summary"
for f in bench_default.md bench_alt.md; do [ -f "$OUT/$f" ] && cat "$OUT/$f"; done
[ -f "$OUT/fire_fallback.json" ] && $PY -c "import json;d=json.load(open('$OUT/fire_fallback.json'));\
print('fire fallback:', {k: d[k] for k in ('ok','steps','first_loss','last_loss','backends','peeval_log')})"
say "done; files in $OUT:"
ls -la "$OUT"
