"""The keyed streams' Philox4x64-10 words in compiled code (numba), bit for bit those of numpy.

:mod:`wflsim.sim.rng` imports this module only when a keyed draw is first made with the
``compiled`` backend, so a run that never draws (and a process without numba) never loads numba.
The loops compute, per requested device, the Philox block it belongs to (one evaluation per run
of consecutive devices in one block: a full range costs one block per four devices) and keep the
device's lane; :func:`wflsim.sim.rng.philox4x64` is the reference they are tested against. Only
integer arithmetic and the exact conversion of the top 53 bits to a double are compiled: the
transcendental functions of the draws (``log1p``, ``cos``, ...) stay numpy's, so every value is
the same bit for bit whichever backend computed the words.

The functions are compiled on first use and cached on disk (``cache=True``: numba's cache beside
this file, or its user-wide cache where that is read-only), so a later process loads them.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_M0, _M1 = np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157)
_W0, _W1 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B)
_ROUNDS = 10
_SHIFT_53 = np.uint64(11)
_TWO_M53 = 2.0**-53


def _mulhi_intrinsic(typingctx: Any, a: Any, b: Any) -> Any:
    """The high 64 bits of the 128-bit product of two ``uint64`` (one machine multiply)."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return sig, codegen


_mulhi: Any = intrinsic(_mulhi_intrinsic)


@numba.njit(cache=True, nogil=True)
def _block(
    b: np.uint64, c1: np.uint64, c2: np.uint64, c3: np.uint64, k0: np.uint64, k1: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """Philox4x64-10 of the counter ``(b, c1, c2, c3)`` under the key ``(k0, k1)``."""
    c0 = b
    for r in range(_ROUNDS):
        if r:
            k0 = k0 + _W0
            k1 = k1 + _W1
        lo0 = _M0 * c0
        hi0 = _mulhi(_M0, c0)
        lo1 = _M1 * c2
        hi1 = _mulhi(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


@numba.njit(cache=True, nogil=True)
def _fill(
    out: np.ndarray,
    key: np.ndarray,
    devices: np.ndarray,
    slot: np.uint64,
    draw: np.uint64,
    subs: np.ndarray,
    unit: bool,
) -> None:
    """Write the word (``unit``: the ``[0, 1)`` double) of ``devices[i]`` for ``subs[j]`` to
    ``out[j, i]``: lane ``d mod 4`` of ``philox((d div 4, slot, draw, sub), key)``."""
    k0, k1 = key[0], key[1]
    for j in range(subs.shape[0]):
        sub = subs[j]
        prev = np.int64(-1)
        w0 = w1 = w2 = w3 = np.uint64(0)
        for i in range(devices.shape[0]):
            d = devices[i]
            b = d >> 2
            if b != prev:
                w0, w1, w2, w3 = _block(np.uint64(b), slot, draw, sub, k0, k1)
                prev = b
            lane = d & 3
            w = w0 if lane == 0 else w1 if lane == 1 else w2 if lane == 2 else w3
            if unit:
                out[j, i] = np.float64(w >> _SHIFT_53) * _TWO_M53
            else:
                out[j, i] = w


def words(
    key: np.ndarray, devices: np.ndarray, slot: int, draw: int, subs: tuple[int, ...], unit: bool
) -> np.ndarray:
    """The keyed words (``unit``: as doubles in ``[0, 1)``) of ``devices`` (``int64``, ``>= 0``)
    for ``(slot, draw)`` and each of ``subs``, ``(len(subs), N)``."""
    out = np.empty((len(subs), devices.shape[0]), dtype=np.float64 if unit else np.uint64)
    _fill(
        out,
        key,
        devices,
        np.uint64(slot),
        np.uint64(draw),
        np.asarray(subs, dtype=np.uint64),
        unit,
    )
    return out
