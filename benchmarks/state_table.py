"""The measured table of docs/state.md: scenarios/offline-sessions.yaml on each broker given, its
figures and promise verdicts in one Markdown row per broker.

    .venv/bin/python benchmarks/state_table.py mosquitto hivemq rumqttd nanomq ...
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import mqttlab
from mqttlab.exits import RunFailed

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "offline-sessions.yaml"


def row(broker: str, out: Path) -> str:
    try:
        result = mqttlab.run(SCENARIO, broker=broker, out=out / broker)
    except RunFailed as error:
        return f"| {broker} | did not run: {error} |||||||"
    s = result.summary
    offline, verdicts = s["offline"], {v["promise"]: v for v in s.get("promises", [])}
    drain, rate, held = offline["drain_s"], offline["drain_rate_per_s"], s["latency"].get("e2e_queued") or {}
    queue, session = verdicts["queued messages delivered"], verdicts["persistent session kept"]
    version = (result.directory / "manifest.json").read_text().split('"version": "', 1)[-1].split('"', 1)[0]

    def said(v: dict) -> str:
        extra = f", {v['name']} {v['broken']}" if v.get("broken") else ""
        extra += f", dropped by limit {v['limit']}: {v['dropped_by_limit']}" if v.get("dropped_by_limit") else ""
        return f"{v['verdict']} ({v['kept']}{extra})"

    return (f"| {version} | {offline['sessions_resumed']}/{offline['returned']} | {offline['delivered']:,} of {offline['owed']:,} "
            f"| {drain['p50'] * 1000:.2f} / {drain['p99'] * 1000:.2f} | {rate['p50']:,.0f} | {held.get('p50_us', 0) / 1000:,.0f} / {held.get('max_us', 0) / 1000:,.0f} "
            f"| {said(session)} | {said(queue)} |" if drain and rate else f"| {version} | {offline} ||||||")


def main() -> None:
    print("| broker | sessions resumed | held messages delivered | drain ms p50 / p99 | drain msg/s p50 | held e2e ms p50 / max | session kept | queue delivered |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="mqttlab-state-") as scratch:
        for broker in sys.argv[1:]:
            print(row(broker, Path(scratch)), flush=True)


if __name__ == "__main__":
    main()
