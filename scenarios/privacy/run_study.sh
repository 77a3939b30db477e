#!/usr/bin/env bash
# The privacy study (docs/results.md, "Privacy on the radio (issue 48)"): scenarios/privacy/
# study.toml, 3 seeds per configuration, 17 configurations (51 runs):
#   * no privacy over the paper's dedicated bands, under the paper's controller (two_timescale)
#     and Ideal FL;
#   * at target epsilon 16 (delta 1e-5): central and local DP over the dedicated bands, and
#     over the air (AirComp) with the receiver's noise topped up to z (air_noise = "receiver")
#     or with privacy power control (air_power = "privacy"), each under the controller
#     (power_control = "controller") and Ideal FL (Cao et al.'s optimal powers);
#   * at target epsilon 64, the same under the controller only (central, local, both over the
#     air);
#   * over the air with the channel's noise only (air_noise = "channel_only", the epsilon the
#     channel alone gives) under the controller at a receiver noise N0 of -64, -54 and -44 dBm
#     (-44 dBm is above a receiver's thermal noise: a stand-in for a weaker signal).
#   bash scenarios/privacy/run_study.sh [OUT] [-- EXTRA...]
# EXTRA: more sweep options for every configuration, e.g. --workers 2.
# One sweep folder per configuration, OUT/<name> (default OUT runs/privacy-study), then the
# report over all of them in OUT/report (its Privacy section and privacy.csv: accuracy, energy
# and epsilon per configuration) and scenarios/aircomp/summarise.py's table of accuracy,
# energy, participation and energy to 80 % accuracy in OUT/report/summary.md, and figure.py's
# figure (one colour per configuration) in OUT/report/privacy_study.png; the script exits
# 1 when a run failed (each sweep's output names it).
set -euo pipefail
out=runs/privacy-study
extra=()
failed=0
if [[ $# -gt 0 && "$1" != "--" ]]; then out=$1; shift; fi
if [[ $# -gt 0 && "$1" != "--" ]]; then
  echo "run_study.sh: unexpected '$1': more sweep options go after --" >&2
  exit 2
fi
if [[ $# -gt 0 ]]; then shift; extra+=("$@"); fi
here=$(dirname "$0")
ctl='scheme.name="two_timescale"'
ideal='scheme.name="ideal"'
air_ctl='uplink.mode="aircomp" uplink.power_control="controller" privacy.mechanism="over_the_air"'
air_opt='uplink.mode="aircomp" uplink.power_control="optimal" privacy.mechanism="over_the_air"'
dp='privacy.clip_norm=0.5 privacy.delta=1e-5'
configs=(none-ctl none-ideal)
declare -A sets=([none-ctl]="$ctl" [none-ideal]="$ideal")
for eps in 16 64; do
  target="$dp privacy.target_epsilon=$eps"
  sets[central-ctl-e$eps]="$ctl $target privacy.mechanism=\"central\""
  sets[local-ctl-e$eps]="$ctl $target privacy.mechanism=\"local\""
  sets[air-ctl-e$eps]="$ctl $air_ctl $target"
  sets[air-ctl-pp-e$eps]="$ctl $air_ctl $target privacy.air_power=\"privacy\""
  sets[central-ideal-e$eps]="$ideal $target privacy.mechanism=\"central\""
  sets[local-ideal-e$eps]="$ideal $target privacy.mechanism=\"local\""
  sets[air-opt-e$eps]="$ideal $air_opt $target"
  sets[air-opt-pp-e$eps]="$ideal $air_opt $target privacy.air_power=\"privacy\""
done
configs+=(central-ctl-e16 local-ctl-e16 air-ctl-e16 air-ctl-pp-e16)
configs+=(central-ideal-e16 local-ideal-e16 air-opt-e16 air-opt-pp-e16)
for n0 in 64 54 44; do
  sets[air-ctl-channel-n0-$n0]="$ctl $air_ctl $dp privacy.air_noise=\"channel_only\" network.noise_dbm=-$n0"
  configs+=("air-ctl-channel-n0-$n0")
done
configs+=(central-ctl-e64 local-ctl-e64 air-ctl-e64 air-ctl-pp-e64)
for c in "${configs[@]}"; do
  args=()
  for kv in ${sets[$c]}; do args+=(--set "$kv"); done
  # a sweep with failed runs exits 1: go on with the others
  python -m wflsim sweep "$here/study.toml" "${args[@]}" "${extra[@]}" --out "$out/$c" --quiet \
    || failed=1
done
python -m wflsim report "$out" --out "$out/report"
python "$(dirname "$here")/aircomp/summarise.py" "$out" --target 0.8 --csv "$out/report/runs.csv" \
  --columns completed final_accuracy total_energy_j energy_per_round_j participation reached \
  energy_to_0.8_j >"$out/report/summary.md"
python "$here/figure.py" "$out" --out "$out/report/privacy_study.png"
exit "$failed"
