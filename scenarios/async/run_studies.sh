#!/usr/bin/env bash
# Issue 22's study: synchronous rounds, semi-synchronous rounds, FedAsync and FedBuff (buffers 5
# and 10) for the paper's controller and Ideal FL, 3 seeds, on one scenario of this folder.
#   bash scenarios/async/run_studies.sh digits [OUT]       # digits MLP, about 15 min on 2 cores
#   bash scenarios/async/run_studies.sh mnist [OUT] DIR    # MNIST CNN (DIR: the MNIST folder)
# One sweep folder per server configuration under OUT (default runs/async-<scenario>), then the
# report over all of them in OUT/report. server_lr = K / N (N = 30 devices) keeps the learning
# rate per applied update equal across buffer sizes K.
set -euo pipefail
name=${1:?usage: run_studies.sh digits|mnist [OUT] [DATA_DIR]}
out=${2:-runs/async-$name}
extra=()
if [[ $# -ge 3 ]]; then extra=(--data-dir "$3"); fi
here=$(dirname "$0")
declare -A servers=(
  [sync]='server.mode="sync"'
  [semi_sync]='server.mode="semi_sync"'
  [fedasync]='server.mode="async" server.buffer_size=1 server.server_lr=0.0333333'
  [fedbuff5]='server.mode="async" server.buffer_size=5 server.server_lr=0.1666667'
  [fedbuff10]='server.mode="async" server.buffer_size=10 server.server_lr=0.3333333'
)
for label in sync semi_sync fedasync fedbuff5 fedbuff10; do
  sets=()
  for kv in ${servers[$label]}; do sets+=(--set "$kv"); done
  python -m wflsim sweep "$here/$name.toml" "${sets[@]}" "${extra[@]}" --out "$out/$label" --quiet
done
python -m wflsim report "$out" --out "$out/report"
