"""What per-device privacy accounting costs (``wflsim.sim.privacy.accounting``): ``N`` devices
for ``T`` server steps, each step composing one Gaussian event for a random 60 % of the devices
(every device under sampling, as amplification composes) and reading every device's epsilon, as
the engine's privacy ledger does after each applied update.

The devices' multipliers take ``--groups`` distinct values (a device keeps its own, as under
central noise with fixed weights). Variants: ``rdp`` and ``pld``, without sampling and with
Poisson sampling ``q`` (``rdp_sampled``, ``pld_sampled``). The first repetition of each includes
filling the module's caches (the subsampled RDP and PLD of each distinct ``(q, z)``), so run with
``--warmup 0`` to see a run's whole cost.

    python benchmarks/privacy_accounting.py --warmup 0 --reps 1     # N = 100, T = 1,000
"""

from __future__ import annotations

import functools

import _common
import numpy as np

from wflsim.sim.privacy.accounting import DeviceAccountant


def work(kind: str, q: float | None, devices: int, steps: int, groups: int) -> float | None:
    """One run of ``steps`` steps of composing and reading epsilon (timed by the caller)."""
    rng = np.random.default_rng(0)
    z = np.array([1.0, 1.5, 2.0, 3.0, 5.0, 8.0])[np.arange(devices) % groups]
    acc = DeviceAccountant(devices, 1e-5, kind)  # type: ignore[arg-type]
    for _ in range(steps):
        ids = np.arange(devices) if q is not None else np.flatnonzero(rng.random(devices) < 0.6)
        acc.compose(ids, z[ids], sampling_probability=q)
        acc.epsilon()
    return None


def main(argv: list[str] | None = None) -> None:
    p = _common.parser(__doc__, reps=1, warmup=0, seed=False, quick={"devices": 20, "steps": 50})
    p.add_argument("--devices", type=int, default=100)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--groups", type=int, default=3, choices=range(1, 7))
    p.add_argument("--q", type=float, default=0.1, help="sampling probability (sampled variants)")
    p.add_argument("--variants", nargs="+", default=["rdp", "pld", "rdp_sampled", "pld_sampled"])
    args = p.parse_args(argv)
    _common.print_header(
        "privacy_accounting: per-device RDP and PLD accounting", ("numpy", "dp-accounting")
    )
    variants = {
        name: functools.partial(
            work,
            name.split("_")[0],
            args.q if name.endswith("_sampled") else None,
            args.devices,
            args.steps,
            args.groups,
        )
        for name in args.variants
    }
    times = _common.interleaved(variants, args.reps, args.warmup)
    for name, values in times.items():
        med = _common.Stats(values).median
        print(
            f"{name}: {med:.3g} s for {args.devices} devices x {args.steps} steps "
            f"({med / args.steps * 1e3:.3g} ms per step)"
        )
    first = args.variants[0]
    per_step = [t / args.steps * 1e3 for t in times[first]]
    _common.headline(f"{first} accounting per step, {args.devices} devices", per_step, unit=" ms")


if __name__ == "__main__":
    main()
