"""Reading a file a user names (a scenario, a sites file, a trace, a channel table, a run's
manifest or checkpoint, a data file): the one way every reader of the package opens it.

A path that names anything but a regular file (a FIFO, a device such as ``/dev/zero`` or
``/dev/urandom``, a socket, a folder) is refused with one line naming the field, before anything
is read: the path is checked with ``stat`` before it is opened, opened with ``O_NONBLOCK`` (a
FIFO put there between the check and the open never blocks the open) and checked again with
``fstat`` on the open file. Readers that take the whole file into memory read at most their cap
plus one byte (:func:`read_capped`), so a file that grows while it is read cannot take more
either. A regular file never blocks a read, so no read needs a timeout.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from .config.limits import shorten
from .errors import ScenarioError

#: ``open`` flags that refuse a symbolic link as the last component (0 where unsupported).
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    """What a file of mode ``mode`` is, in words (``a FIFO``, ``a character device``, ...)."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(
    path: str | os.PathLike[str],
    field: str,
    what: str = "input",
    *,
    follow_links: bool = True,
    name: bool = False,
) -> BinaryIO:
    """``path`` opened for reading (binary) if it is a regular file.

    Args:
        path: the file.
        field: the field or option that named it (the error's field).
        what: what the file is, in words (``"sites"``: "the sites file ... does not exist").
        follow_links: False refuses a symbolic link as the last component (``O_NOFOLLOW``).
        name: whether the error names the path too (False where ``field`` already does).

    Raises:
        ScenarioError: on ``field``: the path does not exist, cannot be opened, or is not a
            regular file (a FIFO, a device, a socket, a folder; a link with ``follow_links``
            False).
    """
    shown = f" {shorten(str(path), 200)}" if name else ""
    try:
        before = os.stat(path) if follow_links else os.lstat(path)
        if not stat.S_ISREG(before.st_mode):
            raise ScenarioError(
                field,
                f"the {what} path{shown} is not a regular file ({kind_of(before.st_mode)})",
                f"give a regular {what} file",
            )
        fd = os.open(path, _FLAGS | (0 if follow_links else NOFOLLOW))
    except FileNotFoundError:
        raise ScenarioError(
            field, f"the {what} file{shown} does not exist", "check the path"
        ) from None
    except OSError as err:
        raise ScenarioError(
            field,
            f"the {what} file{shown} cannot be opened ({err.strerror or type(err).__name__})",
            "check the path and its permissions",
        ) from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (
        before.st_dev,
        before.st_ino,
    ):
        os.close(fd)
        raise ScenarioError(
            field,
            f"the {what} path{shown} is not a regular file (it was replaced while opened)",
            f"give a regular {what} file",
        )
    return os.fdopen(fd, "rb")


def read_capped(
    path: str | os.PathLike[str],
    field: str,
    limit: int,
    what: str = "input",
    *,
    fix: str | None = None,
    follow_links: bool = True,
    name: bool = False,
) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most ``limit`` of
    them: at most ``limit + 1`` bytes are read, whatever the file's size says.

    Raises:
        ScenarioError: on ``field``: what :func:`open_regular` refuses, a read error, or a file
            larger than ``limit`` bytes (``fix``: what to do about it).
    """
    shown = f" {shorten(str(path), 200)}" if name else ""
    with open_regular(path, field, what, follow_links=follow_links, name=name) as f:
        try:
            data = f.read(limit + 1)
        except OSError as err:
            raise ScenarioError(
                field,
                f"the {what} file{shown} cannot be read ({err.strerror or type(err).__name__})",
            ) from None
    if len(data) > limit:
        raise ScenarioError(
            field,
            f"the {what} file{shown} is larger than {limit:,} bytes",
            fix or f"give a smaller {what} file",
        )
    return data


def utf8_text(raw: bytes, field: str, what: str = "input") -> str:
    """``raw`` (the bytes of a ``what`` file, :func:`read_capped`) as UTF-8 text.

    Raises:
        ScenarioError: on ``field``: bytes that are not UTF-8 text.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(
            field, f"the {what} file is not UTF-8 text", "save it as UTF-8 text"
        ) from None
