"""The measured tables of docs/state.md: each state workload's scenario on each broker given, its
figures and promise verdicts in one Markdown row per broker.

    .venv/bin/python benchmarks/state_table.py mosquitto hivemq rumqttd nanomq ...
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import mqttlab
from mqttlab.exits import RunFailed

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def said(verdict: dict[str, Any]) -> str:
    extra = f", {verdict['name']} {verdict['broken']}" if verdict.get("broken") else ""
    extra += f", dropped by limit {verdict['limit']}: {verdict['dropped_by_limit']}" if verdict.get("dropped_by_limit") else ""
    return f"{verdict['verdict']} ({verdict['kept']}{extra})"


def spread(value: Any, scale: float = 1000.0, digits: int = 2) -> str:
    return f"{value['p50'] * scale:,.{digits}f} / {value['p99'] * scale:,.{digits}f}" if value else "—"


def offline_row(s: dict[str, Any], v: dict[str, dict[str, Any]]) -> list[str]:
    o, held = s["offline"], s["latency"].get("e2e_queued") or {}
    rate = f"{o['drain_rate_per_s']['p50']:,.0f}" if o["drain_rate_per_s"] else "—"
    latency = f"{held['p50_us'] / 1000:,.0f} / {held['max_us'] / 1000:,.0f}" if held.get("count") else "—"
    return [f"{o['sessions_resumed']}/{o['returned']}", f"{o['delivered']:,} of {o['owed']:,}", spread(o["drain_s"]), rate, latency,
            said(v["session_lost"]), said(v["queued_lost"])]


def retained_row(s: dict[str, Any], v: dict[str, dict[str, Any]]) -> list[str]:
    r = s["retained"]
    return [f"{r['delivered']:,} of {r['expected']:,}", f"{r['complete']}/{r['subscribers']}", spread(r["first_s"]), spread(r["all_s"]),
            said(v["retained_missing"]), said(v["stale_retained"]), said(v["retained_unflagged"])]


def wills_row(s: dict[str, Any], v: dict[str, dict[str, Any]]) -> list[str]:
    w, latency = s["wills"], s["latency"].get("will") or {}
    timing = f"{latency['p50_us'] / 1000:,.2f} / {latency['max_us'] / 1000:,.2f}" if latency.get("count") else "—"
    return [f"{w['delivered']:,} of {w['expected']:,}", timing, said(v["will_missing"]), str(w["duplicated"])]


WORKLOADS: dict[str, tuple[list[str], Callable[[dict[str, Any], dict[str, dict[str, Any]]], list[str]]]] = {
    "offline-sessions": (["sessions resumed", "held messages delivered", "drain ms p50 / p99", "drain msg/s p50", "held e2e ms p50 / max",
                          "session kept", "queue delivered"], offline_row),
    "retained-read": (["retained values delivered", "subscribers complete", "SUBSCRIBE → first ms p50 / p99", "SUBSCRIBE → all ms p50 / p99",
                       "delivered", "latest", "flagged"], retained_row),
    "wills": (["wills delivered", "exit → will ms p50 / max", "will on reset", "copies"], wills_row),
}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mqttlab-state-") as scratch:
        for workload, (columns, row) in WORKLOADS.items():
            print(f"\n{workload}\n\n| broker | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
            for broker in sys.argv[1:]:
                try:
                    result = mqttlab.run(SCENARIOS / f"{workload}.yaml", broker=broker, out=Path(scratch) / workload / broker)
                except RunFailed as error:
                    print(f"| {broker} | did not run: {error} |")
                    continue
                version = json.loads((result.directory / "manifest.json").read_text())["broker"]["version"] or broker
                verdicts = {v["name"]: v for v in result.summary.get("promises", [])}
                print(f"| {version} | " + " | ".join(row(dict(result.summary), verdicts)) + " |", flush=True)


if __name__ == "__main__":
    main()
