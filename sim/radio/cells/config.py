"""The scenario's ``[cells]`` table: several base stations, their bands and uplinks, how devices
associate with them, and what the scheme plans on (docs/cells.md). Without the table a run has
one cell, the paper's, exactly as before."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ...config.distributions import WHOLE_NUMBER, Strict, lists_as_pairs
from ...config.limits import path_problem, shorten
from ...errors import ScenarioError
from ...files import read_capped, utf8_text

_Float = Annotated[float, Field(allow_inf_nan=False)]
#: Farthest a site may be from the origin on either axis, m (as ``cells.area_radius_m``).
MAX_SITE_M = 1e6
_Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_SITE_M, le=MAX_SITE_M)]

#: The most sites a layout may have (5 hexagonal rings: 91 sites).
MAX_SITES = 1000
#: The most hexagonal rings (``1 + 3 R (R + 1)`` sites).
MAX_RINGS = 10

#: A cell's uplink as ``cells.uplink`` may set it.
CellUplinkChoice = Literal["dedicated", "ofdma", "tdma"]
#: A cell's uplink in a run's layout: a choice, or an LTE eNB of ns-3 (``[uplink] mode =
#: "ns3_lte"``: every cell one eNB).
CellUplinkMode = Literal["dedicated", "ofdma", "tdma", "ns3_lte"]


def cell_uplink_mode(mode: str) -> CellUplinkMode:
    """``[uplink] mode`` as a cell's default uplink. Under ``aircomp`` each cell's uploads are
    its over-the-air sum, one common transmission played in closed form: no event shares a
    cell's band, as on dedicated bands (the sums of co-band cells still interfere). Under
    ``ns3_lte`` every cell is an LTE eNB in ns-3, whose scheduler shares its band."""
    if mode == "aircomp":
        return "dedicated"
    if mode not in ("dedicated", "ofdma", "tdma", "ns3_lte"):
        raise ValueError(f"uplink mode {mode!r} is not a cell's uplink")
    return mode  # type: ignore[return-value]


class CellsConfig(Strict):
    """Several cells (docs/cells.md): a hexagonal layout (``rings``) or explicit sites
    (``sites_m``), the frequency reuse (``reuse_factor`` or ``bands``), each cell's uplink,
    association with hysteresis, and what the scheme plans on (``plan_on``)."""

    rings: int | None = Field(
        None,
        ge=0,
        le=MAX_RINGS,
        description="hexagonal layout: rings of sites around the centre (0: 1 site, 1: 7, 2: 19)",
    )
    inter_site_distance_m: _Float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description="hexagonal layout: distance between neighbouring sites, m "
        "(default sqrt(3) network.cell_radius_m: hexagons of circumradius cell_radius_m)",
    )
    sites_m: list[tuple[_Coordinate, _Coordinate]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_SITES,
        description="explicit sites: [[x, y], ...] in metres (the first is cell 0), within "
        "1e6 m of the origin on each axis",
    )
    sites_file: str | None = Field(
        None,
        description="explicit sites from a CSV file with columns x_m, y_m (and band), one row "
        "per site; a relative path is taken from the scenario file's folder",
    )
    reuse_factor: Annotated[Literal[1, 3, 7], WHOLE_NUMBER] = Field(
        1, description="bands by frequency reuse: 1 (all cells one band), 3 or 7 (hexagonal grid)"
    )
    bands: list[Annotated[int, Field(ge=0, le=MAX_SITES)]] | None = Field(
        None,
        max_length=MAX_SITES,
        description="explicit band per cell (replaces reuse_factor): cells on one band interfere",
    )
    uplink: list[CellUplinkChoice] | None = Field(
        None,
        max_length=MAX_SITES,
        description="each cell's uplink (dedicated, ofdma, tdma); default: [uplink] mode in all",
    )
    association: Literal["strongest", "nearest"] = Field(
        "strongest",
        description="strongest long-term gain (with hysteresis) or nearest site (none)",
    )
    hysteresis_db: _Float = Field(
        3.0,
        ge=0.0,
        le=60.0,
        description="a served device hands over only to a cell stronger by more than this, dB",
    )
    area_radius_m: _Float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description="devices live in the disc of this radius about the origin, m "
        "(default: the farthest site's distance plus network.cell_radius_m)",
    )
    plan_on: Literal["noise", "mean_interference", "margin"] = Field(
        "noise",
        description="what p_min and the controller's costs see: the noise alone (the paper), "
        "noise plus the mean interference of the layout, or noise raised by margin_db",
    )
    margin_db: _Float = Field(
        0.0, ge=0.0, le=60.0, description='plan_on = "margin": the interference margin, dB'
    )
    planning_activity: _Float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description='plan_on = "mean_interference": probability that a co-band cell has an '
        "upload in flight (1: always, the worst case)",
    )

    @field_validator("sites_m", mode="before")
    @classmethod
    def _lists_as_pairs(cls, value: Any) -> Any:
        """A file's ``[[x, y], ...]`` holds lists: take them as the pairs."""
        return lists_as_pairs(value)

    @field_validator("sites_file")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None:
            problem = path_problem(value)
            if problem is not None:
                raise ValueError(f"{problem} (got {shorten(value)!r})")
        return value

    @model_validator(mode="after")
    def _combinations(self) -> CellsConfig:
        given = [self.rings is not None, self.sites_m is not None, self.sites_file is not None]
        if sum(given) != 1:
            raise ValueError(
                "give the sites one way: rings (a hexagonal layout), sites_m or sites_file"
            )
        if self.rings is None and self.inter_site_distance_m is not None:
            raise ValueError("inter_site_distance_m is for rings; the sites give the positions")
        if self.bands is not None and self.reuse_factor != 1:
            raise ValueError("give bands or reuse_factor, not both")
        if self.sites_file is None:  # a file's sites are counted once it is read
            n = self.num_cells
            for name, values in (("bands", self.bands), ("uplink", self.uplink)):
                if values is not None and len(values) != n:
                    raise ValueError(
                        f"{name} needs one entry per cell: {n} cells, {len(values)} given"
                    )
        if self.plan_on != "margin" and self.margin_db != 0.0:
            raise ValueError('margin_db is used with plan_on = "margin" only')
        if self.plan_on != "mean_interference" and self.planning_activity != 1.0:
            raise ValueError('planning_activity is used with plan_on = "mean_interference" only')
        return self

    @property
    def num_cells(self) -> int:
        """``C``, the number of sites (not known for ``sites_file`` before it is read:
        :func:`resolve_sites_file`)."""
        if self.sites_file is not None:
            raise ValueError("the sites of cells.sites_file are not read yet")
        if self.sites_m is not None:
            return len(self.sites_m)
        assert self.rings is not None
        return 1 + 3 * self.rings * (self.rings + 1)

    def isd_m(self, cell_radius_m: float) -> float:
        """The inter-site distance of a hexagonal layout, m (default ``sqrt(3) R``)."""
        if self.inter_site_distance_m is not None:
            return float(self.inter_site_distance_m)
        return math.sqrt(3.0) * float(cell_radius_m)


