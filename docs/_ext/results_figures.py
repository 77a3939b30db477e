"""The figures of ``docs/results.md``, made by the docs build from small runs.

Every ``##`` study section of ``docs/results.md`` shows at least one figure, a MyST ``{figure}``
directive that names ``_figures/<name>.png``. This Sphinx extension makes those files at
``builder-inited``: for each figure of :data:`FIGURES` it runs its small sweeps (the study's own
scenario, shrunk: fewer devices, frames and seeds, network-only where the figure is network-side,
learning on scikit-learn's ``digits`` where it is accuracy, so that the build needs no dataset
download) and draws them with the project's own figure code (``wflsim report``'s figures, or the
study's script in ``scenarios/``). The caption in ``results.md`` says what small run made the
figure (:attr:`ResultFigure.small`) and the command of the full study
(:attr:`ResultFigure.full`); ``tests/test_results_figures.py`` checks that both are there,
word for word.

Cache: ``docs/_figures/`` (gitignored). A sweep's runs are kept under ``runs/<digest>/``, the
digest of the sweep (scenario file, grid, seeds, overrides) and of the code (the package's
version and every source file of the package and of ``scenarios/``); a figure is redrawn when
the digest of its sweeps, of the code or of this file changes. A cold build runs every sweep (on
``WFLSIM_DOCS_WORKERS`` processes, default: the CPUs, at most 4); a rebuild with nothing changed
reads the digests only. A run that fails fails the build (``ExtensionError``, naming the sweep
and the run's error).

``python docs/_ext/results_figures.py [NAME ...]`` makes the figures without Sphinx.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: The folder the figures and the runs' cache go to (gitignored; excluded from the sources).
OUT_DIR = ROOT / "docs" / "_figures"
#: The resolution of the PNGs (dots per inch).
DPI = 110

#: The ``##`` sections of results.md that report no study (how the studies after them were run).
NOT_STUDIES = ("Events that interact (issue 21): how these studies were run",)

#: A network-only run of the paper's MNIST setting (the controller sees only channels, queues and
#: budgets: the same numbers as with training, docs/results.md).
NETWORK_ONLY = ("learning.enabled=false", "learning.num_params=440812")
#: The digits MLP in place of MNIST (no download; seconds per run).
DIGITS = ('learning.dataset="digits"', 'learning.model="mlp"')


@dataclass(frozen=True)
class Sweep:
    """One small sweep: ``wflsim sweep SCENARIO --grid ... --seeds ... --set ...``.

    ``label`` names its folder among the figure's sweeps (the study scripts read sweep folders
    by name); ``needs`` is an external program the sweep cannot run without (``"ns3"``: run only
    with ``WFLSIM_DOCS_NS3=1`` where ns-3 is installed; the figure is drawn without this sweep
    otherwise, and its caption says so).
    """

    label: str
    scenario: str  # relative to the repository's root
    grid: tuple[str, ...] = ()
    seeds: str = "0-2"
    sets: tuple[str, ...] = ()
    needs: str | None = None

    def digest(self, code: str) -> str:
        """The sweep's cache key: its scenario file's bytes, grid, seeds, overrides and code."""
        h = hashlib.sha256(code.encode())
        h.update((ROOT / self.scenario).read_bytes())
        h.update(json.dumps([self.scenario, self.grid, self.seeds, self.sets]).encode())
        return h.hexdigest()[:20]


@dataclass(frozen=True)
class ResultFigure:
    """A figure of ``docs/results.md``: its sweeps, how it is drawn, and what its caption says.

    ``draw(folders, png)`` gets each sweep's run folder by label; ``small`` is the caption's
    sentence on the small run (devices, frames, seeds, schemes), ``full`` the command of the full
    study; both appear word for word in the figure's caption.
    """

    name: str
    section: str  # the start of the ## heading it belongs to
    sweeps: tuple[Sweep, ...]
    draw: Callable[[dict[str, Path], Path], None]
    small: str
    full: str
    alt: str = field(default="")


# -- drawing ---------------------------------------------------------------------------------


def _script(relpath: str) -> ModuleType:
    """A study script of ``scenarios/`` imported as a module (its functions reused, not copied)."""
    path = ROOT / relpath
    name = "results_figures_" + relpath.replace("/", "_").removesuffix(".py")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _close_all() -> None:
    import matplotlib.pyplot as plt

    plt.close("all")


def report(slug: str) -> Callable[[dict[str, Path], Path], None]:
    """Draw ``wflsim report``'s figure ``slug`` from all the figure's sweeps together."""

    def draw(folders: dict[str, Path], png: Path) -> None:
        from wflsim.analysis.report import report_figures

        parent = _common_parent(folders)
        figures = report_figures(parent, only=[slug])
        if slug not in figures:
            raise RuntimeError(f"wflsim report draws no {slug} from {parent}")
        figures[slug].savefig(png, dpi=DPI)

    return draw


def _common_parent(folders: dict[str, Path]) -> Path:
    """The folder that holds a figure's sweeps (each sweep's folder is hard-linked under it)."""
    parents = {p.parent for p in folders.values()}
    assert len(parents) == 1, parents
    return parents.pop()


def script_main(relpath: str, *args: str) -> Callable[[dict[str, Path], Path], None]:
    """Draw with a study script's ``main``: ``main([FOLDER, *args, "--out", PNG])``, where
    FOLDER is the folder holding the figure's sweeps by label; ``{label}`` in ``args`` is that
    sweep's folder."""

    def draw(folders: dict[str, Path], png: Path) -> None:
        rest = [a.format(**{k: str(v) for k, v in folders.items()}) for a in args]
        argv = rest if args else [str(_common_parent(folders))]
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # "wrote ...": the build says it
                code = _script(relpath).main([*argv, "--out", str(png)])
        finally:
            _close_all()
        if code not in (0, None):
            raise RuntimeError(f"{relpath} exited {code}")

    return draw


