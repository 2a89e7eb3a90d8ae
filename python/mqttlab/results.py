"""The results directory: everything one run leaves on disk, written once and read back by
`report`, `compare` and the analyses. The format is described in docs/results.md."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import platform
import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

import yaml

FORMAT = "mqttlab-results/1"
MANIFEST = "manifest.json"
COUNT_COLUMNS = ("t_s", "sent", "acked", "received", "dropped", "errors", "owed", "owed_delivered")
SERIES_COLUMNS = (*COUNT_COLUMNS, "e2e_p50_us", "e2e_p99_us", "e2e_max_us", "schedule_lag_max_us", "fault")

HistogramStats = Callable[[str], dict[str, Any]]


class ResultsError(Exception):
    """A results directory that cannot be written or read; the message names the path."""


@dataclass
class BrokerInfo:
    name: Optional[str]
    version: Optional[str]
    url: str
    pid: Optional[int]
    #: how a launched broker was configured (mode, file, settings with why) and its cgroup
    #: limits with what they did (throttling, OOM kills); None for a broker given by URL
    config: Optional[dict[str, Any]] = None
    limits: Optional[dict[str, Any]] = None
    #: where a launched broker's binary came from (a pinned upstream tree's commits among it)
    build: Optional[dict[str, Any]] = None

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "version": self.version, "url": self.url, "pid": self.pid}
        if self.config is not None:
            entry["config"] = self.config
        if self.build is not None:
            entry["build"] = self.build
        if self.limits is not None:
            entry["limits"] = self.limits
        return entry


@dataclass
class Results:
    path: Path
    manifest: dict[str, Any]
    scenario: dict[str, Any]
    plan: dict[str, Any]
    result: dict[str, Any]
    summary: dict[str, Any]
    series: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)  # rows of resources.csv

    @property
    def status(self) -> str:
        return str(self.manifest.get("status") or self.summary.get("status"))

    def histogram(self, name: str) -> Optional[str]:
        """The encoded HdrHistogram (V2, base64) called `name`, or None when the run has none."""
        path = self.path / "histograms" / f"{name}.hdr"
        return path.read_text(encoding="ascii").strip() if path.is_file() else None


# --- where ---------------------------------------------------------------------------------


def default_results_dir(scenario_name: str, now: Optional[dt.datetime] = None, root: Path = Path("results")) -> Path:
    """results/<YYYYmmdd-HHMMSS>-<name>/, with -2, -3, ... when that second is taken already."""
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    candidate = root / f"{stamp}-{scenario_name}"
    suffix = 2
    while candidate.exists():
        candidate = root / f"{stamp}-{scenario_name}-{suffix}"
        suffix += 1
    return candidate


# What a run leaves in its directory before its manifest: its live state, the figures of a run
# whose results could not all be written, and the log a suite opens before it starts the run.
RUN_TRACES = ("live.json", "summary.json", "run.log")


def check_writable(directory: Path) -> None:
    """Refuses, before any load is sent, a directory that already holds a run, one inside a run's
    results, and one holding other files: a run's files among them (or its results nested in
    another run's) would be read back as one run by `report` and `compare`."""
    if (directory / MANIFEST).exists():
        raise ResultsError(f"{directory}: already holds the results of a run; choose another --out")
    if directory.exists() and not directory.is_dir():
        raise ResultsError(f"{directory}: exists and is not a directory")
    holder = next((parent for parent in directory.absolute().parents if (parent / MANIFEST).is_file()), None)
    if holder is not None:
        raise ResultsError(f"{directory}: is inside the results of the run in {holder}; choose an --out outside it")
    if directory.is_dir() and any(directory.iterdir()) and not any((directory / name).exists() for name in RUN_TRACES):
        raise ResultsError(f"{directory}: holds other files and no run; a run writes into a new or empty directory (choose another --out)")


# --- command lines -------------------------------------------------------------------------

