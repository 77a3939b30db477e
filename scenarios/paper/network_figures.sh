#!/usr/bin/env bash
# The paper's network-side figures (impact of V, time evolution of energy and cost, impact of the
# energy budget) for the MNIST and the CIFAR-10 settings, from network-only sweeps: the
# controller, channels, energy and queues do not depend on the training (see
# scenarios/paper/README.md), so no dataset is needed and everything runs in minutes on 2 cores.
# Usage: bash scenarios/paper/network_figures.sh [OUT_DIR] [WORKERS] [SEEDS]
# (SEEDS default 0-9: ten seeds per configuration, about 20 minutes on 2 cores.)
set -euo pipefail
OUT=${1:-runs/paper/network}
WORKERS=${2:-2}
SEEDS=${3:-0-9}

sweep() {  # sweep NAME SCENARIO NUM_PARAMS ARGS...
    local name=$1 scenario=$2 params=$3
    shift 3
    wflsim sweep "$scenario" --set learning.enabled=false --set learning.num_params="$params" \
        --workers "$WORKERS" --out "$OUT/$name" --quiet "$@"
    wflsim report "$OUT/$name"
}

for ds in mnist cifar10; do
    scenario=scenarios/paper/${ds}_noniid.toml
    if [ "$ds" = mnist ]; then params=440812; budgets=0.25,0.30,0.35,0.40,0.45,0.50
    else params=502538; budgets=0.6,0.7,0.8,0.9,1.0,1.1; fi
    # Impact of V: 100 frames (2,000 slots).
    sweep "${ds}_v" "$scenario" "$params" --grid scheme=two_timescale,only_pc,only_pf \
        --grid scheme.V=10,100,1000 --seeds "$SEEDS" --set run.frames=100
    # Time evolution of the average energy and cost: the paper's 20 frames, four schemes.
    sweep "${ds}_time" "$scenario" "$params" --grid scheme=two_timescale,only_pc,only_pf,ideal \
        --seeds "$SEEDS"
    # Impact of the energy budget E_bar (the same budget for every device), 50 frames.
    sweep "${ds}_budget" "$scenario" "$params" --grid scheme=two_timescale,only_pc,only_pf,ideal \
        --grid devices.energy_budget_j="$budgets" --seeds "$SEEDS" --set run.frames=50
done
echo "done: reports in $OUT/*/report/report.html"