def ns3_outcomes(folders: dict[str, Path], png: Path) -> None:
    """The ns-3 study's outcome figure (``scenarios/ns3/compare.py``) from the models run."""
    compare = _script("scenarios/ns3/compare.py")
    runs = compare.runs_of(_common_parent(folders))
    cols = ["outage_rate", "energy_per_device_slot_j", "participation", "final_accuracy"]
    table = compare.over_seeds(compare.outcomes(runs), cols)
    try:
        compare.figure_outcomes(table, png)
    finally:
        _close_all()


# -- the figures -----------------------------------------------------------------------------

_V = ("scheme.name=two_timescale,only_pc", "scheme.V=10,100,1000")
_PAPER_NET = (*NETWORK_ONLY, "network.num_devices=10", "run.frames=5")
_ACC = "scenarios/interactions/accuracy.toml"
_ACC_SETS = ("network.num_devices=10", "run.frames=3")
_NONIID = ('learning.partition="dirichlet"', "learning.dirichlet_alpha=0.3")
_REUSE1 = ("cells.rings=1", "cells.reuse_factor=1")
_REUSE3 = ("cells.rings=1", "cells.reuse_factor=3")
_MEAN_I = 'cells.plan_on="mean_interference"'
#: The heuristic baselines' small runs (two figures draw them).
_BASELINES = Sweep(
    "baselines",
    _ACC,
    ("scheme.name=two_timescale,only_pc,only_pf,ideal,random_freezing",),
    "0-2",
    (*_ACC_SETS, *_NONIID),
)
_SMALL_ACC = "Small run: digits MLP, 10 devices, 3 frames (60 slots)"
_SMALL_NET = "Small run: network-only, 10 devices, 5 frames (100 slots)"

