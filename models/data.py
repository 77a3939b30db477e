"""Datasets (as normalised tensors) and their partition across devices.

Every loader returns ``(x_train, y_train, x_test, y_test)``: images ``float32`` of shape
``(N, C, H, W)``, labels ``int64`` of shape ``(N,)``, 10 classes, all on the CPU (the learner moves
them to its device). Nothing is read per item (no PIL, no transforms): whole arrays are converted
once. ``load_dataset(..., compact=True)`` (what the learner uses) keeps the ``uint8`` pixels
instead and normalises the samples it is asked for (:class:`CompactImages`: bit-identical values,
a quarter of the memory).

==================  ============  ===========  ==============================================
name                shape         train/test   source and normalisation
==================  ============  ===========  ==============================================
``digits``          (1, 8, 8)     1437 / 360   ``sklearn.datasets.load_digits``, pixels / 16
                                               (values in [0, 1]); stratified 80/20 split with
                                               ``random_state=0`` (same split in every run)
``mnist``           (1, 28, 28)   60000/10000  torchvision ``MNIST`` raw files;
                                               ``(x/255 - 0.1307) / 0.3081``
``fashion_mnist``   (1, 28, 28)   60000/10000  torchvision ``FashionMNIST`` raw files;
                                               ``(x/255 - 0.2860) / 0.3530``
``cifar10``         (3, 32, 32)   50000/10000  ``cifar-10-batches-py`` (torchvision's layout),
                                               read by :func:`read_cifar_batch` (no code runs);
                                               per-channel mean/std of the training set
==================  ============  ===========  ==============================================

The data directory is the folder that *contains* ``MNIST/raw/``, ``FashionMNIST/raw/`` or
``cifar-10-batches-py/`` (torchvision's layout). ``data_dir=None`` means the environment variable
``WFLSIM_DATA_DIR``, else ``./data``. Nothing is downloaded here (``wflsim data fetch`` and
``--download`` do that: :mod:`wflsim.app.fetch`).

``partition`` is pure numpy so that it is cheap to test.

Dataset files are input like any other: a damaged or foreign file is a
:class:`wflsim.sim.config.catalogue.DatasetError` naming ``learning.data_dir`` (exit 2 on the
command line), never a traceback, and no message quotes a file's contents. CIFAR-10's files are
Python pickles; they are read by a restricted unpickler that builds only the plain data the format
holds (dicts, lists, strings, numbers, and numpy arrays as stand-ins holding shape, dtype and
bytes), so a crafted file cannot run code. Before that, the file's size and opcodes are checked
against bounds that every real batch keeps with a wide margin (memo references, nesting, objects
reached through shared references, dict entries), so a small file that would expand into a huge,
deep or slow-to-hash object is refused in milliseconds, and only the top dict and a flat labels list
are looked into before the arrays are made.
"""

from __future__ import annotations

import io
import logging
import math
import os
import pickle
import pickletools
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wflsim.sim.config.catalogue import (
    DATASET_FILES,
    DATASETS,
    INPUT_SHAPES,
    NORMALISATION,
    NUM_CLASSES,
    DatasetError,
)
from wflsim.sim.errors import ScenarioError
from wflsim.sim.files import open_regular

from .registry import DATASET_TENSORS, PARTITION_FUNCTIONS

__all__ = ["DATASETS", "INPUT_SHAPES", "NUM_CLASSES"]

log = logging.getLogger(__name__)

_MNIST_STATS = {
    k: (NORMALISATION[k][0][0], NORMALISATION[k][1][0]) for k in ("mnist", "fashion_mnist")
}
_CIFAR_MEAN, _CIFAR_STD = NORMALISATION["cifar10"]
_FIX = (
    "point learning.data_dir / --data-dir / WFLSIM_DATA_DIR at a folder with "
    "MNIST/raw/..., FashionMNIST/raw/... or cifar-10-batches-py/... (torchvision's layout)"
)

Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


