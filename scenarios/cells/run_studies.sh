#!/usr/bin/env bash
# Issue 37's study: one cell against 7 hexagonal cells (reuse 1, 3 and 7), the paper's controller
# (two_timescale, planning on the noise alone or on the layout's mean interference) and Ideal FL,
# then flat against hierarchical aggregation on the 7 cells under reuse 1 (edge servers at the
# base stations, a cloud every k2 = 1, 5 or 20 slots over a backhaul of 20 ms one way, 1 Gbit/s
# and 10 nJ/bit), 3 seeds each: 16 configurations, 48 runs.
#   bash scenarios/cells/run_studies.sh [OUT] [DATA_DIR]   # DATA_DIR: the MNIST folder
# One sweep folder per configuration, OUT/<scheme>-<cells> (default OUT runs/cells-mnist), then
# the report over all of them in OUT/report.
set -euo pipefail
out=${1:-runs/cells-mnist}
extra=()
if [[ $# -ge 2 ]]; then extra=(--data-dir "$2"); fi
here=$(dirname "$0")
# one torch thread per run: the runs are small, and more threads only contend on a busy machine
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
declare -A layouts=(
  [one]=''
  [reuse1]='cells.rings=1 cells.reuse_factor=1'
  [reuse1-mean]='cells.rings=1 cells.reuse_factor=1 cells.plan_on="mean_interference"'
  [reuse3]='cells.rings=1 cells.reuse_factor=3'
  [reuse3-mean]='cells.rings=1 cells.reuse_factor=3 cells.plan_on="mean_interference"'
  [reuse7]='cells.rings=1 cells.reuse_factor=7'
)
run() {  # run SCHEME LAYOUT
  local sets=(--set "scheme.name=\"$1\"")
  for kv in ${layouts[$2]}; do sets+=(--set "$kv"); done
  python -m wflsim sweep "$here/mnist.toml" "${sets[@]}" "${extra[@]}" \
    --out "$out/$1-$2" --workers 1 --quiet
}
for layout in one reuse1 reuse1-mean reuse3 reuse3-mean reuse7; do
  run two_timescale "$layout"
done
for layout in one reuse1 reuse3 reuse7; do  # Ideal FL plans nothing: no planning variants
  run ideal "$layout"
done
backhaul='server.hierarchy.backhaul_latency_s=0.02 server.hierarchy.backhaul_rate_bps=1e9'
backhaul+=' server.hierarchy.backhaul_energy_j_per_bit=1e-8'
for k2 in 1 5 20; do
  layouts[reuse1-mean-k$k2]="${layouts[reuse1-mean]} $backhaul server.hierarchy.cloud_every_slots=$k2"
  layouts[reuse1-k$k2]="${layouts[reuse1]} $backhaul server.hierarchy.cloud_every_slots=$k2"
  run two_timescale "reuse1-mean-k$k2"
  run ideal "reuse1-k$k2"
done
python -m wflsim report "$out" --out "$out/report"
