#!/usr/bin/env bash
# Time-evolution comparison of the paper (Figs. 3-4) on MNIST non-IID: the four schemes with the
# same seed (same positions, channels and partition), full paper settings (20 frames x 20 slots).
# Usage: bash scenarios/paper/time_evolution.sh [DATA_DIR] [OUT_DIR]
# Two queues of runs in parallel, one torch thread each (faster on 2 cores than one 2-thread run).
# Run it again after an interruption: finished runs are kept, killed ones resume (--resume).
set -euo pipefail
DATA=${1:-data}  # wflsim data fetch mnist puts MNIST in ./data
OUT=${2:-runs/paper/mnist_noniid}
mkdir -p "$OUT"
run() {
    if [ -f "$OUT/$1/.wflsim-run" ]; then  # a run of this script: continue it (or keep it, if completed)
        OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 wflsim run scenarios/paper/mnist_noniid.toml --data-dir "$DATA" \
            --set scheme.name="$1" --resume "$OUT/$1" --quiet
    else
        OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 wflsim run scenarios/paper/mnist_noniid.toml --data-dir "$DATA" \
            --set scheme.name="$1" --out "$OUT/$1" --quiet
    fi
}
( run ideal; run only_pc ) > "$OUT/queue_a.log" 2>&1 &
( run two_timescale; run only_pf ) > "$OUT/queue_b.log" 2>&1 &
wait
echo "done: $OUT"
