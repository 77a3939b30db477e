"""Named, per-device random streams derived from one seed (no global random state).

Every random quantity of a run comes from a :class:`numpy.random.Generator` built from
``SeedSequence(seed, spawn_key=(stream_id, device))``. A device's draws depend only on the run
seed, the stream name and the device index, so adding a device never shifts the draws of the
others, and two schemes run with the same seed see the same channels, positions and samples
(common random numbers).
"""

from __future__ import annotations

import numpy as np

#: Stable numeric ids of the named streams. Never renumber: traces of old runs depend on them.
STREAM_IDS: dict[str, int] = {
    "device_params": 1,  # per-device parameters drawn from distributions
    "placement": 2,  # initial positions
    "mobility": 3,  # random-waypoint destinations, speeds and pauses
    "fading": 4,  # small-scale fading g ~ Exp(1)
    "partition": 5,  # data partition across devices (one stream, not per device)
    "sampling": 6,  # per-device minibatch sampling
    "torch_init": 7,  # model initialisation (one integer seed for torch)
    "scheme": 8,  # randomness a scheme may need (e.g. stochastic quantisation)
}

_GLOBAL = 2**31 - 1  # spawn-key slot used for streams that are not per device


class Streams:
    """Factory of independent generators for one run seed.

    >>> s = Streams(0)
    >>> a = s.device("fading", 3).standard_exponential(2)
    >>> b = Streams(0).device("fading", 3).standard_exponential(2)
    >>> bool((a == b).all())
    True
    """

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise ValueError("seed must be >= 0")
        self.seed = int(seed)

    def _seq(self, name: str, index: int, *sub: int) -> np.random.SeedSequence:
        try:
            sid = STREAM_IDS[name]
        except KeyError:
            raise KeyError(f"unknown random stream {name!r}; known: {sorted(STREAM_IDS)}") from None
        return np.random.SeedSequence(self.seed, spawn_key=(sid, int(index), *map(int, sub)))

    def device(self, name: str, device: int, *sub: int) -> np.random.Generator:
        """Generator of stream ``name`` for device ``device`` (0-based).

        ``sub`` adds further spawn-key components (e.g. the index of a per-device parameter), so
        that independent quantities of one device never share a generator.
        """
        return np.random.Generator(np.random.PCG64(self._seq(name, device, *sub)))

    def devices(self, name: str, num_devices: int) -> list[np.random.Generator]:
        """One generator per device for stream ``name``."""
        return [self.device(name, n) for n in range(num_devices)]

    def global_(self, name: str) -> np.random.Generator:
        """Generator of a stream that is not per device (e.g. the data partition)."""
        return np.random.Generator(np.random.PCG64(self._seq(name, _GLOBAL)))

    def int_seed(self, name: str, index: int = _GLOBAL) -> int:
        """A 63-bit integer seed for libraries with their own generators (torch)."""
        state = self._seq(name, index).generate_state(2, dtype=np.uint32)
        return int((int(state[0]) << 31) ^ int(state[1])) & (2**63 - 1)
