"""The `mqttlab capacity` searches a reproduction page judges claims about saturation from (a
paper's throughput where the broker was at its limit): each search's capacity with its bracket,
the scenario it searched and how the broker was configured and capped.

A source directory given to `mqttlab compare` is a capacity source when it holds searches and no
run outside them (a search's probes are results directories too, but they belong to the search).
A page's evidence keeps of each search only SEARCH_FILES, so the page reads it the same way."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from mqttlab.analysis.runs import ComparisonError, broker_label, find_result_directories
from mqttlab.reports.capacity import INSIDE_A_SEARCH, REPORT_FILE, find_searches

SEARCH_FILE = "search.json"  # the scenario the search varied the rate of (capacity/runner.py)
SEARCH_FILES = (REPORT_FILE, SEARCH_FILE, "curve.csv")


@dataclass(frozen=True)
class CapacitySearch:
    name: str  # the directory given to `mqttlab capacity -o` (with --brokers, the one holding each broker's)
    broker: str  # as comparisons label a broker: its configuration and limits when not the defaults
    status: str  # bracketed, generator_limited, above_max, below_min, out_of_probes (capacity/search.py)
    lower: Optional[float]  # the capacity: the highest rate shown sustained
    upper: Optional[float]  # the lowest rate above it at which a probe broke the objectives
    unit: str
    objectives: str
    limited_by: str
    probes: int
    generator_limited_probes: int
    qos: Optional[int]
    headline: str
    # the engine commits and broker builds of its probes (capacity.json's; empty for a search made before it said)
    provenance: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    # the host's busy cores over its probes (mean, max; every process's), None where not recorded
    host_busy: Optional[tuple[float, float]] = None

    @property
    def bracket(self) -> list[float]:
        """[lower, upper], an open end as 0 or infinity (a search that stopped before bracketing)."""
        return [self.lower if self.lower is not None else 0.0, self.upper if self.upper is not None else float("inf")]


def search_name(report: Path, broker: str) -> str:
    """A search's name: its directory, or with `--brokers` (one directory per broker inside, named
    after it) the directory holding them."""
    folder = report.parent
    return folder.parent.name if folder.name == broker else folder.name


def read_search(report: Path) -> CapacitySearch:
    data = json.loads(report.read_text(encoding="utf-8"))
    scenario = _scenario(report.parent)
    launch = scenario.get("launch") or {}
    limits = launch.get("limits") or {}
    name = str(data.get("broker") or scenario.get("broker") or "unknown")
    label = broker_label({"name": name, "config": {"mode": launch.get("config") or "tuned", "persistence": launch.get("persistence")},
                          "limits": {"cpus": limits.get("cpus"), "cpuset": limits.get("cpuset"), "memory_bytes": limits.get("memory")}})
    lower, upper = (data.get("interval_per_s") or [None, None])[:2]
    probes = data.get("probes") or []
    qos = (scenario.get("publishers") or {}).get("qos")
    return CapacitySearch(search_name(report, name), label, str(data.get("status")), _float(lower), _float(upper), str(data.get("unit") or "msg/s"),
                          ", ".join(str(o.get("slo")) for o in data.get("objectives") or []),
                          ", ".join(str(item.get("limit")) for item in data.get("limited_by") or []), len(probes),
                          sum(bool(p.get("generator_limited")) for p in probes), int(qos) if qos is not None else None,
                          str(data.get("headline") or ""), dict(data.get("provenance") or {}), _host_busy(data))


def _host_busy(data: dict[str, Any]) -> Optional[tuple[float, float]]:
    busy = data.get("host_busy_cores") or {}
    mean, most = _float(busy.get("mean")), _float(busy.get("max"))
    return (mean, most) if mean is not None and most is not None else None


def _scenario(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / SEARCH_FILE).read_text(encoding="utf-8")).get("scenario") or {}
    except (OSError, ValueError):
        return {}


def _float(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) else None


def searches_in(paths: Iterable[Path]) -> list[CapacitySearch]:
    return [read_search(report) for report in find_searches(list(paths))]


def matching(searches: list[CapacitySearch], pattern: str, brokers: Optional[list[str]]) -> list[CapacitySearch]:
    """The searches whose name matches `pattern` (a glob), of the brokers named (all without)."""
    return [s for s in searches if fnmatch.fnmatchcase(s.name, pattern)
            and (brokers is None or any(s.broker == b or s.broker.startswith(b + " (") for b in brokers))]


def is_capacity_source(path: Path) -> bool:
    """A directory holding capacity searches and no run outside them."""
    path = Path(path)
    if not path.is_dir() or not find_searches([path]):
        return False
    try:
        runs = find_result_directories([path])
    except ComparisonError:  # no results directory at all: a page's evidence keeps none of a search's probes
        return True
    searches = [report.parent for report in find_searches([path])]
    return all(_inside_a_search(run, searches) for run in runs)


def _inside_a_search(run: Path, searches: list[Path]) -> bool:
    return any(run.is_relative_to(search) and set(run.relative_to(search).parts) & set(INSIDE_A_SEARCH) for search in searches)


def search_files(source: Path) -> dict[str, Path]:
    """The files of `source`'s searches a page's evidence keeps, by their path inside it."""
    files = {}
    for report in find_searches([source]):
        for name in SEARCH_FILES:
            found = report.parent / name
            if found.is_file():
                files[found.relative_to(source).as_posix()] = found
    return files
