"""Building wflsim's ns-3 program: its C++ source ships in the package (``wflsim_lte.cc``
beside this module) and is compiled against the system's ns-3 on first use (or by ``wflsim ns3
build``) into a cache keyed by the source, the ns-3 version, the compiler and the flags.

ns-3 comes from the operating system's packages (Debian and Ubuntu: ``libns3-dev`` 3.37, with
``libgsl-dev``, without which the link fails, ``g++`` and ``pkg-config``); wflsim finds it
through ``pkg-config``. Where it is missing, or the compiler is, the error is one line naming the
packages to install (:class:`~wflsim.sim.errors.Ns3Unavailable`, a
:class:`~wflsim.sim.errors.ScenarioError` on ``uplink.mode``: the CLI exits with 2 before
writing anything). A build that fails names its compiler log.

The cache: ``$WFLSIM_NS3_CACHE``, else ``$XDG_CACHE_HOME/wflsim/ns3`` (``~/.cache/wflsim/ns3``);
one folder per key holding ``wflsim-lte`` (the program) and ``build.log``. Concurrent builds of
one key (a sweep's workers) take a file lock; the program appears atomically (written beside,
then renamed), so a process never runs a half-written one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import Ns3Unavailable

#: The C++ source of the program.
SOURCE = Path(__file__).resolve().with_name("wflsim_lte.cc")
#: The ns-3 modules the program links against (``pkg-config`` names).
PKG_CONFIG_MODULES = (
    "ns3-lte",
    "ns3-internet",
    "ns3-applications",
    "ns3-point-to-point",
    "ns3-mobility",
    "ns3-propagation",
    "ns3-spectrum",
    "ns3-network",
    "ns3-core",
)
#: The ns-3 version the program is written for (Debian 12's ``libns3-dev``).
NS3_VERSION = "3.37"
#: What to install where ns-3 is missing (Debian and Ubuntu package names).
OS_PACKAGES = "libns3-dev libgsl-dev g++ pkg-config"
#: The compiler flags (besides pkg-config's).
CXXFLAGS = ("-std=c++17", "-O2")
#: The program's name in its cache folder.
PROGRAM = "wflsim-lte"


@dataclass(frozen=True)
class Toolchain:
    """What a build uses: the compiler, ns-3's version and flags."""

    compiler: str
    compiler_version: str
    ns3_version: str
    ns3_flags: tuple[str, ...]

    def key(self) -> str:
        """The cache key: a hash of the source, the toolchain and the flags."""
        h = hashlib.sha256()
        h.update(SOURCE.read_bytes())
        for part in (self.compiler_version, self.ns3_version, *CXXFLAGS, *self.ns3_flags):
            h.update(b"\0" + part.encode())
        return h.hexdigest()[:20]


def cache_dir() -> Path:
    """Where built programs are kept (module docstring)."""
    env = os.environ.get("WFLSIM_NS3_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "wflsim" / "ns3"


def _missing(what: str) -> Ns3Unavailable:
    return Ns3Unavailable(
        f"{what}; [uplink] mode = \"ns3_lte\" builds wflsim's ns-3 program against the system's "
        "ns-3 LTE",
        f"install the OS packages (Debian/Ubuntu: sudo apt-get install {OS_PACKAGES}), or use "
        "another uplink.mode",
    )


def toolchain() -> Toolchain:
    """The compiler and ns-3 found on this machine.

    Raises:
        Ns3Unavailable: no ``pkg-config``, no ns-3 LTE for it, or no C++ compiler.
    """
    if shutil.which("pkg-config") is None:
        raise _missing("pkg-config is not installed")
    try:
        version = _run(["pkg-config", "--modversion", "ns3-lte"]).strip()
        flags = _run(["pkg-config", "--cflags", "--libs", *PKG_CONFIG_MODULES])
    except _Failed:
        raise _missing("ns-3 is not installed (pkg-config finds no ns3-lte)") from None
    compiler = os.environ.get("CXX", "").strip() or "g++"
    path = shutil.which(compiler)
    if path is None:
        raise _missing(f"no C++ compiler ({compiler})")
    try:
        cver = _run([path, "--version"]).splitlines()[0].strip()
    except (_Failed, IndexError):
        raise _missing(f"the C++ compiler {compiler} does not run") from None
    return Toolchain(path, cver, version, tuple(shlex.split(flags)))


def program_path(tools: Toolchain | None = None) -> Path:
    """Where the program of this toolchain is (built or not)."""
    tools = tools or toolchain()
    return cache_dir() / tools.key() / PROGRAM


def ensure_program(tools: Toolchain | None = None) -> Path:
    """The built program: from the cache, or built now (tens of seconds, once per source and
    toolchain).

    Raises:
        Ns3Unavailable: ns-3 or a compiler is missing, or the build failed (the message names
            the compiler log).
    """
    tools = tools or toolchain()
    folder = cache_dir() / tools.key()
    program = folder / PROGRAM
    if program.is_file() and os.access(program, os.X_OK):
        return program
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise Ns3Unavailable(
            f"cannot create the ns-3 program's cache folder {folder}: {err.strerror}",
            "set WFLSIM_NS3_CACHE to a writable folder",
        ) from None
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
        if program.is_file() and os.access(program, os.X_OK):
            return program
        return _build(tools, folder, program)


def _build(tools: Toolchain, folder: Path, program: Path) -> Path:
    """Compile into a temporary file beside ``program``, then rename it (atomic)."""
    log = folder / "build.log"
    tmp = folder / f".{PROGRAM}.{os.getpid()}.tmp"
    cmd = [tools.compiler, *CXXFLAGS, str(SOURCE), "-o", str(tmp), *tools.ns3_flags]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as err:
        raise _missing(f"the C++ compiler cannot run ({err.strerror})") from None
    log.write_text(f"$ {shlex.join(cmd)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise Ns3Unavailable(
            f"building wflsim's ns-3 program failed (exit {done.returncode}; compiler log: {log})",
            f"read the log; ns-3 {tools.ns3_version} is installed, the program is written for "
            f"{NS3_VERSION} (Debian/Ubuntu: {OS_PACKAGES})",
        )
    os.replace(tmp, program)
    return program


class _Failed(Exception):
    """A helper command failed."""


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        raise _Failed from None
    if done.returncode != 0:
        raise _Failed
    return done.stdout
