"""Runs labelled by strategy and uplink (issue 35's study): the labels, the runs table's
columns and variants, and one colour per series when every series is of one scheme."""

from __future__ import annotations

from matplotlib.colors import to_hex

from test_tidy import write_synthetic_run
from wflsim.analysis import figures as F
from wflsim.analysis import tidy
from wflsim.analysis.figures.common import _Series, one_scheme_colors


def test_strategy_label_names_the_strategy_with_its_parameters():
    """FedAvg alone, FedProx with mu, FedAdam with its server optimiser's parameters."""
    assert tidy.strategy_label({"name": "fedavg", "selection": {"rule": "all"}}) == "FedAvg"
    assert tidy.strategy_label({"name": "fedprox", "mu": 0.1}) == "FedProx (mu 0.1)"
    label = tidy.strategy_label(
        {"name": "fedadam", "eta": 0.01, "b1": 0.9, "b2": 0.99, "tau": 1e-3}
    )
    assert label == "FedAdam (b1 0.9; b2 0.99; eta 0.01; tau 0.001)"


def test_strategy_label_names_a_selection_rule_other_than_all():
    """A selection rule other than ``all`` joins the label with its k and d."""
    sel = {"rule": "power_of_choice", "k": 3, "d": None}
    assert tidy.strategy_label({"name": "scaffold", "selection": sel}) == (
        "SCAFFOLD (power_of_choice k=3)"
    )


def test_uplink_label_names_a_shared_band_and_the_planned_share():
    """Dedicated as is; OFDMA and TDMA in capitals, with k and the queue order if not default."""
    assert tidy.uplink_label({"mode": "dedicated", "planned_concurrent_uploads": 1}) == "dedicated"
    assert tidy.uplink_label({"mode": "ofdma", "planned_concurrent_uploads": 15}) == (
        "OFDMA (planned k 15)"
    )
    assert tidy.uplink_label({"mode": "tdma", "order": "edf"}) == "TDMA (edf)"


def test_runs_table_has_strategy_and_uplink_columns_and_folds_them_in_the_variant(tmp_path):
    """Two runs differing in strategy and uplink: their labels as columns and as the variant."""
    write_synthetic_run(tmp_path / "a", extra={"strategy": {"name": "fedavg"}})
    write_synthetic_run(
        tmp_path / "b",
        extra={
            "strategy": {"name": "fedprox", "mu": 0.1},
            "uplink": {"mode": "ofdma", "planned_concurrent_uploads": 2},
        },
    )
    runs = tidy.runs_table(tmp_path).set_index("run")
    assert runs.loc["a", "strategy"] == "FedAvg" and runs.loc["a", "uplink"] == "dedicated"
    assert runs.loc["b", "variant"] == "FedProx (mu 0.1), OFDMA (planned k 2)"


def test_one_scheme_colors_give_each_series_its_own_colour():
    """Series all of one scheme get distinct colours; series of several schemes get none."""
    one = [_Series(f"s{i}", "two_timescale", (i,), None) for i in range(16)]  # type: ignore[arg-type]
    colours = one_scheme_colors(one)
    assert len(set(colours.values())) == 16
    two = [_Series("a", "two_timescale", (), None), _Series("b", "ideal", (), None)]  # type: ignore[arg-type]
    assert one_scheme_colors(two) == {}


def test_accuracy_figure_colours_strategies_of_one_scheme_apart(tmp_path):
    """Accuracy against latency for two strategies of one scheme: two lines, two colours."""
    write_synthetic_run(tmp_path / "a", extra={"strategy": {"name": "fedavg"}})
    write_synthetic_run(tmp_path / "b", extra={"strategy": {"name": "scaffold"}})
    fig = F.accuracy_vs_latency(tidy.load(tmp_path, ["evaluations"]).evaluations)
    colours = {to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
    assert len(colours) == 2


def test_uplink_label_tells_aircomp_power_rules_apart():
    """AirComp's label names the power rule and the truncation threshold."""
    assert tidy.uplink_label({"mode": "aircomp"}) == "AirComp (truncated inversion)"
    assert (
        tidy.uplink_label(
            {"mode": "aircomp", "power_control": "truncated_inversion", "threshold_gain_db": -125.0}
        )
        == "AirComp (truncated inversion; threshold -125 dB)"
    )
    assert tidy.uplink_label({"mode": "aircomp", "power_control": "optimal"}) == (
        "AirComp (optimal powers)"
    )
    assert tidy.uplink_label({"mode": "aircomp", "power_control": "controller"}) == (
        "AirComp (controller)"
    )
