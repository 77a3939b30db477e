#!/usr/bin/env bash
# The ns-3 study (docs/results.md, "The uplink played by ns-3"): scenarios/ns3/study.toml's
# three schemes x 3 seeds over four uplink models on the same channel draws: Shannon OFDMA,
# OFDMA under the truncated Shannon bound, and ns-3's LTE with the controller planning on
# Shannon or on the truncated bound: 36 runs.
#   bash scenarios/ns3/run_study.sh [OUT] [-- EXTRA...]
# EXTRA: more sweep options for every configuration, e.g. --workers 2.
# One sweep folder per uplink model, OUT/<model> (default OUT runs/ns3-study); then
#   python scenarios/ns3/compare.py OUT
# The script exits 1 when a run failed (each sweep's output names it).
set -euo pipefail
out=runs/ns3-study
extra=()
failed=0
if [[ $# -gt 0 && "$1" != "--" ]]; then out=$1; shift; fi
if [[ $# -gt 0 && "$1" != "--" ]]; then
  echo "run_study.sh: unexpected '$1': more sweep options go after --" >&2
  exit 2
fi
if [[ $# -gt 0 ]]; then shift; extra+=("$@"); fi
here=$(dirname "$0")
declare -A models=(
  [ofdma-shannon]='uplink.mode="ofdma" channel.rate_model="shannon"'
  [ofdma-truncated]='uplink.mode="ofdma" channel.rate_model="truncated_shannon"'
  [ns3-plan-shannon]='uplink.mode="ns3_lte" channel.rate_model="shannon"'
  [ns3-plan-truncated]='uplink.mode="ns3_lte" channel.rate_model="truncated_shannon"'
)
for m in ofdma-shannon ofdma-truncated ns3-plan-shannon ns3-plan-truncated; do
  sets=()
  for kv in ${models[$m]}; do sets+=(--set "$kv"); done
  python -m wflsim sweep "$here/study.toml" "${sets[@]}" "${extra[@]}" --out "$out/$m" --quiet \
    || failed=1
done
exit "$failed"