class CompactImages:
    """Images stored as their ``uint8`` source pixels, normalised to ``float32`` when indexed.

    ``images[idx]`` returns ``(x/255 - mean) / std`` of the selected samples, computed by the
    same function (same operations, same order) that :func:`load_dataset` uses to normalise a
    whole dataset, so it is bit-identical to indexing the normalised ``float32`` array, at a
    quarter of the memory (CIFAR-10: 184 MB instead of 737 MB; MNIST: 55 MB instead of 220 MB).

    Args:
        raw: ``uint8`` ``(M, C, H, W)`` pixels.
        mean, std: per-channel statistics in ``[0, 1]`` units: Python floats (one channel) or
            ``float32`` tensors of shape ``(1, C, 1, 1)``.
    """

    def __init__(
        self, raw: torch.Tensor, mean: float | torch.Tensor, std: float | torch.Tensor
    ) -> None:
        if raw.dtype != torch.uint8 or raw.dim() != 4:
            raise ValueError(f"raw images must be uint8 (M, C, H, W), got {raw.dtype} {raw.shape}")
        self.raw, self.mean, self.std = raw, mean, std

    @property
    def shape(self) -> torch.Size:
        """``(M, C, H, W)``."""
        return self.raw.shape

    def __len__(self) -> int:
        return self.raw.shape[0]

    def __getitem__(self, idx: Any) -> torch.Tensor:
        """Normalised ``float32`` images ``raw[idx]`` (any index ``torch`` accepts)."""
        return _normalise(self.raw[idx], self.mean, self.std)

    def to(self, device: torch.device | str) -> CompactImages:
        """The same images on ``device``."""
        move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
        return CompactImages(self.raw.to(device), move(self.mean), move(self.std))

    def materialise(self) -> torch.Tensor:
        """All images, normalised, as one ``float32`` ``(M, C, H, W)`` tensor."""
        return self[:].contiguous()


#: ``(x_train, y_train, x_test, y_test)`` with compact images.
CompactSet = tuple[CompactImages, torch.Tensor, CompactImages, torch.Tensor]


def _normalise(
    raw: torch.Tensor, mean: float | torch.Tensor, std: float | torch.Tensor
) -> torch.Tensor:
    """``(raw/255 - mean) / std`` in ``float32``: THE normalisation of every image dataset."""
    return raw.to(torch.float32).div_(255.0).sub_(mean).div_(std)


class DatasetNotFoundError(FileNotFoundError):
    """The files of a dataset are not in the data directory (nothing is downloaded)."""


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """The data directory: ``data_dir``, else ``$WFLSIM_DATA_DIR``, else ``./data``."""
    if data_dir is None or str(data_dir) == "":
        data_dir = os.environ.get("WFLSIM_DATA_DIR") or "data"
    return Path(data_dir).expanduser()


