"""The tables of a comparison as plain rows (lists of dicts), shared by the HTML report, the
CSV files and the terminal, so that every table shown is also a CSV with the same columns."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional

from mqttlab.analysis import Comparison
from mqttlab.analysis.runs import FAULT_METRICS, STATE_METRICS

Table = list[dict[str, Any]]
SUMMARY_METRICS = ("throughput", "latency_p50", "latency_p99", "latency_max", "loss", "dropped", "broker_cpu", "broker_rss_peak")


def summary_keys(comparison: Comparison) -> tuple[str, ...]:
    """The figures of the summary table: the headline ones, then the faults' and the state's that
    the runs measured."""
    return SUMMARY_METRICS + tuple(metric.key for metric in FAULT_METRICS + STATE_METRICS if metric in comparison.metrics)


def csv_keys(comparison: Comparison) -> tuple[str, ...]:
    """The figures of the summary as a CSV: every one the runs have (the latency mean, the seeds'
    statistic, and round trips lost among them), where the terminal and the page show the headline ones."""
    return tuple(metric.key for metric in comparison.metrics)


HEADER_NOTE = (
    "Payloads of 16 B and more carry mqttlab's 16-byte measurement header; smaller ones (the seeds' "
    "1-byte messages) are measured by topic and sequence number (publishers.measure: topic-sequence), "
    "as each run's summary states."
)


def summary_table(comparison: Comparison, keys: Optional[tuple[str, ...]] = None) -> Table:
    """Per scenario and broker: each headline figure's mean and interval (or those of `keys`), and
    the difference from the baseline with its interval (wide: what `compare` prints)."""
    rows = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            row: dict[str, Any] = {"scenario": scenario.scenario, "broker": broker, "runs": len(group.runs),
                                   "offered_per_s": scenario.offered_per_s}
            for key in keys or summary_keys(comparison):
                estimate = group.estimates[key]
                row[f"{key}_mean"] = estimate.mean
                row[f"{key}_ci_low"] = estimate.low
                row[f"{key}_ci_high"] = estimate.high
                row[f"{key}_best"] = estimate.best
                difference = scenario.differences.get(broker, {}).get(key)
                row[f"{key}_diff"] = difference.difference if difference else None
                row[f"{key}_diff_low"] = difference.low if difference else None
                row[f"{key}_diff_high"] = difference.high if difference else None
            row["generator_limited_runs"] = group.generator_limited_runs
            row["violations"] = violations_text(group.violations, len(group.runs))
            rows.append(row)
    return rows


def violations_text(violations: dict[str, tuple[int, int]], runs: int) -> str:
    """`ordering 111 (2 of 3 runs)`, one kind after another; empty when no promise was broken."""
    return "; ".join(f"{kind} {count}" + (f" ({broke} of {runs} runs)" if runs > 1 else "") for kind, (count, broke) in violations.items())


def latency_table(comparison: Comparison) -> Table:
    """The latency of all repetitions pooled (histograms added), with the seed001-style mean ±
    standard deviation of the samples, in ms."""
    rows = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            stats = group.pooled_latency or {}
            row = {"scenario": scenario.scenario, "broker": broker, "measure": group.latency_measure, "samples": stats.get("count")}
            for key in ("mean_us", "stdev_us", "min_us", "p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us"):
                value = stats.get(key)
                row[key.replace("_us", "_ms")] = value / 1000.0 if value is not None else None
            rows.append(row)
    return rows


def runs_table(comparison: Comparison) -> Table:
    rows = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            for run in group.runs:
                row: dict[str, Any] = {"scenario": scenario.scenario, "broker": broker, "version": run.broker_version,
                       "started_at": run.started_at, "status": run.status, "generator_limited": run.generator_limited,
                       "latency_measure": run.latency_measure}
                row.update({metric.key: run.figures.get(metric.key) for metric in comparison.metrics})
                row["violations"] = violations_text({kind: (count, 1) for kind, count in run.violations.items()}, 1)
                row["path"] = str(run.path)
                rows.append(row)
    return rows


def scenarios_table(comparison: Comparison) -> Table:
    """What each scenario did, read from the first run's resolved scenario."""
    rows = []
    for scenario in comparison.scenarios:
        first = next(iter(scenario.groups.values())).runs[0]
        data = first.results.scenario
        pubs, subs, load = data.get("publishers") or {}, data.get("subscribers") or {}, data.get("load") or {}
        broker_url = str((first.results.manifest.get("broker") or {}).get("url") or "")
        rows.append({
            "scenario": scenario.scenario,
            "publishers": pubs.get("count"),
            "subscribers": subs.get("count"),
            "qos": pubs.get("qos"),
            "payload": _payload_text(pubs.get("payload")),
            "rate_per_publisher": pubs.get("rate"),
            "offered_per_s": scenario.offered_per_s,  # deliveries the schedule offered; none when the generator saturated
            "messages_per_publisher": pubs.get("messages"),
            "duration_s": load.get("duration"),
            "warmup_s": load.get("warmup"),
            "transport": _transport(broker_url),
        })
    return rows


def _transport(broker_url: str) -> str:
    """plain, tls, ws or wss: the scheme of the URL the clients connected to."""
    scheme = broker_url.split("://", 1)[0]
    return {"mqtts": "tls", "ssl": "tls", "ws": "ws", "wss": "wss"}.get(scheme, "plain")


def _payload_text(payload: Any) -> Optional[str]:
    if isinstance(payload, dict):
        if payload.get("dist") == "fixed":
            return f"{payload.get('size')} B"
        return ", ".join(f"{key}={value}" for key, value in payload.items())
    return None if payload is None else f"{payload} B"


def all_tables(comparison: Comparison) -> dict[str, Table]:
    """Table name (also its CSV file name) -> rows."""
    from mqttlab.reports.sweep import sweep_table

    tables = {
        "summary": summary_table(comparison, keys=csv_keys(comparison)),
        "latency": latency_table(comparison),
        "comparison": comparison.rows(),
        "scenarios": scenarios_table(comparison),
        "runs": runs_table(comparison),
    }
    from mqttlab.reports.overhead import bundling_table, connection_table, publish_table
    from mqttlab.reports.paper import paper_statistics_table
    from mqttlab.reports.rtt import rtt_table

    tables["paper_statistics"] = paper_statistics_table(comparison)
    sweep = sweep_table(comparison)
    if sweep:  # only comparisons that sweep the rate or the protocol (seed004) have this table
        tables["rate_sweep"] = sweep
    rtt = rtt_table(comparison)
    if rtt:  # round-trip runs (seed002): their figures, and the protocol overhead they were about
        tables["rtt"] = rtt
        tables["overhead_connection"] = connection_table(comparison)
        tables["overhead_publish"] = publish_table(comparison)
    bundling = bundling_table(comparison)
    if bundling:
        tables["bundling"] = bundling
    from mqttlab.reports.state import state_tables

    tables.update(state_tables(comparison))  # runs of the state workloads (docs/state.md): a table per scenario
    return tables


def write_csv(rows: Table, path: Path) -> Path:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if value is None else value for key, value in row.items()})
    return path