FIGURES: dict[str, ResultFigure] = {
    f.name: f
    for f in (
        ResultFigure(
            "impact_of_v",
            "Impact of V",
            (Sweep("v", "scenarios/paper/mnist_noniid.toml", _V, sets=_PAPER_NET),),
            report("impact_of_v"),
            f"{_SMALL_NET}, seeds 0-2, Proposed and Only-PC at V = 10, 100, 1000.",
            "bash scenarios/paper/network_figures.sh runs/paper/network 1 0-9",
        ),
        ResultFigure(
            "time_evolution",
            "Time evolution",
            (
                Sweep(
                    "time",
                    "scenarios/paper/mnist_noniid.toml",
                    ("scheme.name=two_timescale,only_pc,only_pf,ideal",),
                    sets=_PAPER_NET,
                ),
            ),
            report("time_evolution"),
            f"{_SMALL_NET}, seeds 0-2, Proposed, Only-PC, Only-PF and Ideal FL at V = 100.",
            "bash scenarios/paper/network_figures.sh runs/paper/network 1 0-9",
        ),
        ResultFigure(
            "impact_of_energy_budget",
            "Impact of the energy budget",
            (
                Sweep(
                    "budget",
                    "scenarios/paper/mnist_noniid.toml",
                    ("scheme.name=two_timescale,only_pc", "devices.energy_budget_j=0.25,0.35,0.45"),
                    sets=_PAPER_NET,
                ),
            ),
            report("impact_of_energy_budget"),
            f"{_SMALL_NET}, seeds 0-2, Proposed and Only-PC at E_bar = 0.25, 0.35, 0.45 J.",
            "bash scenarios/paper/network_figures.sh runs/paper/network 1 0-9",
        ),
        ResultFigure(
            "sota_accuracy",
            "The state of the art",
            (
                Sweep(
                    "sota",
                    _ACC,
                    ("scheme.name=two_timescale,topk_ef,pruning,fedhq,fjord",),
                    "0-1",
                    (*_ACC_SETS, *_NONIID),
                ),
            ),
            report("accuracy_vs_energy"),
            f"{_SMALL_ACC}, Dirichlet(0.3), seeds 0-1, Proposed, Top-k EF, pruning, FedHQ and "
            "FjORD.",
            "wflsim sweep scenarios/paper/sota_mnist_noniid.toml --grid "
            "scheme.name=two_timescale,topk_ef,fedhq,pruning,fjord,random_freezing --seeds 0-2 "
            "--out runs/paper/sota_mnist_noniid_400",
        ),
        ResultFigure(
            "baselines_accuracy",
            "Test accuracy with three seeds",
            (_BASELINES,),
            report("accuracy_vs_latency"),
            f"{_SMALL_ACC}, Dirichlet(0.3), seeds 0-2, Proposed, Only-PC, Only-PF, Ideal FL and "
            "random freezing.",
            "wflsim sweep scenarios/paper/sota_mnist_noniid.toml --grid "
            "scheme.name=only_pc,only_pf,ideal,random_freezing --seeds 0-2 --set run.frames=3 "
            "--out runs/paper/sota_mnist_noniid_v2/more",
        ),
        ResultFigure(
            "baselines_energy",
            "Test accuracy with training, one seed",
            (_BASELINES,),
            report("accuracy_vs_energy"),
            f"{_SMALL_ACC}, Dirichlet(0.3), seeds 0-2, Proposed, Only-PC, Only-PF, Ideal FL and "
            "random freezing (the runs of the figure above).",
            "bash scenarios/paper/time_evolution.sh data runs/paper/mnist_noniid",
        ),
        ResultFigure(
            "csi_margin",
            "Channels beyond the paper's",
            (
                Sweep(
                    "margin",
                    "scenarios/channel/csi_margin.toml",
                    (
                        "scheme.name=two_timescale",
                        "channel.csi.error_variance=0.01,0.1,0.4",
                        "scheme.csi_margin.target_outage=0.01,0.05,0.2",
                    ),
                    "0-1",
                    ("network.num_devices=10", "run.frames=5"),
                ),
                Sweep(
                    "paper",
                    "scenarios/channel/csi_error.toml",
                    ("scheme.name=two_timescale", "channel.csi.error_variance=0.01,0.1,0.4"),
                    "0-1",
                    ("network.num_devices=10", "run.frames=5"),
                ),
            ),
            script_main("scenarios/channel/margin_tradeoff.py", "{margin}", "{paper}"),
            f"{_SMALL_NET}, seeds 0-1, Proposed at e2 = 0.01, 0.1 and 0.4, margins q = 0.01, "
            "0.05, 0.2.",
            "wflsim sweep scenarios/channel/csi_margin.toml --out runs/channel/csi_margin",
        ),
        ResultFigure(
            "shared_uplink",
            "A shared uplink",
            (
                Sweep(
                    "uplink",
                    "scenarios/uplink/shared_uplink.toml",
                    ("uplink.mode=dedicated,ofdma,tdma", "scheme.name=two_timescale,ideal"),
                    sets=("network.num_devices=10", "run.frames=5"),
                ),
            ),
            report("study_axes"),
            f"{_SMALL_NET}, seeds 0-2, Proposed and Ideal FL on a dedicated, OFDMA and TDMA "
            "uplink.",
            "wflsim sweep scenarios/uplink/shared_uplink.toml --out runs/uplink/shared_uplink",
        ),
        ResultFigure(
            "churn",
            "Devices that come and go",
            (
                Sweep(
                    "churn",
                    "scenarios/churn/churn.toml",
                    ("scheme.name=two_timescale,only_pc,ideal", "availability.online_s.mean=40,8"),
                    sets=("network.num_devices=10", "run.frames=5"),
                ),
            ),
            report("participation_and_latency"),
            f"{_SMALL_NET}, seeds 0-2, Proposed, Only-PC and Ideal FL, sessions of 40 s and "
            "8 s on average.",
            "wflsim sweep scenarios/churn/churn.toml --out runs/churn/markov",
        ),
        ResultFigure(
            "stragglers",
            "Stragglers",
            (
                Sweep(
                    "load",
                    "scenarios/stragglers/background_load.toml",
                    seeds="0-1",
                    sets=("network.num_devices=10", "run.frames=5"),
                ),
            ),
            report("study_axes"),
            f"{_SMALL_NET}, seeds 0-1, the scenario's grid (load probability 0, 0.1, 0.3; "
            "known or not).",
            "wflsim sweep scenarios/stragglers/background_load.toml --out runs/stragglers/load",
        ),
        ResultFigure(
            "interactions_accuracy",
            "Accuracy when events interact",
            tuple(
                Sweep(label, _ACC, (), "0-2", ("run.frames=3", *extra))
                for label, extra in (
                    ("paper", ()),
                    (
                        "churn",
                        (
                            'availability.model="markov"',
                            'availability.online_s={dist="exponential", mean=2.0}',
                            'availability.offline_s={dist="exponential", mean=1.0}',
                        ),
                    ),
                    (
                        "stragglers",
                        (
                            'compute.jitter={model="background_load", probability=0.3, '
                            "mean_extra=1.0}",
                        ),
                    ),
                    ("ofdma", ('uplink.mode="ofdma"', "uplink.planned_concurrent_uploads=30")),
                )
            ),
            script_main("scenarios/interactions/figure.py"),
            "Small run: digits MLP, 30 devices, 3 frames (60 slots), seeds 0-2, Proposed and Ideal "
            "FL under each condition.",
            "bash scenarios/interactions/accuracy.sh runs/interactions/accuracy",
        ),
        ResultFigure(
            "staleness",
            "Stale updates",
            tuple(
                Sweep(label, "scenarios/async/digits.toml", (), "0-1", (*_ACC_SETS, *server))
                for label, server in (
                    ("sync", ('server.mode="sync"',)),
                    ("semi_sync", ('server.mode="semi_sync"',)),
                    (
                        "fedbuff5",
                        ('server.mode="async"', "server.buffer_size=5", "server.server_lr=0.5"),
                    ),
                )
            ),
            report("staleness"),
            f"{_SMALL_ACC}, seeds 0-1, Proposed and Ideal FL, synchronous, semi-synchronous "
            "and FedBuff (K = 5).",
            "bash scenarios/async/run_studies.sh digits runs/async-digits",
        ),
        ResultFigure(
            "strategies",
            "FL strategies",
            tuple(
                Sweep(
                    label,
                    "scenarios/strategies/mnist.toml",
                    (),
                    "0-1",
                    (*DIGITS, "network.num_devices=10", *strategy),
                )
                for label, strategy in (
                    ("fedavg", ('strategy.name="fedavg"',)),
                    ("fedprox", ('strategy.name="fedprox"', "strategy.mu=0.1")),
                    ("scaffold", ('strategy.name="scaffold"',)),
                    (
                        "fedadam",
                        (
                            'strategy.name="fedadam"',
                            "strategy.eta=0.01",
                            "strategy.b1=0.9",
                            "strategy.b2=0.99",
                            "strategy.tau=0.001",
                        ),
                    ),
                )
            ),
            report("accuracy_vs_latency"),
            f"{_SMALL_ACC}, seeds 0-1, Proposed, synchronous, dedicated uplink, FedAvg, FedProx, "
            "SCAFFOLD and FedAdam.",
            "bash scenarios/strategies/run_studies.sh runs/strategies-mnist DIR",
        ),
        ResultFigure(
            "cells",
            "Beyond one cell",
            tuple(
                Sweep(
                    f"{scheme}-{label}",
                    "scenarios/cells/mnist.toml",
                    (),
                    "0-1",
                    (*DIGITS, "network.num_devices=14", f'scheme.name="{scheme}"', *layout),
                )
                for scheme, label, layout in (
                    ("two_timescale", "one", ()),
                    ("two_timescale", "reuse1-mean", (*_REUSE1, _MEAN_I)),
                    ("two_timescale", "reuse3-mean", (*_REUSE3, _MEAN_I)),
                    ("ideal", "one", ()),
                    ("ideal", "reuse1", _REUSE1),
                    ("ideal", "reuse3", _REUSE3),
                )
            ),
            report("accuracy_vs_energy"),
            "Small run: digits MLP, 14 devices, 3 frames (60 slots), seeds 0-1, Proposed "
            "(planning on the mean interference) and Ideal FL in one cell and in 7 cells "
            "(reuse 1 and 3).",
            "bash scenarios/cells/run_studies.sh runs/cells-mnist DIR",
        ),
        ResultFigure(
            "aircomp",
            "Over the air",
            tuple(
                Sweep(
                    label,
                    "scenarios/aircomp/mnist.toml",
                    (),
                    "0-1",
                    (*DIGITS, "network.num_devices=10", "run.frames=3", *uplink),
                )
                for label, uplink in (
                    ("ofdma", ('uplink.mode="ofdma"', "uplink.planned_concurrent_uploads=10")),
                    (
                        "aircomp-trunc",
                        (
                            'uplink.mode="aircomp"',
                            'uplink.power_control="truncated_inversion"',
                            "uplink.threshold_gain_db=-125.0",
                        ),
                    ),
                    ("aircomp-opt", ('uplink.mode="aircomp"', 'uplink.power_control="optimal"')),
                )
            ),
            report("accuracy_vs_latency"),
            f"{_SMALL_ACC}, seeds 0-1, Ideal FL on digital OFDMA and on AirComp (truncated "
            "inversion, optimal powers).",
            "bash scenarios/aircomp/run_studies.sh runs/aircomp-mnist DATA_DIR",
        ),
        ResultFigure(
            "ns3",
            "The uplink played by ns-3",
            tuple(
                Sweep(
                    label,
                    "scenarios/ns3/study.toml",
                    (),
                    "0-2",
                    (
                        "network.num_devices=10",
                        "uplink.planned_concurrent_uploads=10",
                        "run.frames=4",
                        *model,
                    ),
                    "ns3" if label.startswith("ns3") else None,
                )
                for label, model in (
                    ("ofdma-shannon", ('uplink.mode="ofdma"', 'channel.rate_model="shannon"')),
                    (
                        "ofdma-truncated",
                        ('uplink.mode="ofdma"', 'channel.rate_model="truncated_shannon"'),
                    ),
                    ("ns3-plan-shannon", ('uplink.mode="ns3_lte"', 'channel.rate_model="shannon"')),
                    (
                        "ns3-plan-truncated",
                        ('uplink.mode="ns3_lte"', 'channel.rate_model="truncated_shannon"'),
                    ),
                )
            ),
            ns3_outcomes,
            "Small run: digits MLP, 10 devices, 4 frames (40 slots), seeds 0-2, Proposed, "
            "Only-PC and fixed power.",
            "bash scenarios/ns3/run_study.sh runs/ns3-study -- --workers 2",
        ),
        ResultFigure(
            "privacy",
            "Privacy on the radio",
            tuple(
                Sweep(
                    label,
                    "scenarios/privacy/study.toml",
                    (),
                    "0-1",
                    ("network.num_devices=10", "run.frames=3", *sets),
                )
                for label, sets in (
                    ("none-ctl", ()),
                    (
                        "central-ctl-e16",
                        (
                            "privacy.clip_norm=0.5",
                            "privacy.delta=1e-5",
                            "privacy.target_epsilon=16",
                            'privacy.mechanism="central"',
                        ),
                    ),
                    (
                        "local-ctl-e16",
                        (
                            "privacy.clip_norm=0.5",
                            "privacy.delta=1e-5",
                            "privacy.target_epsilon=16",
                            'privacy.mechanism="local"',
                        ),
                    ),
                    (
                        "air-ctl-e16",
                        (
                            "privacy.clip_norm=0.5",
                            "privacy.delta=1e-5",
                            "privacy.target_epsilon=16",
                            'uplink.mode="aircomp"',
                            'uplink.power_control="controller"',
                            'privacy.mechanism="over_the_air"',
                        ),
                    ),
                )
            ),
            report("privacy_tradeoffs"),
            f"{_SMALL_ACC}, seeds 0-1, Proposed without privacy and with central, local and "
            "over-the-air DP at epsilon 16.",
            "bash scenarios/privacy/run_study.sh runs/privacy-study -- --workers 2",
        ),
    )
}