def dataset_available(name: str, data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``load_dataset(name, data_dir)`` would find its files (digits: always)."""
    root = resolve_data_dir(data_dir)
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {list(DATASETS)}")
    return all((root / f).is_file() for f in DATASET_FILES.get(name, ()))


def load_dataset(
    name: str, data_dir: str | os.PathLike[str] | None = None, *, compact: bool = False
) -> Tensors | CompactSet:
    """Load dataset ``name`` as normalised tensors (see the module docstring for the table).

    Returns ``(x_train, y_train, x_test, y_test)``: ``x`` float32 ``(N, C, H, W)``, ``y`` int64
    ``(N,)``. With ``compact=True`` the images of MNIST, Fashion-MNIST and CIFAR-10 come as
    :class:`CompactImages` (``uint8`` pixels, normalised when indexed; the same values at a
    quarter of the memory); ``digits`` is always ``float32`` (it is tiny).
    Raises :class:`DatasetNotFoundError` when the files are missing and ``ValueError``
    for an unknown name. ``data_dir`` is ignored for ``digits``.
    """
    if name in DATASET_TENSORS:
        return DATASET_TENSORS[name]
    if name not in INPUT_SHAPES:
        raise ValueError(f"unknown dataset {name!r}; known: {list(DATASETS)}")
    if name == "digits":
        return _load_digits()
    root = resolve_data_dir(data_dir)
    if not dataset_available(name, root):
        where = (
            f"{root}/cifar-10-batches-py/"
            if name == "cifar10"
            else f"{root}/{'MNIST' if name == 'mnist' else 'FashionMNIST'}/raw/"
        )
        raise DatasetNotFoundError(
            f"dataset {name!r} not found: no complete set of files in {where} "
            f"(searched data directory {root.resolve()}); {_FIX}"
        )
    c_tr, y_tr, c_te, y_te = (
        _load_cifar10(root) if name == "cifar10" else _load_mnist_like(name, root)
    )
    log.debug("dataset %s: %d training, %d test images from %s", name, len(y_tr), len(y_te), root)
    if not compact:
        return c_tr.materialise(), y_tr, c_te.materialise(), y_te
    return c_tr, y_tr, c_te, y_te


def _load_digits() -> Tensors:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = (bunch.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    return (
        torch.from_numpy(np.ascontiguousarray(x_tr)),
        torch.from_numpy(np.ascontiguousarray(y_tr)),
        torch.from_numpy(np.ascontiguousarray(x_te)),
        torch.from_numpy(np.ascontiguousarray(y_te)),
    )


#: The largest IDX file read (MNIST's and Fashion-MNIST's training images: 47 MB).
_MAX_IDX_BYTES = 64 * 1024 * 1024


def read_idx(path: Path) -> np.ndarray:
    """An IDX file of unsigned bytes (MNIST's and Fashion-MNIST's format: two zero bytes, the
    type code ``0x08``, the number of dimensions ``k``, ``k`` big-endian int32 sizes, then the
    values) as a ``uint8`` array of those sizes: the values torchvision's reader gives, without
    importing torchvision (160 MB of memory).

    Raises:
        ScenarioError: ``path`` is not a regular file (:func:`~wflsim.sim.files.open_regular`).
        ValueError: the file is larger than 64 MiB, not such an IDX file, or its size does not
            match its header.
    """
    with open_regular(path, "learning.data_dir", "dataset", name=True) as f:
        size = os.fstat(f.fileno()).st_size
        if size > _MAX_IDX_BYTES:
            raise ValueError(f"larger than {_MAX_IDX_BYTES // 2**20} MiB")
        data = np.fromfile(f, dtype=np.uint8, count=size)
    if data.size != size:
        raise ValueError("shorter than its size")
    if size < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08 or not 1 <= data[3] <= 3:
        raise ValueError("not an IDX file of unsigned bytes")
    start = 4 + 4 * int(data[3])
    if size < start:
        raise ValueError("IDX header cut short")
    shape = tuple(int(v) for v in data[4:start].view(">i4"))
    if size - start != int(np.prod(shape)):
        raise ValueError("IDX data does not match the sizes in its header")
    return data[start:].reshape(shape)


def _load_mnist_like(name: str, root: Path) -> CompactSet:
    mean, std = _MNIST_STATS[name]
    out: list[CompactImages | torch.Tensor] = []
    files = DATASET_FILES[name]  # train images, train labels, test images, test labels
    for images, labels in (files[:2], files[2:]):
        try:  # the IDX files are parsed here (no pickle); a damaged file fails here
            raw = torch.from_numpy(read_idx(root / images)).unsqueeze(1).contiguous()
            targets = torch.from_numpy(read_idx(root / labels)).to(torch.int64)
        except ScenarioError as err:  # not a regular file (open_regular)
            raise DatasetError(err.field, err.problem, err.fix) from None
        except Exception as err:  # any parser failure: the file is not what it should be
            raise DatasetError(
                "learning.data_dir",
                f"the {name} files in {str(root)!r} are damaged or not {name} "
                f"({type(err).__name__})",
                "replace them with the original files",
            ) from None
        if raw.shape[1:] != (1, 28, 28) or targets.shape != (raw.shape[0],):
            raise DatasetError(
                "learning.data_dir",
                f"the {name} files in {str(root)!r} do not hold 28x28 images with one label each",
                "replace them with the original files",
            )
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= NUM_CLASSES):
            raise DatasetError(
                "learning.data_dir",
                f"the {name} labels in {str(root)!r} are not in 0..{NUM_CLASSES - 1}",
                "replace them with the original files",
            )
        out += [CompactImages(raw, mean, std), targets]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


#: Bounds that every CIFAR-10 batch file keeps with a wide margin (a real batch: 31 MB, 10000
#: images, about 30000 opcodes, 3 global names, hardly any memo reference, containers 6 deep,
#: 4 dict entries). They are checked on the opcode stream (:func:`_check_opcodes`) before
#: anything is built, so that a small file cannot make the reader build something large, deep or
#: slow to hash.
_MAX_BATCH_BYTES = 64 * 1024 * 1024  # the file (strings and bytes can only be smaller)
_MAX_OPCODES = 200_000
_MAX_MEMO_GETS = 4096  # references to an earlier object (what makes a pickle expand)
_MAX_MEMO_INDEX = _MAX_OPCODES  # picklers number their memo 0, 1, 2, ...
_MAX_MARK_DEPTH = 16
_MAX_NESTING = 32  # containers inside containers
_MAX_OBJECTS = 1_000_000  # objects counted once per reference that reaches them
_MAX_KEYS = 256  # dict entries and set items in the whole file (their keys are hashed)
_MAX_GLOBALS = 16

_NOT_PLAIN = "the file names a Python object that is not plain data"
#: Opcodes that build class instances or reach outside the pickle; CIFAR-10's files use none.
_REFUSED_OPCODES = frozenset(
    {"INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"}
    | {"NEXT_BUFFER", "READONLY_BUFFER"}
)
#: Opcodes that add to the container below their arguments (it stays on the stack).
_FILLING_OPCODES = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"})
_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
#: Opcodes that push one new object made of nothing on the stack (their argument at most).
_LEAF_OPCODES = (
    frozenset(
        op.name
        for op in pickletools.opcodes
        if not op.stack_before and len(op.stack_after) == 1 and op.stack_after[0].name != "mark"
    )
    - _MEMO_GETS
    - _REFUSED_OPCODES
    - {"GLOBAL"}
)
#: Plain numeric dtypes an array in a batch file may have (byte order aside).
_PLAIN_DTYPES = frozenset({"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"})


class _RefusedGlobal(pickle.UnpicklingError):
    """A pickle named a global that is not on the list."""


class _TooLarge(pickle.UnpicklingError):
    """A pickle exceeds a bound that every CIFAR-10 batch keeps (the message says which)."""


class _Node:
    """What :func:`_check_opcodes` knows of one object on the pickle's stack: how deeply it nests
    containers, how many objects it reaches counting every reference (``size``), and its text
    if it is a short string (for ``STACK_GLOBAL``)."""

    __slots__ = ("depth", "size", "text")

    def __init__(self, depth: int = 1, size: int = 1, text: str | None = None) -> None:
        self.depth, self.size, self.text = depth, size, text


def _check_opcodes(data: bytes) -> None:
    """Walk a pickle's opcodes (nothing is built) and refuse it unless it stays within the
    bounds of a CIFAR-10 batch file.

    The walk keeps, for every object the pickle would put on its stack or in its memo, its
    nesting depth and the number of objects it reaches counting every shared reference, so
    ``[B, B, B]`` with a large memoised ``B`` counts ``B`` three times. A container filled after
    it was memoised and referenced is not updated in its earlier parents (the numbers are then
    too small), which is why :func:`read_cifar_batch` also never descends into anything but the
    top dict and a flat labels list.

    Raises:
        _TooLarge: a bound is exceeded (see ``_MAX_*``).
        _RefusedGlobal: a global outside :data:`_CIFAR_GLOBALS`, or an opcode that builds
            instances or reaches outside the pickle.
        pickle.UnpicklingError, ValueError: the stream is not a well-formed pickle.
    """
    stack: list[_Node] = []
    marks: list[int] = []
    memo: dict[int, _Node] = {}
    gets = keys = names = 0
    for count, (op, arg, _pos) in enumerate(pickletools.genops(data), 1):
        if count > _MAX_OPCODES:
            raise _TooLarge(f"it holds more than {_MAX_OPCODES} opcodes")
        name = op.name
        if name in _REFUSED_OPCODES:
            raise _RefusedGlobal(_NOT_PLAIN)
        if name in _LEAF_OPCODES:  # a number, a string, None, an empty container
            text = arg if type(arg) is str and len(arg) < 256 else None
            stack.append(_Node(1, 1, text))
            continue
        if name == "MARK":
            marks.append(len(stack))
            if len(marks) > _MAX_MARK_DEPTH:
                raise _TooLarge(f"it nests marks more than {_MAX_MARK_DEPTH} deep")
            continue
        fence = marks[-1] if marks else 0
        if name in _MEMO_PUTS:
            index = len(memo) if name == "MEMOIZE" else arg  # an int (genops reads it)
            if not isinstance(index, int) or not 0 <= index < _MAX_MEMO_INDEX:
                raise _TooLarge(f"it numbers its memo beyond {_MAX_MEMO_INDEX}")
            if len(stack) <= fence:
                raise pickle.UnpicklingError("a memo entry out of place")
            memo[index] = stack[-1]
            continue
        if name in _MEMO_GETS or name == "DUP":
            gets += 1
            if gets > _MAX_MEMO_GETS:
                raise _TooLarge(f"it refers to earlier objects more than {_MAX_MEMO_GETS} times")
            if name == "DUP":
                node = stack[-1] if len(stack) > fence else None
            else:
                node = memo.get(arg) if isinstance(arg, int) else None
            if node is None:
                raise pickle.UnpicklingError("a reference to an object never made")
            stack.append(node)
            continue
        if name == "POP" and len(stack) <= fence and marks:  # POP also takes a bare mark
            marks.pop()
            continue
        before = op.stack_before
        items: list[_Node] = []
        if pickletools.markobject in before:
            if not marks:
                raise pickle.UnpicklingError("a mark that was never set")
            fence = marks.pop()
            items, stack[fence:] = stack[fence:], []
            before = before[: before.index(pickletools.markobject)]
            fence = marks[-1] if marks else 0
        if len(stack) - len(before) < fence:
            raise pickle.UnpicklingError("the stack runs out")
        args = stack[len(stack) - len(before) :] if before else []
        del stack[len(stack) - len(args) :]
        if name in ("GLOBAL", "STACK_GLOBAL"):
            names += 1
            if names > _MAX_GLOBALS:
                raise _TooLarge(f"it names more than {_MAX_GLOBALS} globals")
            if name == "GLOBAL":  # "module name" in the opcode
                module, _, attr = str(arg).partition(" ")
                known = (module, attr) in _CIFAR_GLOBALS
            else:  # the two strings below it on the stack
                known = (args[0].text, args[1].text) in _CIFAR_GLOBALS
            if not known:
                raise _RefusedGlobal(_NOT_PLAIN)
        if name in ("SETITEM", "SETITEMS", "DICT", "ADDITEMS", "FROZENSET"):
            if name == "SETITEM":
                keys += 1
            else:  # sets take single items, dicts key-value pairs
                keys += len(items) // (1 if name in ("ADDITEMS", "FROZENSET") else 2)
            if keys > _MAX_KEYS:
                raise _TooLarge(f"it holds more than {_MAX_KEYS} dict entries or set items")
        parts = args + items
        if name in _FILLING_OPCODES:
            node, parts = args[0], parts[1:]
            node.depth = max(node.depth, 1 + max((p.depth for p in parts), default=0))
            node.size += sum(p.size for p in parts)
        elif op.stack_after:
            node = _Node(
                1 + max((p.depth for p in parts), default=0), 1 + sum(p.size for p in parts)
            )
        else:  # POP, POP_MARK, STOP, PROTO, FRAME
            continue
        if node.depth > _MAX_NESTING:
            raise _TooLarge(f"it nests containers more than {_MAX_NESTING} deep")
        if node.size > _MAX_OBJECTS:
            raise _TooLarge(
                f"it reaches more than {_MAX_OBJECTS} objects once shared references are counted"
            )
        stack.append(node)


class _ArrayType:
    """Stands for ``numpy.ndarray`` in a batch file: only ``_reconstruct`` may be given it."""

    __slots__ = ()


_NDARRAY = _ArrayType()


class _Dtype:
    """A numpy dtype as a pickle describes it (``numpy.dtype(spec, align, copy)`` and its
    state): plain numbers only; nothing of numpy runs on the file's values."""

    __slots__ = ("dtype",)

    def __init__(self, spec: object, align: object = False, copy: object = True) -> None:
        if not isinstance(spec, str) or spec.lstrip("<>|=") not in _PLAIN_DTYPES:
            raise _RefusedGlobal(_NOT_PLAIN)
        self.dtype = np.dtype(spec)

    def __setstate__(self, state: object) -> None:
        """``(version, byteorder, None, None, None, elsize, alignment, flags[, metadata])``: only
        the byte order matters to a plain number."""
        if (
            not isinstance(state, tuple)
            or len(state) not in (8, 9)
            or state[2:5] != (None, None, None)
            or state[1] not in ("<", ">", "|", "=")
        ):
            raise _RefusedGlobal(_NOT_PLAIN)
        if state[1] in ("<", ">"):
            self.dtype = self.dtype.newbyteorder(state[1])


class _Array:
    """A numpy array as a pickle describes it: shape, :class:`_Dtype`, order and raw bytes,
    checked to agree when set; an ``ndarray`` only through :meth:`to_numpy`."""

    __slots__ = ("shape", "dtype", "fortran", "raw")

    def __init__(self) -> None:
        self.shape: tuple[int, ...] = (0,)
        self.dtype = np.dtype(np.uint8)
        self.fortran = False
        self.raw: str | bytes = b""

    def __setstate__(self, state: object) -> None:
        """``([version,] shape, dtype, is_fortran, raw)``, as ``ndarray.__reduce__`` writes it;
        ``raw`` is a latin-1 string in Python 2's files, bytes in Python 3's."""
        if isinstance(state, tuple) and len(state) == 5:
            state = state[1:]
        if not isinstance(state, tuple) or len(state) != 4:
            raise ValueError("not an array state")
        shape, dtype, fortran, raw = state
        if (
            not isinstance(shape, tuple)
            or len(shape) > 8
            or not all(type(d) is int and 0 <= d <= _MAX_BATCH_BYTES for d in shape)
        ):
            raise ValueError("not an array shape")
        if not isinstance(dtype, _Dtype):
            raise _RefusedGlobal(_NOT_PLAIN)
        if not isinstance(raw, str | bytes) or len(raw) != math.prod(shape) * dtype.dtype.itemsize:
            raise ValueError("the array's bytes do not match its shape")
        self.shape, self.dtype, self.fortran, self.raw = shape, dtype.dtype, bool(fortran), raw

    def to_numpy(self) -> np.ndarray:
        """The array (a writable copy of the file's bytes)."""
        raw = bytearray(self.raw, "latin-1") if isinstance(self.raw, str) else bytearray(self.raw)
        flat = np.frombuffer(raw, dtype=self.dtype)
        return flat.reshape(self.shape, order="F" if self.fortran else "C")


def _reconstruct_plain(cls: object, shape: object, typecode: object) -> _Array:
    """Stands for ``numpy.core.multiarray._reconstruct(ndarray, (0,), b"b")``: an empty array
    that the pickle's state then fills."""
    if cls is not _NDARRAY:
        raise _RefusedGlobal(_NOT_PLAIN)
    return _Array()


#: The only globals a CIFAR-10 batch file may name (what pickled numpy arrays are made of), each
#: mapped to a stand-in that holds plain data: no numpy code runs on a file's values.
_CIFAR_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct_plain,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct_plain,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _Dtype,
}
_CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_TEST = ("test_batch",)


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data only: dicts, lists, tuples, strings, bytes, numbers
    and the stand-ins of numpy arrays (:data:`_CIFAR_GLOBALS`). Any other global a pickle names
    (a function to call, a class to build) is refused before anything of it runs."""

    def find_class(self, module: str, name: str) -> Any:
        """Admit exactly the numpy array constructors' stand-ins; refuse everything else."""
        obj = _CIFAR_GLOBALS.get((module, name))
        if obj is None:
            raise _RefusedGlobal(_NOT_PLAIN)
        return obj


