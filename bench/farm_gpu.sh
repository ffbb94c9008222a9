#!/usr/bin/env bash
# A preset swept on a real GPU from an empty Triton cache, for repeatability (issue #13): one device
# call per run, each under the device's 10-minute limit, the database left in $OUT.
#   bench/farm_gpu.sh grouping 1      # about 5.5 min on one H200 (visit 19: 171 s on two)
#   bench/farm_gpu.sh grouping 2
#   python bench/compare_runs.py grouping-1.db grouping-2.db    # here: time, gains, energy vs the bars
#   bench/farm_gpu.sh splitk 1        # adds the serial compile + do_bench loop over the same points
set -u
source .devdeps/on-device.sh
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/farm-out}
mkdir -p "$O"
preset=${1:-grouping}
run=${2:-1}
step() {
  local limit=$1; shift
  echo "== $* (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@"
  echo "== rc=$? wall=$((SECONDS - start)) s"
}
gpu_state() { nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; }
gpu_state
step 540 env TRITON_CACHE_DIR="$(mktemp -d)" python -m cli sweep --preset "$preset" --db "$O/$preset-$run.db" --no-progress
if [ "$preset" = splitk ] && [ "$run" = 1 ]; then
  step 150 env TRITON_CACHE_DIR="$(mktemp -d)" python bench/serial_loop.py --preset splitk --out "$O/serial_splitk.json" \
    --limit-s 140
fi
gpu_state