# -- running ---------------------------------------------------------------------------------


def code_digest() -> str:
    """The digest of the code that makes the runs: the package's version and every source file
    of the package (``wflsim/`` and the ``sim/``, ``models/`` and ``analysis/`` it links to:
    ``.py``, ``.cc``, ``.toml``) and of ``scenarios/`` (scenarios and study scripts)."""
    from wflsim import __version__

    h = hashlib.sha256(__version__.encode())
    files: list[Path] = []
    for top in ("wflsim", "sim", "models", "analysis", "scenarios"):
        for suffix in ("py", "cc", "toml", "sh"):
            files += (ROOT / top).rglob(f"*.{suffix}")  # rglob does not follow wflsim's links
    for f in sorted(set(files)):
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:20]


def available(program: str | None) -> bool:
    """Whether ``program`` (a :attr:`Sweep.needs`) can run on this machine."""
    if program is None:
        return True
    if program == "ns3":  # opt-in: an ns-3 run of even 40 slots takes about 45 s
        if os.environ.get("WFLSIM_DOCS_NS3", "").strip() != "1":
            return False
        from wflsim.sim.errors import ScenarioError
        from wflsim.sim.radio.ns3 import build

        try:
            build.toolchain()
        except ScenarioError:
            return False
        return True
    raise ValueError(f"unknown program {program!r}")