def _unpickle_plain(path: Path) -> Any:
    """Read a batch file (at most :data:`_MAX_BATCH_BYTES`), check its opcodes
    (:func:`_check_opcodes`), then load it with :class:`_PlainDataUnpickler` (Python 2 strings
    read as latin-1, as CIFAR-10's files need)."""
    with open_regular(path, "learning.data_dir", "dataset", name=True) as f:
        too_large = _TooLarge(f"it is larger than {_MAX_BATCH_BYTES // 2**20} MiB")
        if os.fstat(f.fileno()).st_size > _MAX_BATCH_BYTES:
            raise too_large
        data = f.read(_MAX_BATCH_BYTES + 1)  # bounded also where the size is not known
    if len(data) > _MAX_BATCH_BYTES:
        raise too_large
    _check_opcodes(data)
    return _PlainDataUnpickler(io.BytesIO(data), encoding="latin1").load()


def _cifar_labels(labels: object, n: int) -> np.ndarray | None:
    """``n`` labels in ``0..9`` as ``int64``, from a flat list of ints or an integer array;
    ``None`` for anything else (nothing nested is looked into)."""
    if isinstance(labels, list):
        if not all(isinstance(v, int) and 0 <= v < NUM_CLASSES for v in labels):
            return None
        return np.array(labels, dtype=np.int64).reshape(n)
    if not isinstance(labels, _Array) or labels.dtype.kind not in "biu":
        return None
    y = labels.to_numpy().astype(np.int64).reshape(n)
    return y if not y.size or (y.min() >= 0 and y.max() < NUM_CLASSES) else None


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One ``cifar-10-batches-py`` batch file: ``(images uint8 (M, 3, 32, 32), labels int64 (M,))``.

    The file is a pickle of ``{"data": uint8 (M, 3072), "labels": [M ints], ...}`` (CIFAR-100's
    ``fine_labels`` is accepted too), as torchvision reads it, but loaded by a restricted
    unpickler (:class:`_PlainDataUnpickler`): no code in the file runs. Its opcodes are first
    checked against bounds that every CIFAR-10 batch keeps with a wide margin (size, opcodes,
    memo references, nesting, objects reached, dict entries, globals: ``_MAX_*``), so a small
    file that would expand into a huge or deep object is refused in milliseconds; then only
    the top dict and the labels list are looked into.

    Raises:
        DatasetError: the file cannot be read, is not plain data, exceeds the bounds, or is not
            a CIFAR-10 batch (on ``learning.data_dir``; the message names the file, never its
            contents).
    """
    fix = "replace it with the original cifar-10-batches-py file"
    try:
        entry = _unpickle_plain(path)
    except ScenarioError as err:  # not a regular file (open_regular)
        raise DatasetError(err.field, err.problem, err.fix) from None
    except _RefusedGlobal as err:
        raise DatasetError(
            "learning.data_dir", f"refused {str(path)!r}: {err}; nothing in it was run", fix
        ) from None
    except _TooLarge as err:
        raise DatasetError(
            "learning.data_dir",
            f"refused {str(path)!r}: {err}, far beyond any CIFAR-10 batch; nothing in it was built",
            fix,
        ) from None
    except Exception as err:  # truncated, garbage, unreadable: the file is not a batch
        raise DatasetError(
            "learning.data_dir",
            f"{str(path)!r} is not a readable CIFAR-10 batch ({type(err).__name__})",
            fix,
        ) from None
    data = entry.get("data") if isinstance(entry, dict) else None
    labels = entry.get("labels", entry.get("fine_labels")) if isinstance(entry, dict) else None
    n = data.shape[0] if isinstance(data, _Array) else -1
    if (
        not isinstance(data, _Array)
        or data.dtype != np.uint8
        or len(data.shape) != 2
        or data.shape[1] != 3 * 32 * 32
        or not (
            (isinstance(labels, list) and len(labels) == n)
            or (isinstance(labels, _Array) and labels.shape == (n,))
        )
    ):
        raise DatasetError(
            "learning.data_dir",
            f"{str(path)!r} is not a CIFAR-10 batch (a dict with uint8 data of shape (M, 3072) "
            "and M labels)",
            fix,
        )
    y = _cifar_labels(labels, n)
    if y is None:
        raise DatasetError(
            "learning.data_dir",
            f"{str(path)!r} has labels outside 0..{NUM_CLASSES - 1}",
            fix,
        )
    return data.to_numpy().reshape(-1, 3, 32, 32), y


def _load_cifar10(root: Path) -> CompactSet:
    base = root / "cifar-10-batches-py"
    mean = torch.tensor(_CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(_CIFAR_STD).view(1, 3, 1, 1)
    out: list[CompactImages | torch.Tensor] = []
    for names in (_CIFAR_TRAIN, _CIFAR_TEST):
        batches = [read_cifar_batch(base / n) for n in names]
        x = np.ascontiguousarray(np.concatenate([b[0] for b in batches]))
        y = np.concatenate([b[1] for b in batches])
        out += [CompactImages(torch.from_numpy(x), mean, std), torch.from_numpy(y)]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


def partition(
    labels: np.ndarray,
    num_devices: int,
    kind: str,
    alpha: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Split sample indices ``0..len(labels)-1`` across ``num_devices`` devices.

    * ``"iid"``: one random permutation cut into ``num_devices`` contiguous pieces
      (``np.array_split``): sizes differ by at most 1.
    * ``"dirichlet"``: label skew. For every class ``c`` independently, proportions
      ``p ~ Dir(alpha * 1_N)`` split that class's (shuffled) indices among the devices
      (cut points ``floor(cumsum(p) * n_c)``). Small ``alpha`` gives each device few classes,
      large ``alpha`` approaches IID. A device left empty then receives one sample moved from the
      device that holds the most (repeated until no device is empty; deterministic given ``rng``),
      so every device holds at least one sample.

    Args:
        labels: integer class labels, shape ``(M,)``, ``M >= num_devices``.
        num_devices: ``N >= 1``.
        kind: ``"iid"`` or ``"dirichlet"``.
        alpha: Dirichlet concentration ``> 0`` (ignored for IID).
        rng: the generator (the learner passes ``streams.global_("partition")``).

    Returns:
        ``N`` sorted ``int64`` index arrays: a disjoint cover of ``range(M)``, none empty.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    m = labels.shape[0]
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    if m < num_devices:
        raise ValueError(f"cannot give {num_devices} devices at least one of {m} samples each")
    if kind == "iid":
        parts = np.array_split(rng.permutation(m), num_devices)
    elif kind == "dirichlet":
        if not alpha > 0:
            raise ValueError(f"dirichlet alpha must be > 0, got {alpha}")
        buckets: list[list[np.ndarray]] = [[] for _ in range(num_devices)]
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet(np.full(num_devices, float(alpha)))
            if not np.all(np.isfinite(p)):  # alpha so small that the sampler underflows
                p = np.zeros(num_devices)
                p[rng.integers(num_devices)] = 1.0
            cuts = np.floor(np.cumsum(p)[:-1] * idx.size).astype(np.int64)
            for n, piece in enumerate(np.split(idx, np.clip(cuts, 0, idx.size))):
                buckets[n].append(piece)
        parts = [np.concatenate(b) if b else np.empty(0, np.int64) for b in buckets]
        sizes = np.array([p.size for p in parts], dtype=np.int64)
        for empty in np.flatnonzero(sizes == 0):
            donor = int(np.argmax(sizes))
            j = int(rng.integers(sizes[donor]))
            parts[empty] = parts[donor][j : j + 1]
            parts[donor] = np.delete(parts[donor], j)
            sizes[empty], sizes[donor] = 1, sizes[donor] - 1
    elif kind in PARTITION_FUNCTIONS:
        from . import extensions

        return extensions.partition(kind, PARTITION_FUNCTIONS[kind], labels, num_devices, rng)
    else:
        raise ValueError(f"unknown partition kind {kind!r}; known: 'iid', 'dirichlet'")
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
