#!/usr/bin/env bash
# The farm on a real GPU (docs/perf-notes.md, visit 2). Two parts, each under the device's
# 10-minute limit; results land in $OUT.
#   bench/farm_gpu.sh splitk    splitk preset twice (repeatability), the serial loop over the
#                               same points (throughput), and a kernel that crashes its worker
#   bench/farm_gpu.sh grouping  grouping preset twice
set -u
source .devdeps/on-device.sh
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/farm-out}
mkdir -p "$O"
farm=(python -m cli)
step() {
  local limit=$1; shift
  echo "== $* (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@"
  echo "== rc=$? wall=$((SECONDS - start)) s"
}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
case "${1:-splitk}" in
  splitk)
    step 170 "${farm[@]}" sweep --preset splitk --db "$O/run1.db" --no-progress
    step 170 python bench/serial_loop.py --preset splitk --out "$O/serial_splitk.json" --limit-s 150
    step 130 "${farm[@]}" sweep --preset splitk --db "$O/run2.db" --no-progress
    step 80 "${farm[@]}" sweep --spec bench/oob.yaml --plugin bench/plugins/oob_store.py --db "$O/oob.db" --no-progress
    python bench/compare_runs.py "$O/run1.db" "$O/run2.db" --serial "$O/serial_splitk.json"
    ;;
  grouping)
    step 200 "${farm[@]}" sweep --preset grouping --db "$O/run1.db" --no-progress
    step 200 "${farm[@]}" sweep --preset grouping --db "$O/run2.db" --no-progress
    python bench/compare_runs.py "$O/run1.db" "$O/run2.db"
    ;;
esac
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