def _run_sweep(sweep: Sweep, folder: str) -> list[str]:
    """Run ``sweep`` into ``folder`` in this process (a worker of the pool); returns the errors
    of the runs that did not complete."""
    import warnings

    import wflsim
    from wflsim.sim.errors import PlausibilityWarning

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # the studies' own settings, some deliberately implausible (a TDMA uplink planned as one)
    warnings.simplefilter("ignore", PlausibilityWarning)
    try:
        wflsim.sweep(
            ROOT / sweep.scenario,
            grid=list(sweep.grid) or None,
            seeds=sweep.seeds,
            out=folder,
            overrides=list(sweep.sets),
            workers=1,
            progress=False,
        )
    except Exception as err:  # as text: not every error pickles back (ScenarioError's fields)
        return [f"{type(err).__name__}: {err}"]
    manifest = json.loads((Path(folder) / "sweep.json").read_text())
    return [
        f"{name}: {p.get('error') or p.get('status')}"
        for name, p in manifest["points"].items()
        if p.get("status") != "completed"
    ]


class FigureError(RuntimeError):
    """A run or a drawing of the figures failed (the build fails with it)."""


def _env_workers() -> int:
    """``WFLSIM_DOCS_WORKERS`` (processes for the small runs), 0 where it is unset."""
    text = os.environ.get("WFLSIM_DOCS_WORKERS", "").strip()
    if not text:
        return 0
    if not text.isdigit() or int(text) < 1:
        raise FigureError(f"WFLSIM_DOCS_WORKERS={text!r}: give a whole number of processes >= 1")
    return int(text)


