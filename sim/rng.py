"""Named, per-device random streams derived from one seed (no global random state).

Every random quantity of a run comes either from a :class:`numpy.random.Generator` built from
``SeedSequence(seed, spawn_key=(stream_id, device, ...))`` or, for quantities drawn afresh every
slot (fading), from a counter-based :class:`KeyedStream`: a pure function of
``(seed, stream, device, slot, draw)``. A device's draws depend only on the run seed, the stream
name and the device index (and the slot), so adding a device never shifts the draws of the
others, two schemes run with the same seed see the same channels, positions and samples (common
random numbers), and a keyed quantity needs no generator state to be saved or replayed.

The keyed streams' Philox words are computed by one of two backends that give the same bits: the
compiled loops of :mod:`wflsim.sim.rng_compiled` (numba; one pass over the devices, 8-13 times
faster than numpy at 100,000 devices) or the pure-numpy :func:`philox4x64` below (the reference).
``$WFLSIM_RNG_BACKEND`` chooses at the first keyed draw of a process: ``auto`` (the default:
numpy for the first :data:`AUTO_SWITCH_WORDS` words, then compiled when numba can be imported
and compiles, else numpy still), ``compiled`` (an ImportError without numba) or ``numpy``;
:func:`set_backend` changes it in a running process. Only the integer words and their exact
conversion to ``[0, 1)`` are compiled; every transcendental function of a draw stays numpy's, so
results do not depend on the backend (the tests compare both bit for bit, golden runs included).
"""

from __future__ import annotations

import math
import os
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from . import fmath

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
    "freeze_choice": 9,  # which parameters a device freezes when chosen at random, per frame
    "quantise": 10,  # stochastic rounding of a device's quantised upload, per slot
    "shadowing": 11,  # log-normal shadowing innovations, per device and frame
    "csi": 12,  # channel-estimation errors of imperfect CSI, per device and slot
    "los_state": 13,  # the spatially correlated LOS / NLOS state of 3GPP path loss, per frame
    "compute_jitter": 14,  # the slowdown of local computation, per device and slot
    "availability": 15,  # online and offline periods, per device and period
    "selection": 16,  # which candidates a [strategy.selection] rule asks, per device and slot
    "selection_pool": 17,  # the d candidates power_of_choice draws and probes, per device and slot
    "probe_sampling": 18,  # the minibatch of a power_of_choice loss probe, per device and slot
    "cell_fading": 19,  # [cells]: fast fading of a device's links to the other sites, per slot
    "backhaul": 20,  # [server.hierarchy]: backhaul latencies drawn per cloud round
    "aircomp_noise": 21,  # [uplink] mode = "aircomp": the receiver's noise on the sum, per slot
    "ns3": 22,  # [uplink] mode = "ns3_lte": ns-3's seed (its run number is the frame)
    "privacy_noise": 23,  # [privacy]: the learner's Gaussian noise (central, local, clipped count)
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

    def device_uniforms(self, name: str, num_devices: int, count: int, *sub: int) -> F64:
        """The first ``count`` uniform doubles of every device's generator, ``(N, count)``.

        Bit for bit ``[self.device(name, n, *sub).random(count) for n in range(N)]``, computed
        for all devices at once (:func:`seed_states`, :func:`pcg64_doubles`): about 60 times
        faster, which is what makes a million devices cheap to set up."""
        try:
            sid = STREAM_IDS[name]
        except KeyError:
            raise KeyError(f"unknown random stream {name!r}; known: {sorted(STREAM_IDS)}") from None
        states = seed_states(self.seed, (sid,), np.arange(num_devices, dtype=np.uint64), sub)
        return pcg64_doubles(states, count)

    def global_(self, name: str) -> np.random.Generator:
        """Generator of a stream that is not per device (e.g. the data partition)."""
        return np.random.Generator(np.random.PCG64(self._seq(name, _GLOBAL)))

    def int_seed(self, name: str, index: int = _GLOBAL) -> int:
        """A 63-bit integer seed for libraries with their own generators (torch)."""
        state = self._seq(name, index).generate_state(2, dtype=np.uint32)
        return int((int(state[0]) << 31) ^ int(state[1])) & (2**63 - 1)

    def ns3_seed(self) -> int:
        """ns-3's seed (``RngSeedManager::SetSeed``, 1 .. 2**31 - 1) for this run's seed."""
        return 1 + self.int_seed("ns3") % (2**31 - 1)

    def keyed(self, name: str) -> KeyedStream:
        """The counter-based stream ``name``: draws keyed by ``(device, slot, draw)``."""
        key = self._seq(name, _GLOBAL).generate_state(2, dtype=np.uint64)
        return KeyedStream(key)


