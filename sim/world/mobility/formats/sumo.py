"""SUMO's floating car data (``sumo --fcd-output``), read with expat, one element at a time."""

from __future__ import annotations

from array import array
from decimal import Decimal
from pathlib import Path
from xml.parsers import expat

import numpy as np

from ....config.limits import MAX_DEVICES, shorten
from ....errors import ScenarioError
from .reading import MAX_ID_CHARS, MAX_SAMPLES, chunks, coordinate, sorted_samples, time_value
from .tracks import Tracks


class _FcdReader:
    """The expat handlers that collect an FCD file's samples, one element at a time."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.parser = expat.ParserCreate()
        p = self.parser
        p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.StartDoctypeDeclHandler = self._doctype
        p.EntityDeclHandler = self._doctype
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        self.depth = 0
        self.in_timestep = False
        self.index: dict[tuple[str, str], int] = {}
        self.kinds: list[str] = []
        self.ids: list[str] = []
        self.step_text: list[str] = []  # each timestep's time as written
        self.step_s: list[float] = []
        self.last_step: list[int] = []  # per device, the last timestep it was in
        self.run_start: list[int] = []  # per device, the first timestep of its current stay
        self.runs = array("q")  # (device, first timestep, timestep after the last), flattened
        self.sample_step = array("q")
        self.sample_device = array("q")
        self.x = array("d")
        self.y = array("d")

    def where(self) -> str:
        return f"line {self.parser.CurrentLineNumber}"

    def _doctype(self, *args: object) -> None:
        raise ScenarioError(
            self.source,
            f"{self.where()}: holds a document type declaration (<!DOCTYPE ...>), which SUMO's "
            "FCD output has not; wflsim reads no DTD and expands no entity",
            "remove the <!DOCTYPE ...> declaration",
        )

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if self.depth == 1 and name != "fcd-export":
            raise ScenarioError(
                self.source,
                f"{self.where()}: the root element is <{shorten(name, 30)}>, not <fcd-export>",
                "give the file written by sumo --fcd-output",
            )
        if self.depth == 2 and name == "timestep":
            self._timestep(attrs)
        elif name in ("vehicle", "person"):
            if self.depth == 3 and self.in_timestep:
                self._sample(name, attrs)
            elif self.depth == 2:
                raise ScenarioError(
                    self.source,
                    f"{self.where()}: a <{name}> outside a <timestep>",
                    "give the file written by sumo --fcd-output",
                )

    def _end(self, name: str) -> None:
        if self.depth == 2 and name == "timestep":
            self.in_timestep = False
        self.depth -= 1

    def _timestep(self, attrs: dict[str, str]) -> None:
        where = f"{self.where()}, <timestep>"
        text = attrs.get("time")
        if text is None:
            raise ScenarioError(
                self.source, f"{where} has no time attribute", 'give every <timestep time="...">'
            )
        if ":" in text:
            raise ScenarioError(
                self.source,
                f"{where}: the time is written as a clock time, not seconds",
                "run SUMO without --human-readable-time",
            )
        time_s = time_value(text, where, self.source)
        if self.step_s and not time_s > self.step_s[-1]:
            raise ScenarioError(
                self.source,
                f"{where}: time {time_s:g} s is not after the previous timestep's "
                f"({self.step_s[-1]:g} s)",
                "give the timesteps in increasing time, as SUMO writes them",
            )
        self.step_text.append(text.strip())
        self.step_s.append(time_s)
        self.in_timestep = True

    def _sample(self, kind: str, attrs: dict[str, str]) -> None:
        where = f"{self.where()}, <{kind}>"
        ident = attrs.get("id")
        if not ident or len(ident) > MAX_ID_CHARS:
            raise ScenarioError(
                self.source,
                f"{where}: {'no id' if not ident else 'an id longer than ' + str(MAX_ID_CHARS)}",
                f"give every <{kind}> an id of 1 to {MAX_ID_CHARS} characters",
            )
        for axis in ("x", "y"):
            if axis not in attrs:
                raise ScenarioError(
                    self.source,
                    f"{where} {shorten(ident, 30)!r} has no {axis} attribute",
                    "write the FCD output without --fcd-output.attributes that leave out x or y",
                )
        x = coordinate(attrs["x"], "x", where, self.source)
        y = coordinate(attrs["y"], "y", where, self.source)
        step = len(self.step_s) - 1
        d = self.index.get((kind, ident))
        if d is None:
            if len(self.ids) >= MAX_DEVICES:
                raise ScenarioError(
                    self.source,
                    f"{where}: more than {MAX_DEVICES:,} vehicles and persons",
                    "convert a part of the trace",
                )
            d = len(self.ids)
            self.index[(kind, ident)] = d
            self.kinds.append(kind)
            self.ids.append(ident)
            self.last_step.append(-2)
            self.run_start.append(step)
        last = self.last_step[d]
        if last == step:
            raise ScenarioError(
                self.source,
                f"{where}: {kind} {shorten(ident, 30)!r} appears twice in the timestep at "
                f"{self.step_s[-1]:g} s",
                f"keep one <{kind}> per id and timestep",
            )
        if last != step - 1:  # it arrives (again)
            if last >= 0:
                self.runs.extend((d, self.run_start[d], last + 1))
            self.run_start[d] = step
        self.last_step[d] = step
        if len(self.x) >= MAX_SAMPLES:
            raise ScenarioError(
                self.source,
                f"{where}: more than {MAX_SAMPLES:,} samples",
                "convert a part of the trace, or write it with a longer SUMO step",
            )
        self.sample_step.append(step)
        self.sample_device.append(d)
        self.x.append(x)
        self.y.append(y)

    def tracks(self, keep_time: bool) -> Tracks:
        """The samples and stays collected, times shifted so that the first timestep is 0
        (unless ``keep_time``)."""
        if not self.ids:
            raise ScenarioError(
                self.source,
                "holds no <vehicle> or <person> in any <timestep>",
                "give the file written by sumo --fcd-output for a run with traffic",
            )
        for d, last in enumerate(self.last_step):
            self.runs.extend((d, self.run_start[d], last + 1))
        if keep_time:
            step_s = np.array(self.step_s)
            origin = 0.0
        else:  # in decimal, so that 25200.1 - 25200 is 0.1
            base = Decimal(self.step_text[0])
            step_s = np.array([float(Decimal(t) - base) for t in self.step_text])
            origin = self.step_s[0]
        steps = np.frombuffer(self.sample_step, dtype=np.int64)
        runs = np.frombuffer(self.runs, dtype=np.int64).reshape(-1, 3)
        step_or_inf = np.append(step_s, np.inf)  # a stay to the last timestep: to the end
        time_s, device, x_m, y_m = sorted_samples(
            step_s[steps],
            np.frombuffer(self.sample_device, dtype=np.int64).copy(),
            np.frombuffer(self.x, dtype=np.float64).copy(),
            np.frombuffer(self.y, dtype=np.float64).copy(),
        )
        order = np.lexsort((runs[:, 1], runs[:, 0]))
        runs = runs[order]
        return Tracks(
            "sumo",
            tuple(self.kinds),
            tuple(self.ids),
            time_s,
            device,
            x_m,
            y_m,
            runs[:, 0].copy(),
            step_s[runs[:, 1]],
            step_or_inf[runs[:, 2]],
            origin,
        )


def read_sumo_fcd(path: str | Path, *, keep_time: bool = False) -> Tracks:
    """Read SUMO floating car data (``sumo --fcd-output``, plain or gzip).

    Read: the ``time`` of every ``<timestep>`` (s) and the ``id``, ``x`` and ``y`` (m, SUMO's
    network coordinates) of every ``<vehicle>`` and ``<person>`` in it. Ignored: every other
    attribute (``z``, ``angle``, ``speed``, ``lane``, ...) and element (``<container>``, ...).
    Devices are the vehicles and persons (a vehicle and a person may share an id: they are two
    devices) in the order they first appear (the timestep, then the order in the file). A
    device is present from the first timestep it is listed in until the first timestep in
    which it is no longer listed (``end_s``); one still listed in the last timestep is present to
    the end (``inf``); one that leaves and returns has several intervals.

    Args:
        path: the file.
        keep_time: keep SUMO's times; by default the first timestep is ``t = 0`` (times shifted
            exactly, in decimal).

    Raises:
        ScenarioError: not well-formed XML, a document type declaration (never read: no entity is
            declared or expanded), another root than ``<fcd-export>``, a timestep without a time
            in seconds or not after the previous one, a vehicle or person without id, ``x`` or
            ``y``, listed twice in a timestep, a number that is not a finite decimal within the
            bounds, too many devices or samples, an unreadable or too large file.
    """
    source = str(path)
    reader = _FcdReader(source)
    try:
        for chunk in chunks(Path(path), source):
            reader.parser.Parse(chunk, False)
        reader.parser.Parse(b"", True)
    except expat.ExpatError as err:
        raise ScenarioError(
            source,
            f"line {err.lineno}, column {err.offset + 1}: XML error: {expat.ErrorString(err.code)}",
            "give the file written by sumo --fcd-output (plain or gzip)",
        ) from None
    return reader.tracks(keep_time)
