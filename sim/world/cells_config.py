"""The scenario's ``[cells]`` table: several base stations, their bands and uplinks, how devices
associate with them, and what the scheme plans on (docs/cells.md). Without the table a run has
one cell, the paper's, exactly as before."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ..config.distributions import Strict, lists_as_pairs

_Float = Annotated[float, Field(allow_inf_nan=False)]

#: The most sites a layout may have (5 hexagonal rings: 91 sites).
MAX_SITES = 1000
#: The most hexagonal rings (``1 + 3 R (R + 1)`` sites).
MAX_RINGS = 10

CellUplinkMode = Literal["dedicated", "ofdma", "tdma"]


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
    sites_m: list[tuple[_Float, _Float]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_SITES,
        description="explicit sites: [[x, y], ...] in metres (the first is cell 0)",
    )
    reuse_factor: Literal[1, 3, 7] = Field(
        1, description="bands by frequency reuse: 1 (all cells one band), 3 or 7 (hexagonal grid)"
    )
    bands: list[Annotated[int, Field(ge=0, le=MAX_SITES)]] | None = Field(
        None,
        max_length=MAX_SITES,
        description="explicit band per cell (replaces reuse_factor): cells on one band interfere",
    )
    uplink: list[CellUplinkMode] | None = Field(
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

    @model_validator(mode="after")
    def _combinations(self) -> CellsConfig:
        if (self.rings is None) == (self.sites_m is None):
            raise ValueError(
                "give the sites either as rings (a hexagonal layout) or as sites_m, not both "
                "and not neither"
            )
        if self.sites_m is not None and self.inter_site_distance_m is not None:
            raise ValueError("inter_site_distance_m is for rings; sites_m gives the positions")
        if self.bands is not None and self.reuse_factor != 1:
            raise ValueError("give bands or reuse_factor, not both")
        n = self.num_cells
        for name, values in (("bands", self.bands), ("uplink", self.uplink)):
            if values is not None and len(values) != n:
                raise ValueError(f"{name} needs one entry per cell: {n} cells, {len(values)} given")
        if self.plan_on != "margin" and self.margin_db != 0.0:
            raise ValueError('margin_db is used with plan_on = "margin" only')
        if self.plan_on != "mean_interference" and self.planning_activity != 1.0:
            raise ValueError('planning_activity is used with plan_on = "mean_interference" only')
        return self

    @property
    def num_cells(self) -> int:
        """``C``, the number of sites."""
        if self.sites_m is not None:
            return len(self.sites_m)
        assert self.rings is not None
        return 1 + 3 * self.rings * (self.rings + 1)

    def isd_m(self, cell_radius_m: float) -> float:
        """The inter-site distance of a hexagonal layout, m (default ``sqrt(3) R``)."""
        if self.inter_site_distance_m is not None:
            return float(self.inter_site_distance_m)
        return math.sqrt(3.0) * float(cell_radius_m)
