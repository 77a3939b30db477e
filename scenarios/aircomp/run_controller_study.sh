#!/usr/bin/env bash
# The second AirComp study: the paper's controller over the air against the paper's dedicated
# bands and digital OFDMA, and AirComp with optimal powers under Ideal FL, at a receiver noise
# N0 of -104 (the paper), -84, -64 and -44 dBm over the 10 MHz band; digits MLP, 30 devices,
# 3 seeds each: 16 configurations, 48 runs (embedded data: no files).
#   bash scenarios/aircomp/run_controller_study.sh [OUT] [-- EXTRA...]
# EXTRA: more sweep options for every configuration, e.g. --workers 2.
# One sweep folder per configuration, OUT/<uplink>_n0-<|N0| in dBm> (default OUT
# runs/aircomp-controller), then the report over all of them in OUT/report; the script exits 1
# when a run failed (each sweep's output names it).
set -euo pipefail
out=runs/aircomp-controller
extra=()
failed=0
if [[ $# -gt 0 && "$1" != "--" ]]; then out=$1; shift; fi
if [[ $# -gt 0 && "$1" != "--" ]]; then
  echo "run_controller_study.sh: unexpected '$1': more sweep options go after --" >&2
  exit 2
fi
if [[ $# -gt 0 ]]; then shift; extra+=("$@"); fi
here=$(dirname "$0")
declare -A uplinks=(
  [dedicated]='uplink.mode="dedicated"'
  [ofdma]='uplink.mode="ofdma" uplink.planned_concurrent_uploads=30'
  [aircomp-ctl]='uplink.mode="aircomp" uplink.power_control="controller"'
  [aircomp-opt]='uplink.mode="aircomp" uplink.power_control="optimal" scheme.name="ideal"'
)
for n0 in 104 84 64 44; do
  for up in dedicated ofdma aircomp-ctl aircomp-opt; do
    sets=(--set "network.noise_dbm=-$n0")
    for kv in ${uplinks[$up]}; do sets+=(--set "$kv"); done
    # a sweep with failed runs (training that diverges under the sum's noise) exits 1: go on
    python -m wflsim sweep "$here/controller.toml" "${sets[@]}" "${extra[@]}" \
      --out "$out/${up}_n0-$n0" --quiet || failed=1
  done
done
python -m wflsim report "$out" --out "$out/report"
exit "$failed"