# ------------------------------------------------------- many devices' generators at once

F64 = NDArray[np.float64]

# numpy.random.SeedSequence's hashing constants (O'Neill's seed_seq_fe; numpy's bit_generator.pyx)
_SS_INIT_A, _SS_MULT_A = np.uint32(0x43B0D7E5), np.uint32(0x931E8875)
_SS_INIT_B, _SS_MULT_B = np.uint32(0x8B51F9DD), np.uint32(0x58F38DED)
_SS_MIX_L, _SS_MIX_R = np.uint32(0xCA01F9DD), np.uint32(0x4973F715)
_SS_SHIFT = np.uint32(16)
_SS_POOL = 4
# PCG64's 128-bit LCG multiplier (PCG_DEFAULT_MULTIPLIER_128), high and low words
_PCG_MULT_HI, _PCG_MULT_LO = np.uint64(0x2360ED051FC65DA4), np.uint64(0x4385DF649FCCF645)


def _uint32_words(value: int) -> list[int]:
    """An integer as SeedSequence reads it: little-endian 32-bit words (``[0]`` for 0)."""
    if value < 0:
        raise ValueError("SeedSequence words must be >= 0")
    words = []
    while value:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
    return words or [0]


def seed_states(
    seed: int, prefix: tuple[int, ...], index: NDArray[np.uint64], suffix: tuple[int, ...] = ()
) -> NDArray[np.uint64]:
    """``SeedSequence(seed, spawn_key=(*prefix, i, *suffix)).generate_state(4, uint64)`` for
    every ``i`` of ``index`` (each below 2^32), ``(N, 4)``: numpy's algorithm (entropy pool of
    four 32-bit words, hash-mixed), vectorised over ``i``."""
    index = np.asarray(index, dtype=np.uint64)
    if index.size and int(index.max()) >= 2**32:
        raise ValueError("device indices must be below 2^32")
    n = index.shape[0]
    run = _uint32_words(int(seed))
    run += [0] * (_SS_POOL - len(run))  # a spawn key pads the run entropy to the pool size
    words: list[NDArray[np.uint32]] = [np.full(n, w, np.uint32) for w in run]
    for k in prefix:
        words += [np.full(n, w, np.uint32) for w in _uint32_words(int(k))]
    words.append(index.astype(np.uint32))
    for k in suffix:
        words += [np.full(n, w, np.uint32) for w in _uint32_words(int(k))]
    const = [_SS_INIT_A]

    def hashmix(v: NDArray[np.uint32]) -> NDArray[np.uint32]:
        v = v ^ const[0]
        const[0] = np.uint32(const[0] * _SS_MULT_A)
        v = v * const[0]
        return v ^ (v >> _SS_SHIFT)

    def mix(x: NDArray[np.uint32], y: NDArray[np.uint32]) -> NDArray[np.uint32]:
        r = _SS_MIX_L * x - _SS_MIX_R * y
        return r ^ (r >> _SS_SHIFT)

    with np.errstate(over="ignore"):
        pool = [hashmix(words[i]) for i in range(_SS_POOL)]
        for src in range(_SS_POOL):
            for dst in range(_SS_POOL):
                if src != dst:
                    pool[dst] = mix(pool[dst], hashmix(pool[src]))
        for src in range(_SS_POOL, len(words)):
            for dst in range(_SS_POOL):
                pool[dst] = mix(pool[dst], hashmix(words[src]))
        hb = _SS_INIT_B
        out32 = []
        for i in range(8):
            v = pool[i % _SS_POOL] ^ hb
            hb = np.uint32(hb * _SS_MULT_B)
            v = v * hb
            out32.append(v ^ (v >> _SS_SHIFT))
    halves = [
        out32[2 * k].astype(np.uint64) | (out32[2 * k + 1].astype(np.uint64) << _S32)
        for k in range(4)
    ]
    return np.stack(halves, axis=1)


