#!/usr/bin/env bash
# The channel studies of scenarios/channel/README.md: network-only sweeps of the paper's MNIST
# network setting (minutes on 2 cores) and short digits training runs (about 15 minutes).
# Usage: bash scenarios/channel/run_studies.sh [OUT_DIR] [WORKERS]
# Then: bash scenarios/channel/summarise.sh [OUT_DIR] prints the tables and writes the figures.
set -euo pipefail
OUT=${1:-runs/channel}
WORKERS=${2:-2}
HERE=scenarios/channel

sweep() {  # sweep NAME SCENARIO ARGS...
    local name=$1 scenario=$2
    shift 2
    wflsim sweep "$HERE/$scenario" --workers "$WORKERS" --out "$OUT/$name" --quiet "$@"
}

# Robustness to CSI error and delay (5 seeds each).
sweep csi_error csi_error.toml
sweep csi_delay csi_delay.toml
# The CSI margin against the paper's rule on the same channels (5 seeds each).
sweep csi_margin csi_margin.toml
sweep csi_margin_paper csi_error.toml --grid scheme.name=two_timescale,only_pc \
    --grid channel.csi.error_variance=0.01,0.1,0.4
# Non-Rayleigh fading (the controller assumes Rayleigh); Nakagami m = 1 is the Rayleigh reference.
sweep fading_rician fading_rician.toml
sweep fading_nakagami fading_nakagami.toml
# Time correlation by mobility, against i.i.d. slots.
sweep corr_walking fading_correlation.toml
sweep corr_slow fading_correlation.toml --set 'mobility.speed_mps=[0.02,0.05]'
sweep corr_static fading_correlation.toml --set mobility.model=static
sweep corr_iid fading_correlation.toml --set mobility.model=static --set channel.fading=rayleigh
# Counterfactual replay: record each seed's channel once, replay every scheme on it.
for s in 0 1 2 3 4; do
    wflsim run "$HERE/replay.toml" --seed "$s" --out "$OUT/replay/record-s$s" --overwrite --quiet
    sweep "replay/replayed-s$s" replay.toml --seeds "$s" \
        --grid scheme=two_timescale,only_pc,only_pf,ideal,fixed_power \
        --set channel.record=false --set "channel.replay=$PWD/$OUT/replay/record-s$s"
done
# Accuracy under CSI error, with training (digits, 50 slots, 3 seeds).
sweep csi_training csi_training.toml
