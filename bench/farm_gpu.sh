#!/usr/bin/env bash
# One run of a preset on a real GPU for issue #13: the farm's sweep, then bench/serial_loop.py's
# compile + do_bench over the same points, each from an empty Triton cache, both into results
# databases under $OUT. One device call per run (the grouping preset: about 100 + 55 s on one H200,
# the splitk preset 138 + 103 s; visits 30-32), then, here:
#   python bench/compare_runs.py grouping-1.db grouping-2.db --by-shape     # the farm's repeatability
#   python bench/compare_runs.py serial-grouping-1.db serial-grouping-2.db  # do_bench's own
#   python bench/compare_runs.py grouping-1.db serial-grouping-1.db         # the farm against do_bench
# and the throughput bar from the two `wall=` lines (the sweep command against the serial loop).
#   bench/farm_gpu.sh grouping 1
#   bench/farm_gpu.sh grouping 2
#   bench/farm_gpu.sh bench/throughput.yaml 1     # a spec file instead of a preset
set -u
source .devdeps/on-device.sh
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/farm-out}
mkdir -p "$O"
preset=${1:-grouping}
run=${2:-1}
source_args=(--preset "$preset")
if [[ $preset == *.yaml ]]; then
  source_args=(--spec "$preset")
  preset=$(basename "$preset" .yaml)
fi
step() {
  local limit=$1; shift
  echo "== $* (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@"
  echo "== rc=$? wall=$((SECONDS - start)) s"
}
gpu_state() { nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; }
gpu_state
step ${SWEEP_LIMIT_S:-420} env TRITON_CACHE_DIR="$(mktemp -d)" python -m cli sweep "${source_args[@]}" --db "$O/$preset-$run.db" --no-progress
gpu_state
serial_s=${SERIAL_LIMIT_S:-140}  # the loop stops after this; its points per minute are the rate
step $((serial_s + 10)) env TRITON_CACHE_DIR="$(mktemp -d)" python bench/serial_loop.py "${source_args[@]}" \
  --db "$O/serial-$preset-$run.db" --limit-s "$serial_s"
gpu_state