def _pcg_step(s_hi: U64, s_lo: U64, i_hi: U64, i_lo: U64) -> tuple[U64, U64]:
    """One step of PCG64's LCG, ``state * MULT + inc`` modulo 2^128, on (high, low) words."""
    lo, hi = _mulhilo(_PCG_MULT_LO, s_lo)
    hi = hi + s_hi * _PCG_MULT_LO + s_lo * _PCG_MULT_HI
    new_lo = lo + i_lo
    return hi + i_hi + (new_lo < lo).astype(np.uint64), new_lo


def pcg64_doubles(states: NDArray[np.uint64], count: int) -> F64:
    """The first ``count`` values of ``Generator(PCG64(s)).random()`` for each seed state ``s``
    of :func:`seed_states`, ``(N, count)``: PCG64 seeded as numpy seeds it (state from words
    0-1, increment from words 2-3), XSL-RR output, ``(x >> 11) * 2^-53``."""
    n = states.shape[0]
    with np.errstate(over="ignore"):
        one = np.uint64(1)
        i_hi = (states[:, 2] << one) | (states[:, 3] >> np.uint64(63))
        i_lo = (states[:, 3] << one) | one
        s_hi, s_lo = _pcg_step(np.zeros(n, np.uint64), np.zeros(n, np.uint64), i_hi, i_lo)
        lo = s_lo + states[:, 1]
        s_hi = s_hi + states[:, 0] + (lo < s_lo).astype(np.uint64)
        s_hi, s_lo = _pcg_step(s_hi, lo, i_hi, i_lo)
        out = np.empty((n, count), dtype=np.float64)
        for j in range(count):
            s_hi, s_lo = _pcg_step(s_hi, s_lo, i_hi, i_lo)
            x = s_hi ^ s_lo
            rot = s_hi >> np.uint64(58)
            v = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
            out[:, j] = (v >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return out


# ---------------------------------------------------------------------------- keyed draws

U64 = NDArray[np.uint64]

# Philox4x64-10 constants (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011;
# the Random123 reference values, also used by numpy.random.Philox).
_M0, _M1 = np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157)
_W0, _W1 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B)
_LO32, _S32 = np.uint64(0xFFFFFFFF), np.uint64(32)
_ROUNDS = 10
#: A counter block yields four 64-bit words: devices 4b .. 4b+3 share block b, one word each.
_LANES = 4


def _mulhilo(m: np.uint64, x: U64) -> tuple[U64, U64]:
    """``(low, high)`` 64-bit halves of the 128-bit product ``m * x`` (elementwise)."""
    m_lo, m_hi = m & _LO32, m >> _S32
    x_lo, x_hi = x & _LO32, x >> _S32
    p0, p1, p2, p3 = m_lo * x_lo, m_lo * x_hi, m_hi * x_lo, m_hi * x_hi
    mid = (p0 >> _S32) + (p1 & _LO32) + (p2 & _LO32)
    return m * x, p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32)


