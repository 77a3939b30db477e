#!/usr/bin/env bash
# Tables (means over seeds with 95 % Student-t intervals) and figures of the channel studies run
# by run_studies.sh. Usage: bash scenarios/channel/summarise.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-runs/channel}
table() {  # table TITLE ARGS...
    echo "## $1"
    shift
    python -m wflsim.analysis.channel "$@"
    echo
}
table "CSI error" "$OUT/csi_error" --by csi_error_variance --figures "$OUT/figures"
table "CSI delay" "$OUT/csi_delay" --by csi_delay_slots --figures "$OUT/figures"
table "CSI margin (target outage nan: the paper's rule)" "$OUT/csi_margin" "$OUT/csi_margin_paper" \
    --by csi_error_variance csi_target_outage
table "Rician fading" "$OUT/fading_rician" --by k_db --figures "$OUT/figures"
table "Nakagami-m fading" "$OUT/fading_nakagami" --by m --figures "$OUT/figures"
table "Time correlation by mobility" "$OUT"/corr_* --by correlation speed_mps
table "Replay: paired differences against two_timescale" "$OUT"/replay/replayed-s* \
    --by replay --paired two_timescale
table "Accuracy under CSI error (digits, training)" "$OUT/csi_training" \
    --by csi_error_variance --figures "$OUT/figures"
