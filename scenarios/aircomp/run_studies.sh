#!/usr/bin/env bash
# Issue 38's study: digital OFDMA against over-the-air aggregation (AirComp with truncated channel
# inversion at -125 dB, and with Cao et al.'s optimal powers) for 10, 30 and 100 devices, Ideal FL
# on the paper's MNIST CNN, 3 seeds each: 9 configurations, 27 runs.
#   bash scenarios/aircomp/run_studies.sh [OUT] [DATA_DIR] [-- EXTRA...]
# EXTRA: more sweep options for every configuration, e.g. --set learning.device=cuda --workers 3.
# One sweep folder per configuration, OUT/<uplink>-n<devices> (default OUT runs/aircomp-mnist),
# then the report over all of them in OUT/report.
set -euo pipefail
out=runs/aircomp-mnist
extra=()
if [[ $# -gt 0 && "$1" != "--" ]]; then out=$1; shift; fi
if [[ $# -gt 0 && "$1" != "--" ]]; then extra=(--data-dir "$1"); shift; fi
if [[ $# -gt 0 && "$1" != "--" ]]; then
  echo "run_studies.sh: unexpected '$1': more sweep options go after --" >&2
  exit 2
fi
if [[ $# -gt 0 ]]; then shift; extra+=("$@"); fi
here=$(dirname "$0")
declare -A uplinks=(
  [ofdma]='uplink.mode="ofdma"'
  [aircomp-trunc]='uplink.mode="aircomp" uplink.power_control="truncated_inversion" uplink.threshold_gain_db=-125.0'
  [aircomp-opt]='uplink.mode="aircomp" uplink.power_control="optimal"'
)
for n in 10 30 100; do
  for up in ofdma aircomp-trunc aircomp-opt; do
    sets=(--set "network.num_devices=$n")
    for kv in ${uplinks[$up]}; do sets+=(--set "$kv"); done
    # OFDMA: the scheme's p_min for the share of the band it will get (n uploads at once)
    if [[ $up == ofdma ]]; then sets+=(--set "uplink.planned_concurrent_uploads=$n"); fi
    python -m wflsim sweep "$here/mnist.toml" "${sets[@]}" "${extra[@]}" \
      --out "$out/$up-n$n" --quiet
  done
done
python -m wflsim report "$out" --out "$out/report"
