#!/usr/bin/env bash
# Issue 35's study: FedAvg, FedProx (mu 0.1), SCAFFOLD and FedAdam (eta 0.01) under the paper's
# controller, synchronous rounds and FedBuff-5, on a dedicated band per device and on one shared
# OFDMA band (the controller planning each upload on W / 15, its share when all 15 upload), 3
# seeds each: 16 sweeps of 3 runs, 11 min on 2 busy cores (measured).
#   bash scenarios/strategies/run_studies.sh [OUT] [DATA_DIR]   # DATA_DIR: the MNIST folder
# One sweep folder per configuration, OUT/<uplink>/<strategy>-<server> (default OUT
# runs/strategies-mnist), then the report over all of them in OUT/report and one per uplink in
# OUT/<uplink>/report. FedBuff's server_lr = K / N (K = 5, N = 15) keeps the learning rate per
# applied update equal to sync's.
set -euo pipefail
out=${1:-runs/strategies-mnist}
extra=()
if [[ $# -ge 2 ]]; then extra=(--data-dir "$2"); fi
here=$(dirname "$0")
# one torch thread per run: the runs are small, and more threads only contend on a busy machine
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
declare -A strategies=(
  [fedavg]='strategy.name="fedavg"'
  [fedprox]='strategy.name="fedprox" strategy.mu=0.1'
  [scaffold]='strategy.name="scaffold"'
  [fedadam]='strategy.name="fedadam" strategy.eta=0.01 strategy.b1=0.9 strategy.b2=0.99 strategy.tau=0.001'
)
declare -A servers=(
  [sync]='server.mode="sync"'
  [async]='server.mode="async" server.buffer_size=5 server.server_lr=0.3333333'
)
declare -A uplinks=(
  [dedicated]='uplink.mode="dedicated"'
  [ofdma]='uplink.mode="ofdma" uplink.planned_concurrent_uploads=15'
)
for strategy in fedavg fedprox scaffold fedadam; do
  for server in sync async; do
    for uplink in dedicated ofdma; do
      sets=()
      for kv in ${strategies[$strategy]} ${servers[$server]} ${uplinks[$uplink]}; do
        sets+=(--set "$kv")
      done
      python -m wflsim sweep "$here/mnist.toml" "${sets[@]}" "${extra[@]}" \
        --out "$out/$uplink/$strategy-$server" --workers 1 --quiet
    done
  done
done
for uplink in dedicated ofdma; do
  python -m wflsim report "$out/$uplink" --out "$out/$uplink/report"
done
python -m wflsim report "$out" --out "$out/report"