def philox4x64(counter: tuple[U64, U64, U64, U64], key: U64) -> tuple[U64, U64, U64, U64]:
    """The Philox4x64-10 bijection of Random123: four 64-bit output words per counter.

    Args:
        counter: four ``uint64`` arrays of one shape (the counter words ``c0..c3``).
        key: two ``uint64`` key words.

    Returns:
        four ``uint64`` arrays of the counter's shape. ``numpy.random.Philox(counter=c, key=k)``
        outputs the words of counter ``c + 1`` (it increments before generating); the tests
        check this function against it.
    """
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    with np.errstate(over="ignore"):
        for r in range(_ROUNDS):
            if r:
                k0, k1 = k0 + _W0, k1 + _W1
            lo0, hi0 = _mulhilo(_M0, c0)
            lo1, hi1 = _mulhilo(_M1, c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


#: The backends of the keyed words (module docstring).
BACKENDS = ("auto", "compiled", "numpy")
#: ``auto`` computes in numpy until the process has drawn this many keyed words (some 0.6 s at
#: numpy's 120 ns a word on the project's machine, about what importing numba and loading the
#: cached loops takes, 0.57 s), compiled from then on: a process that draws little never loads
#: numba, one that draws much loses at most about that load time against being compiled from
#: the start (docs/performance.md, "Keyed draws at C speed").
AUTO_SWITCH_WORDS = 5_000_000
_ENV_BACKEND = "WFLSIM_RNG_BACKEND"


class _Choice:
    """The process's backend: ``asked`` (set_backend's name; None: the environment's), ``mode``
    (the validated choice, None until the first draw), ``module`` (the compiled loops once
    loaded), ``failed`` (they could not be), ``numpy_words`` (words drawn in numpy so far)."""

    asked: str | None = None
    mode: str | None = None
    module: ModuleType | None = None
    failed = False
    numpy_words = 0


_choice = _Choice()


def set_backend(name: str | None) -> None:
    """Compute the keyed words with backend ``name`` (one of :data:`BACKENDS`) from now on in
    this process; ``None`` returns to ``$WFLSIM_RNG_BACKEND`` (default ``auto``). ``auto``'s count
    of words starts again from zero.

    Raises:
        ValueError: on an unknown name.
    """
    if name is not None and name not in BACKENDS:
        raise ValueError(f"unknown keyed-draw backend {name!r}; known: {list(BACKENDS)}")
    _choice.asked, _choice.mode, _choice.module, _choice.failed = name, None, None, False
    _choice.numpy_words = 0


def backend() -> str:
    """The backend of the next keyed draw, ``"compiled"`` or ``"numpy"``. With ``compiled`` asked
    (or ``auto`` past :data:`AUTO_SWITCH_WORDS`), the first call imports numba and loads the
    loops from its cache (compiling them, about 1.7 s, the first time); under ``auto`` a numba that
    cannot be imported or compiled leaves the process on numpy.

    Raises:
        ValueError: ``$WFLSIM_RNG_BACKEND`` is not one of :data:`BACKENDS`.
        ImportError: ``compiled`` was asked for and numba cannot be imported.
    """
    mode = _choice.mode
    if mode is None:
        mode = _choice.asked or os.environ.get(_ENV_BACKEND, "").strip() or "auto"
        if mode not in BACKENDS:
            raise ValueError(f"${_ENV_BACKEND} must be one of {list(BACKENDS)}, got {mode!r}")
        _choice.mode = mode
    if mode == "numpy" or (mode == "auto" and _choice.numpy_words < AUTO_SWITCH_WORDS):
        return "numpy"
    if _choice.module is None and not _choice.failed:
        try:
            _choice.module = _load_compiled()
        except Exception:
            if mode == "compiled":
                raise
            _choice.failed = True
    return "numpy" if _choice.module is None else "compiled"


def _load_compiled() -> ModuleType:
    """Import the compiled loops and run them once (loads them from numba's cache or compiles
    them), so that a failure shows here, not in the middle of a run."""
    from wflsim.sim import rng_compiled

    key = np.array([1, 2], dtype=np.uint64)
    dev = np.arange(5, dtype=np.int64)
    for unit in (False, True):
        rng_compiled.words(key, dev, 0, 0, (0, 1), unit)
    return rng_compiled


class KeyedStream:
    """Counter-based random draws: each value is a pure function of ``(key, device, slot, draw)``.

    No state is kept, so a draw does not depend on which draws came before it: the same
    ``(device, slot, draw)`` gives the same value in any run with the same seed and stream, in
    any order, after a resume, and whatever the number of devices or slots per frame. Device
    ``n``'s 64-bit word for ``(slot, draw)`` is word ``n mod 4`` of
    ``philox4x64((n div 4, slot, draw, sub), key)``. Use a distinct ``draw`` index for every
    distinct random quantity of a device in a slot (one index per variate). ``sub`` (default 0)
    gives a second independent word for the same ``(device, slot, draw)``: draws that need two
    uniforms (the normal and complex normal draws) take ``sub = 0`` and ``sub = 1``, so their
    first uniform is the one :meth:`uniform` and :meth:`standard_exponential` return.

    Args:
        key: two ``uint64`` words (from :meth:`Streams.keyed`).
    """

    def __init__(self, key: ArrayLike) -> None:
        k = np.asarray(key, dtype=np.uint64).reshape(-1)
        if k.shape != (2,):
            raise ValueError(f"key must have two uint64 words, got shape {k.shape}")
        self.key = k

    def _words(
        self, devices: ArrayLike, slot: int, draw: int, subs: tuple[int, ...], unit: bool = False
    ) -> NDArray[np.uint64] | NDArray[np.float64]:
        """The words of ``devices`` for ``(slot, draw, sub)``, one row per sub: ``(len(subs), N)``;
        with ``unit``, as doubles in ``[0, 1)`` (:func:`_to_unit`). On the compiled backend
        (:func:`backend`) if it is chosen, else from one vectorised :func:`philox4x64`."""
        dev = np.ascontiguousarray(np.asarray(devices, dtype=np.int64).reshape(-1))
        if dev.size and dev.min() < 0:
            raise ValueError("device indices must be >= 0")
        if slot < 0 or draw < 0 or min(subs) < 0:
            raise ValueError("slot, draw and sub must be >= 0")
        if backend() == "compiled" and _choice.module is not None:
            return _choice.module.words(self.key, dev, int(slot), int(draw), subs, unit)
        _choice.numpy_words += dev.size * len(subs)
        words = self._numpy_words(dev, slot, draw, subs)
        return _to_unit(words) if unit else words

    def _numpy_words(
        self, dev: NDArray[np.int64], slot: int, draw: int, subs: tuple[int, ...]
    ) -> U64:
        """:meth:`_words` in numpy: all subs from one vectorised :func:`philox4x64` evaluation."""
        n = dev.size
        if n and dev[0] == 0 and dev[-1] == n - 1 and bool(np.all(np.diff(dev) == 1)):
            blocks = np.arange((n + _LANES - 1) // _LANES, dtype=np.uint64)  # all devices
            inverse = None
        else:
            blocks_i, inverse = np.unique(dev // _LANES, return_inverse=True)
            blocks = blocks_i.astype(np.uint64)
        nb = blocks.shape[0]
        m = len(subs)
        words = philox4x64(
            (
                np.tile(blocks, m),
                np.full(nb * m, slot, dtype=np.uint64),
                np.full(nb * m, draw, dtype=np.uint64),
                np.repeat(np.asarray(subs, dtype=np.uint64), nb),
            ),
            self.key,
        )
        table = np.stack(words, axis=1).reshape(m, nb, _LANES)  # (sub, block, lane)
        if inverse is None:
            return table.reshape(m, -1)[:, :n]
        return table[:, inverse, dev % _LANES]

    def raw(self, devices: ArrayLike, slot: int, draw: int = 0, sub: int = 0) -> U64:
        """The 64-bit words of ``devices`` (int array, ``>= 0``) for ``(slot, draw, sub)``,
        ``(N,)``."""
        return np.asarray(self._words(devices, slot, draw, (sub,))[0], dtype=np.uint64)

    def uniform(
        self, devices: ArrayLike, slot: int, draw: int = 0, sub: int = 0
    ) -> NDArray[np.float64]:
        """Uniform on ``[0, 1)`` with 53 random bits, ``(N,)``."""
        return self.uniforms(devices, slot, draw, (sub,))[0]

    def uniforms(
        self, devices: ArrayLike, slot: int, draw: int, subs: tuple[int, ...]
    ) -> NDArray[np.float64]:
        """:meth:`uniform` for several ``sub`` at once, ``(len(subs), N)``, one Philox evaluation."""
        return np.asarray(self._words(devices, slot, draw, subs, unit=True), dtype=np.float64)

    def standard_exponential(
        self, devices: ArrayLike, slot: int, draw: int = 0
    ) -> NDArray[np.float64]:
        """``Exp(1)`` by inversion, ``-log(1 - U)``, ``(N,)`` (finite: ``U < 1``)."""
        return -fmath.log1p(-self.uniform(devices, slot, draw))

    def polar(
        self, devices: ArrayLike, slot: int, draw: int = 0
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(E, U2)``: ``E = -log(1 - U1) ~ Exp(1)`` (``U1`` of ``sub = 0``: the value of
        :meth:`standard_exponential`) and an independent ``U2 ~ U[0, 1)`` (``sub = 1``), ``(N,)``
        each, from one Philox evaluation. ``sqrt(E) exp(2 pi i U2)`` is Box-Muller's complex
        normal."""
        u = self.uniforms(devices, slot, draw, (0, 1))
        return -fmath.log1p(-u[0]), u[1]

    def standard_complex_normal(
        self, devices: ArrayLike, slot: int, draw: int = 0
    ) -> NDArray[np.complex128]:
        """Circularly symmetric ``CN(0, 1)`` (``E|x|^2 = 1``; real and imaginary parts independent
        ``N(0, 1/2)``) by Box-Muller: ``x = sqrt(E) exp(2 pi i U2)`` with ``(E, U2)`` of
        :meth:`polar`, so ``|x|^2`` is :meth:`standard_exponential`'s value (up to rounding),
        ``(N,)``."""
        e, u2 = self.polar(devices, slot, draw)
        r, theta = np.sqrt(e), (2.0 * np.pi) * u2
        x = np.empty(e.shape, dtype=np.complex128)
        x.real = r * fmath.cos(theta)
        x.imag = r * fmath.sin(theta)
        return x

    def standard_normal(self, devices: ArrayLike, slot: int, draw: int = 0) -> NDArray[np.float64]:
        """``N(0, 1)`` by Box-Muller, ``sqrt(-2 log(1 - U1)) cos(2 pi U2)`` (``sqrt(2)`` times the
        real part of :meth:`standard_complex_normal`), ``(N,)``."""
        e, u2 = self.polar(devices, slot, draw)
        return np.sqrt(2.0 * e) * fmath.cos(2.0 * np.pi * u2)

    def gamma(
        self, devices: ArrayLike, slot: int, shape: float, draw: int = 0
    ) -> NDArray[np.float64]:
        """``Gamma(shape, scale 1)`` by inversion of :meth:`uniform`'s ``U`` (one draw per
        variate, no rejection: :func:`gamma_from_uniform`), ``(N,)``. With ``shape = 1`` it is
        ``Exp(1)``, the same quantile as :meth:`standard_exponential`."""
        return gamma_from_uniform(self.uniform(devices, slot, draw), shape)


def _to_unit(words: U64) -> NDArray[np.float64]:
    """The top 53 bits of 64-bit words as floats in ``[0, 1)``."""
    return (words >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _check_shape(shape: float) -> float:
    a = float(shape)
    if not (math.isfinite(a) and a > 0.0):
        raise ValueError(f"gamma shape must be finite and > 0, got {shape}")
    return a


def gamma_from_uniform(u: ArrayLike, shape: float) -> NDArray[np.float64]:
    """The ``Gamma(shape, 1)`` quantile of uniforms ``u`` in ``[0, 1)`` (any shape of array).

    ``P^-1(shape, u)`` (scipy's ``gammaincinv``) for ``u <= 1/2`` and ``Q^-1(shape, 1 - u)``
    (``gammainccinv``) above, so both tails keep full relative precision.
    """
    a = _check_shape(shape)
    u = np.asarray(u, dtype=np.float64)
    low = u <= 0.5
    with np.errstate(all="ignore"):
        out = np.where(
            low, special.gammaincinv(a, np.where(low, u, 0.5)), special.gammainccinv(a, 1.0 - u)
        )
    return np.asarray(out, dtype=np.float64)


def gamma_from_exponential(e: ArrayLike, shape: float) -> NDArray[np.float64]:
    """The ``Gamma(shape, 1)`` quantile of ``Exp(1)`` values ``e >= 0``: ``F_Gamma^-1(1 - exp(-e))``
    (quantile coupling: a monotone map that turns an ``Exp(1)`` variable into a ``Gamma(shape, 1)``
    one). ``P^-1(shape, -expm1(-e))`` below ``e = ln 2``, ``Q^-1(shape, exp(-e))`` above, so both
    tails keep full precision. ``shape = 1`` returns ``e`` (up to rounding)."""
    a = _check_shape(shape)
    e = np.asarray(e, dtype=np.float64)
    low = e < math.log(2.0)
    with np.errstate(all="ignore"):
        out = np.where(
            low,
            special.gammaincinv(a, -fmath.expm1(-np.where(low, e, 0.0))),
            special.gammainccinv(a, fmath.exp(-e)),
        )
    return np.asarray(out, dtype=np.float64)
