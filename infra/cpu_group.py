"""One CPU cgroup for the browsers: Chromium's processes together get one CPU weight.

A niceness lowers each process's weight, but a machine running forty renderers at niceness 10
still gives the browsers forty small weights against the broker's one. A cgroup weighs the group:
with ``WEBGYM_BROWSER_CPU_WEIGHT=100`` all the browsers together weigh as much as one ordinary
process, so a woken broker or client thread runs at once while they saturate the cores, and
idle cores still go to the browsers (a weight is not a quota).

The group is ``webgym-browsers`` under the cpu controller: cgroup v2 (``cpu.weight``, written as
given) where the unified hierarchy has the controller, else cgroup v1 (``cpu.shares``, the weight
scaled so that 100 is v1's default 1024). Creating it needs the right to write there (root, or a
delegated cgroup); the Chromium wrapper (:func:`infra.chromium.launcher`) writes its own pid into
the group before it execs the browser, and every process the browser forks stays in it.

Unset, the setting means :data:`AUTO_WEIGHT` where such a group can be made and no group where it
cannot (:func:`group_for`): the hop's tail under load needs it, and a worker without the rights
still starts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP = "webgym-browsers"
V2_DEFAULT_WEIGHT, V1_DEFAULT_SHARES = 100, 1024
# The weight an unset WEBGYM_BROWSER_CPU_WEIGHT gives where a group can be made: with it the hop's
# p99 under load was the unloaded one's (bench/results/browser_priority_weights.json: 10 against
# 50, alternating; at 50 it sat at its 25 ms target), and the throughput as at 50.
AUTO_WEIGHT = 10

log = logging.getLogger(__name__)


class CpuGroupUnavailable(RuntimeError):
    """No cgroup with a cpu controller can be made here, so a browser CPU weight cannot hold."""


@dataclass(frozen=True)
class CpuGroup:
    """A cgroup that a process joins by writing its pid to ``procs``."""

    path: Path
    version: int
    weight_file: Path
    weight: int  # as written to weight_file

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"


def v1_shares(weight: int) -> int:
    """cgroup v1 ``cpu.shares`` for a v2 ``cpu.weight``: 100 is 1024, at least v1's minimum 2."""
    return max(2, round(weight * V1_DEFAULT_SHARES / V2_DEFAULT_WEIGHT))


def browsers_group(weight: int, root: Path | None = None) -> CpuGroup:
    """The browsers' group under ``root`` (:data:`CGROUP_ROOT`) with ``weight``, created or
    re-weighted as needed (the same call again changes nothing). Raises CpuGroupUnavailable,
    saying what to do instead, when neither cgroup version offers a cpu controller this process
    can write."""
    if not 1 <= weight <= 10000:
        raise ValueError(f"a cgroup CPU weight is 1 to 10000, not {weight}")
    root = root or CGROUP_ROOT
    tried: list[str] = []
    controllers = root / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        try:
            subtree = root / "cgroup.subtree_control"
            if "cpu" not in subtree.read_text().split():
                subtree.write_text("+cpu")
            return _weighted(root / GROUP, 2, "cpu.weight", weight)
        except OSError as exc:
            tried.append(f"cgroup v2 at {root}: {exc}")
    else:
        tried.append(f"cgroup v2 at {root}: no cpu controller")
    v1 = root / "cpu"
    if (v1 / "cpu.shares").exists():
        try:
            return _weighted(v1 / GROUP, 1, "cpu.shares", v1_shares(weight))
        except OSError as exc:
            tried.append(f"cgroup v1 at {v1}: {exc}")
    else:
        tried.append(f"cgroup v1: no {v1 / 'cpu.shares'}")
    raise CpuGroupUnavailable(
        f"WEBGYM_BROWSER_CPU_WEIGHT={weight} needs a cgroup with a cpu controller this user can "
        f"write ({'; '.join(tried)}). Run the browser worker as root or in a cgroup delegated to "
        "its user, or unset WEBGYM_BROWSER_CPU_WEIGHT and use WEBGYM_BROWSER_NICE instead."
    )


def group_for(setting: int | None, root: Path | None = None) -> CpuGroup | None:
    """The browsers' group for ``WEBGYM_BROWSER_CPU_WEIGHT``: None for 0 (no group); for a
    weight, that group, raising CpuGroupUnavailable where it cannot be made (the operator asked
    for it); unset (None), the group of :data:`AUTO_WEIGHT` where it can be made, else None, said
    in the log (the browsers then run as they are, as before the weight existed)."""
    if setting == 0:
        return None
    if setting is not None:
        return browsers_group(setting, root)
    try:
        return browsers_group(AUTO_WEIGHT, root)
    except CpuGroupUnavailable as exc:
        log.info("browsers run without a CPU weight: %s", exc)
        return None


def _weighted(path: Path, version: int, weight_name: str, value: int) -> CpuGroup:
    path.mkdir(exist_ok=True)
    weight_file = path / weight_name
    if weight_file.read_text().strip() != str(value):
        weight_file.write_text(str(value))
    return CpuGroup(path, version, weight_file, value)


def group_of(pid: int, version: int) -> str | None:
    """The cpu cgroup path (``/webgym-browsers``) that process ``pid`` is in, or None if gone."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (version == 2 and names == "") or (version == 1 and "cpu" in names.split(",")):
            return path
    return None