#: The largest sites file read, bytes.
MAX_SITES_FILE_BYTES = 1_000_000


def read_sites_file(
    path: Path, field: str = "cells.sites_file"
) -> tuple[list[tuple[float, float]], list[int] | None]:
    """The sites (and bands, when the file has a ``band`` column) of a CSV file with a header
    row naming ``x_m`` and ``y_m`` (metres) and one row per site.

    Raises:
        ScenarioError: a file that is missing, too large, not text, without those columns, with
            a value that is not a finite number (or a band that is not an integer >= 0), or with
            no row or more than :data:`MAX_SITES`, naming ``field``.
    """
    import csv
    import io

    def fail(problem: str, fix: str = "see docs/scenario.md, [cells]") -> ScenarioError:
        return ScenarioError(field, f"{path}: {problem}", fix)

    if not path.exists() and not path.is_symlink():
        raise fail(
            "no such file", "give the path of a CSV file (relative to the scenario's folder)"
        )
    raw = read_capped(
        path, field, MAX_SITES_FILE_BYTES, "sites", fix="give at most 1,000 sites", name=True
    )
    text = utf8_text(raw, field, "sites")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as err:
        raise fail(f"not a CSV file ({err})", "give a CSV file with a header row") from None
    if not rows or not {"x_m", "y_m"} <= {c.strip() for c in rows[0]}:
        raise fail("the header row must name the columns x_m and y_m (and optionally band)")
    head = [c.strip() for c in rows[0]]
    twice = sorted({c for c in head if c in ("x_m", "y_m", "band") and head.count(c) > 1})
    if twice:
        raise fail(
            f"the header row names {', '.join(twice)} more than once",
            "give each of x_m, y_m and band one column",
        )
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    if not 1 <= len(body) <= MAX_SITES:
        raise fail(f"{len(body)} sites; give 1 to {MAX_SITES}")
    ix, iy = head.index("x_m"), head.index("y_m")
    ib = head.index("band") if "band" in head else None
    sites: list[tuple[float, float]] = []
    bands: list[int] = []
    for line, r in enumerate(body, start=2):
        try:
            x, y = float(r[ix]), float(r[iy])
            band = int(r[ib]) if ib is not None else 0
        except (ValueError, IndexError):
            raise fail(f"row {line}: x_m and y_m must be numbers (band an integer)") from None
        if not (math.isfinite(x) and math.isfinite(y)) or band < 0 or band > MAX_SITES:
            raise fail(f"row {line}: positions must be finite, bands in [0, {MAX_SITES}]")
        sites.append((x, y))
        bands.append(band)
    return sites, (bands if ib is not None else None)


def resolve_sites_file(cfg: CellsConfig, base_dir: Path | None) -> CellsConfig:
    """``cfg`` with the sites (and bands) of its ``sites_file`` as ``sites_m`` (and ``bands``),
    the file resolved against ``base_dir`` (the scenario file's folder); ``cfg`` itself without a
    file.

    Raises:
        ScenarioError: the file (:func:`read_sites_file`), a file with a ``band`` column and
            ``bands`` or ``reuse_factor`` given too, or counts that do not match (``cells``).
    """
    if cfg.sites_file is None:
        return cfg
    path = Path(cfg.sites_file).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    sites, bands = read_sites_file(path)
    data = cfg.model_dump()
    data.update(sites_file=None, sites_m=sites)
    if bands is not None:
        if cfg.bands is not None or cfg.reuse_factor != 1:
            raise ScenarioError(
                "cells.sites_file",
                f"{path} gives a band per site, and the scenario gives cells.bands or "
                "cells.reuse_factor too",
                "give the bands one way",
            )
        data["bands"] = bands
    try:
        return CellsConfig.model_validate(data)
    except ValueError as err:
        raise ScenarioError("cells", f"with the sites of {path}: {err}".splitlines()[0]) from None