INVOCATIONS = "invocations.json"  # every command line that wrote into a suite or `smc paper` directory


def record_invocation(directory: Path, **about: Any) -> None:
    """Appends this process's command line (and `about`) to the directory's invocations.json, so
    a report or reproduction page can show the commands that made it, resumptions included."""
    path = directory / INVOCATIONS
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        earlier = []
    entry = {"command": "mqttlab " + shlex.join(sys.argv[1:]), **about,
             "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps([*earlier, entry], indent=2) + "\n", encoding="utf-8")


# --- host description ----------------------------------------------------------------------


def host_info() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "os": platform.system(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
    }


def _cpu_model() -> Optional[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> Optional[int]:
    try:
        with open("/proc/meminfo", encoding="utf-8") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024  # the file says kB and means KiB
    except (OSError, ValueError, IndexError):
        pass
    return None


# --- writing -------------------------------------------------------------------------------


def build_manifest(
    *,
    scenario_name: str,
    seed: int,
    broker: BrokerInfo,
    started_at: dt.datetime,
    command_line: str,
    status: str,
    mqttlab_version: str,
    engine_version: Optional[str],
    engine_commit: Optional[str] = None,
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "scenario": scenario_name,
        "seed": seed,
        "status": status,
        "started_at": started_at.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "command_line": command_line,
        "mqttlab_version": mqttlab_version,
        "engine_version": engine_version,
        "engine_commit": engine_commit,
        "broker": broker.as_dict(),
        "host": host_info(),
    }


def provenance(manifests: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Which engine and which broker builds measured these runs, from their manifests: the engine's
    commits ("not recorded" for a run made before manifests said) and each distinct build of a
    launched broker or gateway (a pinned upstream tree's commits among it)."""
    engines: set[str] = set()
    builds: list[dict[str, Any]] = []
    for manifest in manifests:
        engines.add(str(manifest.get("engine_commit") or "not recorded"))
        for part in ("broker", "gateway"):
            build = (manifest.get(part) or {}).get("build")
            if build and build not in builds:
                builds.append(build)
    return {"engine_commits": sorted(engines), "builds": builds}


def series_rows(result: dict[str, Any], stats: HistogramStats) -> list[dict[str, Any]]:
    """One row per second of the raw result's series, with e2e percentiles from its histogram."""
    rows = []
    for second in result.get("series") or []:
        row = {column: second.get(column, 0) for column in COUNT_COLUMNS}
        encoded = second.get("e2e")
        numbers = (stats(encoded) if encoded else None) or {}  # an empty histogram has no stats
        has_data = bool(numbers.get("count"))
        row["e2e_p50_us"] = numbers.get("p50_us") if has_data else None
        row["e2e_p99_us"] = numbers.get("p99_us") if has_data else None
        row["e2e_max_us"] = numbers.get("max_us") if has_data else None
        row["schedule_lag_max_us"] = second.get("schedule_lag_max_us")
        rows.append(row)
    return rows


def mark_faults(rows: list[dict[str, Any]], faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`fault` in each second a fault of the run touched (docs/faults.md), empty elsewhere."""
    for row in rows:
        t = int(row["t_s"])
        row["fault"] = next((f["kind"] for f in faults if f.get("applied") and f["start_s"] - 1 < t < f["end_s"]), None)
    return rows


def write_results(
    directory: Path,
    *,
    manifest: dict[str, Any],
    scenario_yaml: str,
    plan: Mapping[str, Any],
    result: dict[str, Any],
    summary: dict[str, Any],
    stats: HistogramStats,
    resources: Optional[dict[str, list[dict[str, Any]]]] = None,
) -> Path:
    """Writes the whole directory; manifest.json goes last, so its presence means complete.
    `resources` maps a process ("broker", "generator") to its per-second rows (environment/resources.py)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "histograms").mkdir(exist_ok=True)
        _write_json(directory / "summary.json", summary)  # first: the figures, should the disk fill
        (directory / "scenario.yaml").write_text(scenario_yaml, encoding="utf-8")
        _write_json(directory / "plan.json", plan)
        _write_json(directory / "result.json", result)
        rows = mark_faults(series_rows(result, stats), summary.get("faults") or [])
        (directory / "series.csv").write_text(_series_csv(rows), encoding="utf-8")
        for name, encoded in (result.get("histograms") or {}).items():
            if encoded:
                (directory / "histograms" / f"{name}.hdr").write_text(encoded.strip() + "\n", encoding="ascii")
        if resources is not None:
            (directory / "resources.csv").write_text(_resources_csv(resources), encoding="utf-8")
        # Written aside and renamed: a run interrupted while writing leaves no manifest at all,
        # never a partial one that would pass for a complete directory.
        _write_json(directory / f".{MANIFEST}.tmp", manifest)
        (directory / f".{MANIFEST}.tmp").replace(directory / MANIFEST)
    except OSError as error:
        raise ResultsError(f"{directory}: cannot write the results: {error}") from None
    return directory


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _series_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SERIES_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if value is None else value for key, value in row.items()})
    return buffer.getvalue()


# --- resources (CPU and memory of the broker and of the generator) ---------------------------

RESOURCE_COLUMNS = ("t_s", "process", "cpu_share", "cpu_seconds", "rss_bytes")


def _resources_csv(resources: dict[str, list[dict[str, Any]]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=RESOURCE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for process, rows in resources.items():
        for row in rows:
            writer.writerow({"t_s": row["second"], "process": process, "cpu_share": round(row["cpu_share"], 6),
                             "cpu_seconds": round(row["cpu_seconds"], 6), "rss_bytes": row["rss_bytes"]})
    return buffer.getvalue()


def summarize_resources(resources: dict[str, list[dict[str, Any]]], measured_s: Optional[float]) -> dict[str, Any]:
    """Per process, over the measured window only (seconds 0 .. measured_s, the same window as
    the rates): mean and peak CPU share in cores (1.0 = one core busy), mean and peak RSS."""
    summary: dict[str, Any] = {}
    for process, rows in resources.items():
        window = [row for row in rows if measured_s is None or row["second"] < max(1.0, measured_s)]
        if not window:
            summary[process] = None
            continue
        shares = [row["cpu_share"] for row in window]
        memory = [row["rss_bytes"] for row in window]
        summary[process] = {
            "seconds": len(window),
            "mean_cpu_share": sum(shares) / len(shares),
            "max_cpu_share": max(shares),
            "mean_rss_bytes": sum(memory) / len(memory),
            "peak_rss_bytes": max(memory),
        }
    return summary


# --- reading -------------------------------------------------------------------------------


def load_results(directory: Path) -> Results:
    directory = Path(directory)
    if not directory.is_dir():
        raise ResultsError(f"{directory}: no such results directory")
    if not (directory / MANIFEST).is_file():
        raise ResultsError(f"{directory}: not a results directory (no {MANIFEST})")
    return Results(
        path=directory,
        manifest=_read_json(directory / MANIFEST),
        scenario=_read_yaml(directory / "scenario.yaml"),
        plan=_read_json(directory / "plan.json"),
        result=_read_json(directory / "result.json"),
        summary=_read_json(directory / "summary.json"),
        series=_read_series(directory / "series.csv"),
        resources=_read_series(directory / "resources.csv"),
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing") from None
    except (OSError, ValueError) as error:
        raise ResultsError(f"{path}: unreadable: {error}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing") from None
    except (OSError, yaml.YAMLError) as error:
        raise ResultsError(f"{path}: unreadable: {error}") from None
    return data if isinstance(data, dict) else {}


def _read_series(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return [{key: _number(value) for key, value in row.items()} for row in csv.DictReader(handle)]


def _number(text: Optional[str]) -> Any:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # a label such as resources.csv's `process`