def make_figures(
    names: Sequence[str] | None = None,
    out_dir: Path = OUT_DIR,
    workers: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Make the figures ``names`` (all of :data:`FIGURES` by default) into ``out_dir``: run the
    sweeps not in the cache, then draw the figures whose digest changed. Returns the PNGs by
    name.

    Raises:
        FigureError: a sweep with a run that did not complete, or a figure that failed to draw.
    """
    chosen = [FIGURES[n] for n in (names or FIGURES)]
    code = code_digest()
    # a figure is redrawn when its runs or the code that draws it (this file too) change
    drawing = hashlib.sha256((code + Path(__file__).read_text()).encode()).hexdigest()
    runs = out_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    can = {s.needs: available(s.needs) for f in chosen for s in f.sweeps}
    todo: dict[str, Sweep] = {}
    for f in chosen:
        for s in f.sweeps:
            d = s.digest(code)
            if can[s.needs] and not (runs / d / "done").is_file():
                todo[d] = s
    started = time.monotonic()
    if todo:
        n = workers or _env_workers() or min(4, os.cpu_count() or 1)
        log(f"results figures: {len(todo)} small sweeps on {n} processes")
        for d in todo:
            shutil.rmtree(runs / d, ignore_errors=True)
        import multiprocessing as mp

        from wflsim.app.sweep import _worker_init  # workers that die with this process

        context = mp.get_context("spawn")
        with ProcessPoolExecutor(n, context, _worker_init, (os.getpid(), None)) as pool:
            futures = {
                d: pool.submit(_run_sweep, s, str(runs / d / "sweep")) for d, s in todo.items()
            }
            failed = []
            for d, fut in futures.items():
                try:
                    errors = fut.result()
                except Exception as err:  # a bad scenario or override: nothing ran
                    errors = [f"{type(err).__name__}: {err}"]
                if errors:
                    failed.append(f"{todo[d].scenario} ({todo[d].label}): {'; '.join(errors)}")
                else:
                    (runs / d / "done").write_text(json.dumps(todo[d].__dict__) + "\n")
        if failed:
            raise FigureError("results figures: runs failed: " + " | ".join(failed))
        log(f"results figures: sweeps done in {time.monotonic() - started:.0f} s")
    if names is None:  # every figure: the runs no figure uses any more are removed
        used = {s.digest(code) for f in chosen for s in f.sweeps}
        for old in runs.iterdir():
            if old.name not in used:
                shutil.rmtree(old, ignore_errors=True)
    made: dict[str, Path] = {}
    for f in chosen:
        present = [s for s in f.sweeps if can[s.needs]]
        digests = [s.digest(code) for s in present]
        key = hashlib.sha256(json.dumps([drawing, f.name, digests]).encode()).hexdigest()[:20]
        png, stamp = out_dir / f"{f.name}.png", out_dir / f"{f.name}.digest"
        made[f.name] = png
        if png.is_file() and stamp.is_file() and stamp.read_text().strip() == key:
            continue
        view = out_dir / "views" / key
        shutil.rmtree(view, ignore_errors=True)
        view.mkdir(parents=True)
        folders = {}
        for s, d in zip(present, digests, strict=True):
            # hard links: the readers' rglob does not follow symbolic links
            shutil.copytree(runs / d / "sweep", view / s.label, copy_function=os.link)
            folders[s.label] = view / s.label
        t0 = time.monotonic()
        try:
            f.draw(folders, png)
        except Exception as err:
            raise FigureError(f"results figure {f.name}: {type(err).__name__}: {err}") from err
        finally:
            shutil.rmtree(view, ignore_errors=True)
        stamp.write_text(key + "\n")
        log(f"results figures: drew {f.name} in {time.monotonic() - t0:.1f} s")
    return made


# -- Sphinx ----------------------------------------------------------------------------------


def _exclude(app: Any, config: Any) -> None:
    """Keep the figures' folder (runs, manifests) out of the site's sources."""
    if "_figures" not in config.exclude_patterns:
        config.exclude_patterns.append("_figures")


def _builder_inited(app: Any) -> None:
    from sphinx.errors import ExtensionError
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    try:
        make_figures(log=logger.info)
    except FigureError as err:
        raise ExtensionError(str(err)) from err


def setup(app: Any) -> dict[str, Any]:
    """Register the extension: the figures are made when the builder starts."""
    app.connect("config-inited", _exclude)
    app.connect("builder-inited", _builder_inited)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    import resource

    started = time.monotonic()
    make_figures(sys.argv[1:] or None)
    cpu = sum(
        getattr(resource.getrusage(who), f)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for f in ("ru_utime", "ru_stime")
    )
    print(f"results figures: {time.monotonic() - started:.0f} s wall, {cpu:.0f} s CPU")
