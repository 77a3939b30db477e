"""The sweep folder and its points' state, read before a sweep runs and recorded as it runs:
:func:`point_state` says what a point's folder holds (nothing, a run of this fingerprint
completed or to resume, a run of another, files not made by wflsim); :func:`check_points` turns
the states into each point's mode before anything runs or is written (refusing a folder that
cannot be used) and :func:`point_counts` sums them; :func:`shared_points` picks the points whose
identical runs share one folder (``same_as``); ``sweep.json``'s record of each point
(:func:`_point_entries`), a shared point's copy of its original's result (:func:`_follow`) and
the points' states after Ctrl-C (:func:`_mark_interrupted`) are built here, while
:mod:`wflsim.app.sweep` runs the points and writes the file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from wflsim.sim import rundir
from wflsim.sim.errors import ScenarioError

from . import folders
from .sweep_plan import GridPoint, PointOverride, SweepPlan, _digest, override_text


def adopt_names(plan: SweepPlan, out: Path) -> None:
    """Give ``plan``'s points the folder names that the sweep folder ``out`` already records
    for them (``sweep.json``: a point of the same overrides and seed), so that a sweep written
    under another naming (every override in full, before short names) is skipped or resumed in
    its own folders; a new point whose name a recorded point of other overrides holds gets a
    hash of its overrides. Changes ``plan`` in place; nothing without a readable
    ``sweep.json``."""
    manifest = rundir.read_json(out / "sweep.json")  # a link is not followed (refused later)
    records = manifest.get("points") if isinstance(manifest, dict) else None
    if not isinstance(records, dict):
        return
    known: dict[tuple[tuple[str, ...], Any], str] = {}
    for name, entry in records.items():
        if isinstance(entry, dict) and _plain_name(name):
            overrides = entry.get("overrides")
            if isinstance(overrides, list) and all(isinstance(o, str) for o in overrides):
                known[tuple(overrides), entry.get("seed")] = name
    renamed: dict[str, str] = {}
    points = []
    for p in plan.points:
        name = known.get((tuple(override_text(o) for o in p.overrides), p.seed))
        if name is None and p.name in records:  # held by a recorded point of other values
            readable, _, seed = p.name.rpartition("__")
            name = f"{readable}~{_digest(chr(0).join(map(override_text, p.overrides)))}__{seed}"
        if name is not None and name != p.name:
            renamed[p.name] = name
            p = replace(p, folder=name)
        points.append(p)
    if not renamed:
        return
    plan.points = points
    _rename_keys(plan.fingerprints, renamed)
    _rename_keys(plan.run_overrides, renamed)
    _rename_keys(plan.identities, renamed)
    _rename_keys(plan.datasets, renamed)


def _plain_name(name: object) -> bool:
    """Whether ``name`` (a point's name read from ``sweep.json``) is one a sweep gives a folder:
    letters, digits and ``-_.=,+~``, not starting with ``.``, at most 255 bytes (a hostile
    ``sweep.json`` cannot send a point to ``..`` or another folder)."""
    return (
        isinstance(name, str)
        and 0 < len(name.encode("utf-8")) <= 255
        and not name.startswith(".")
        and all(c.isalnum() or c in "-_.=,+~" for c in name)
    )


_V = TypeVar("_V")


def _rename_keys(table: dict[str, _V], renamed: dict[str, str]) -> None:
    """Rename the keys of ``table`` in place (``renamed``: old -> new), keeping its order."""
    items = [(renamed.get(k, k), v) for k, v in table.items()]
    table.clear()
    table.update(items)


def shared_points(plan: SweepPlan, out: Path | None = None) -> dict[str, str]:
    """The points that share another point's run: name -> the point whose folder holds it.

    With ``plan.dedup``, points whose runs are identical (equal
    :func:`~wflsim.app.sweep_plan.run_identity`) share one run: the first of them in grid order,
    or, when some of them already have folders in ``out`` (made without sharing, or before the
    grid changed), the first with a folder. A point with a folder of its own keeps it.
    """
    if not plan.dedup:
        return {}
    groups: dict[str, list[str]] = {}
    for p in plan.points:
        groups.setdefault(plan.identities.get(p.name, p.name), []).append(p.name)
    same_as: dict[str, str] = {}
    for names in groups.values():
        if len(names) < 2:
            continue
        own = [n for n in names if out is not None and _has_folder(out / n, plan, n)]
        original = own[0] if own else names[0]
        same_as.update((n, original) for n in names if n != original and n not in own)
    return same_as


def point_counts(plan: SweepPlan, out: Path, overwrite: bool = False) -> dict[str, int]:
    """What a sweep into ``out`` has before it starts: its ``points``, the ``runs`` they need
    (``shared``: points sharing another's run), and of those runs how many were ``completed``
    before, are to ``resume`` and are to ``start`` (new or recomputed).

    Raises:
        ScenarioError: as :func:`check_points`.
    """
    if out.is_dir():
        adopt_names(plan, out)
    same_as = shared_points(plan, out)
    modes = check_points(plan, out, overwrite) if out.is_dir() else {}
    counts = {"points": len(plan.points), "runs": 0, "shared": len(same_as)}
    counts.update(completed=0, resume=0, start=0)
    for p in plan.points:
        if p.name in same_as:
            continue
        counts["runs"] += 1
        mode = modes.get(p.name, "new")
        counts[{"skip": "completed", "resume": "resume"}.get(mode, "start")] += 1
    return counts


def _has_folder(run_dir: Path, plan: SweepPlan, name: str) -> bool:
    """Whether a point's folder holds anything of a run (or anything else)."""
    return run_dir.is_symlink() or point_state(run_dir, plan.fingerprints.get(name, {})) != "new"


def point_state(run_dir: Path, wanted: dict[str, Any]) -> str:
    """What a point's folder holds: ``new`` (nothing), ``completed`` / ``resume`` (a run of
    this fingerprint, finished or not), ``other`` (a run of another fingerprint), ``stale`` (a
    run killed before it wrote its manifest: nothing to keep), ``foreign`` (files not made by a
    wflsim run)."""
    if not run_dir.exists() or (run_dir.is_dir() and folders.never_started(run_dir)):
        return "new"  # nothing, or a run killed before it began (its lock, no marker)
    if not rundir.is_run_folder(run_dir):
        return "foreign"
    from .run import fingerprint_difference

    manifest = rundir.read_manifest(run_dir)
    if manifest is None:
        return "stale"  # killed before its manifest was written: nothing to keep
    if fingerprint_difference(manifest.get("fingerprint"), wanted):
        return "other"
    # a status alone is not trusted: an incomplete run is resumed (which checks its files)
    stopped = bool((manifest.get("summary") or {}).get("stopped_early"))  # ended on purpose
    done = manifest.get("frames_completed") == manifest.get("frames") or stopped
    return "completed" if manifest.get("status") == "completed" and done else "resume"


def check_points(plan: SweepPlan, out: Path, overwrite: bool) -> dict[str, str]:
    """Each point's mode (``skip``, ``new``, ``resume``, ``overwrite``), checked before anything
    runs or is written.

    Raises:
        ScenarioError: a point's folder holds a run of another fingerprint (without
            ``overwrite``) or files not made by wflsim.
    """
    modes: dict[str, str] = {}
    for p in plan.points:
        if (out / p.name).is_symlink():  # a point's folder is the sweep's: never a link
            raise rundir.link_error(out / p.name)
        rundir.check_no_links(out / p.name)
        st = point_state(out / p.name, plan.fingerprints.get(p.name, {}))
        if st == "foreign":
            raise ScenarioError(
                "--out",
                f"grid point {p.name}: {str(out / p.name)!r} holds files not made by a wflsim run",
                "choose another --out",
            )
        if st == "other" and not overwrite:
            from .run import fingerprint_difference

            made = (rundir.read_manifest(out / p.name) or {}).get("fingerprint")
            why = fingerprint_difference(made, plan.fingerprints[p.name])
            raise ScenarioError(
                "--out",
                f"grid point {p.name} in {str(out)!r} was made by another run ({why})",
                "pass --overwrite to recompute such points, or choose another --out",
            )
        modes[p.name] = {
            "completed": "skip",
            "new": "new",
            "resume": "resume",
            "other": "overwrite",
            "stale": "overwrite",
        }[st]
    return modes


#: The entries of a point's record that say how its run went (a point sharing another's run
#: has that point's).
_RESULT_KEYS = ("status", "summary", "error", "note")


def _point_entries(
    plan: SweepPlan,
    modes: dict[str, str],
    same_as: dict[str, str],
    previous: Any,
) -> tuple[dict[str, dict[str, Any]], list[GridPoint]]:
    """``sweep.json``'s record of each point (``previous``: the last execution's records, whose
    results a completed point keeps) and the points to run, in grid order. A point sharing
    another's run records ``same_as`` and ``dir``: that point's name, and its status."""
    previous = previous if isinstance(previous, dict) else {}
    entries: dict[str, dict[str, Any]] = {}
    todo: list[GridPoint] = []
    for p in plan.points:
        entry: dict[str, Any] = {
            "overrides": [override_text(o) for o in p.overrides],
            "seed": p.seed,
            "dir": same_as.get(p.name, p.name),
            "fingerprint": plan.fingerprints.get(p.name),
        }
        entry["values"] = _grid_values(p.overrides)
        if p.label:  # a comparison's variant: the label its claims select by
            entry["variant"] = p.label
        unused = [override_text(o) for o in p.overrides if o not in plan.applied(p)]
        if unused:
            entry["unused_overrides"] = unused
        mode = modes.get(p.name, "new")
        if p.name in same_as:
            entry["same_as"] = same_as[p.name]
        elif mode == "skip":
            before = previous.get(p.name)
            before = before if isinstance(before, dict) else {}
            entry = {**{k: v for k, v in before.items() if k in _RESULT_KEYS}, **entry}
            entry["status"] = "skipped (already completed)"
        else:
            entry["status"] = "pending"
            entry["mode"] = mode
            todo.append(p)
        entries[p.name] = entry
    for name in same_as:
        _follow(entries, name)
    return entries, todo


def _grid_values(overrides: tuple[PointOverride, ...]) -> dict[str, Any]:
    """A point's grid values as read (``{"scheme.tol": 1e-06}``), for readers of
    ``sweep.json`` (:mod:`wflsim.analysis.tidy` shows them as the point's configuration)."""
    from wflsim.sim.config.loading import Override, parse_override

    values: dict[str, Any] = {}
    for o in overrides:
        try:
            path, value = (list(o.path), o.value) if isinstance(o, Override) else parse_override(o)
        except ScenarioError:
            continue
        plain = isinstance(value, str | int | float | bool)  # not a TOML date or time
        values[".".join(path)] = value if plain else str(value)
    return values


def _follow(points: dict[str, dict[str, Any]], name: str) -> None:
    """Give the point ``name`` the result of the point whose run it shares."""
    entry = points[name]
    original = points[entry["same_as"]]
    for k in _RESULT_KEYS:
        entry.pop(k, None)
        if k in original:
            entry[k] = original[k]


def _mark_interrupted(manifest: dict[str, Any], out: Path) -> dict[str, int]:
    """After an interruption: every point not finished is ``interrupted`` (it had started: its
    folder has a manifest) or ``not started`` (a point sharing another's run: that point's
    state); returns the counts of the points' states."""
    counts = {"completed": 0, "interrupted": 0, "not started": 0, "failed": 0}
    points = manifest["points"]
    for name in sorted(points, key=lambda n: "same_as" in points[n]):  # followers last
        entry = points[name]
        st = str(entry.get("status", ""))
        if "same_as" in entry:
            _follow(points, name)
        elif not (st in ("completed", "failed") or st.startswith("skipped")):
            started = rundir.read_manifest(out / name) is not None
            entry["status"] = "interrupted" if started else "not started"
        st = str(entry.get("status", ""))
        key = "completed" if st.startswith("skipped") else st
        counts[key] = counts.get(key, 0) + 1
    return counts
