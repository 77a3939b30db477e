#!/usr/bin/env bash
# Accuracy when events interact (docs/results.md): scenarios/interactions/accuracy.toml as it is
# (the paper's model), with devices that come and go (sessions of 2 s = 20 slots on average,
# 1 s offline), with stragglers (background load: with probability 0.3 a device's computation
# takes 1 + Exp(1) times as long, unknown to the scheme) and on a shared OFDMA uplink (the
# controller planning on W / 30), two schemes, five seeds each; then the table with 95 %
# intervals over the seeds and the figure of accuracy against simulated time.
# Usage: bash scenarios/interactions/accuracy.sh [OUT_DIR] [WORKERS]   (about 5 minutes on 2 cores)
set -euo pipefail
OUT=${1:-runs/interactions/accuracy}
WORKERS=${2:-2}
SCENARIO=scenarios/interactions/accuracy.toml
sweep() {  # sweep NAME ARGS...
    local name=$1
    shift
    wflsim sweep "$SCENARIO" --workers "$WORKERS" --out "$OUT/$name" --quiet "$@"
}
sweep paper
sweep churn --set availability.model='"markov"' \
    --set 'availability.online_s={dist="exponential", mean=2.0}' \
    --set 'availability.offline_s={dist="exponential", mean=1.0}'
sweep stragglers --set 'compute.jitter={model="background_load", probability=0.3, mean_extra=1.0}'
sweep ofdma --set uplink.mode='"ofdma"' --set uplink.planned_concurrent_uploads=30
python -m wflsim.analysis.stats "$OUT"/paper "$OUT"/churn "$OUT"/stragglers "$OUT"/ofdma \
    --over-seeds --columns final_accuracy,participation,available_rate,drop_rate,outage_rate,energy_per_device_slot_j,total_latency_s,mean_gamma
python scenarios/interactions/figure.py "$OUT" --out "$OUT/accuracy_vs_time.png"
