"""The persistence table of docs/state.md: what survives a broker restart, per broker, persistence
on and off, clean stop (SIGTERM) and crash (SIGKILL), each figure with the verdict of the broker's
documented promise (mqttlab.restart_survival). Two runs per cell: scenarios/persistence-queued.yaml
(sessions and queued messages of subscribers away across the restart) and
scenarios/persistence-retained.yaml (a retained read after it). A broker whose launcher has no
persistence to turn on gets one row for it, its launcher's refusal, and its runs with persistence
off. A cell of a run flagged generator-limited is marked ‡ (no verdict about the broker).

    .venv/bin/python benchmarks/persistence_table.py mosquitto hivemq rmqtt rumqttd nanomq
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

import mqttlab
from mqttlab.brokers import get_launcher
from mqttlab.exits import RunFailed

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
STOPS = {"term": "clean stop", "kill": "crash"}


def with_signal(name: str, signal: str, scratch: Path) -> Path:
    """The scenario file `name` with its restart ended by `signal`."""
    scenario = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    scenario["faults"][0]["signal"] = signal
    path = scratch / f"{name}-{signal}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def cell(verdict: dict[str, Any] | None) -> str:
    if not verdict:
        return "—"
    return f"{verdict['kept']:,} of {verdict['of']:,}: {verdict['verdict']}" + (" ‡" if verdict.get("generator_limited") else "")


def main() -> None:
    print("| broker | persistence | stop | sessions | queued | retained |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="mqttlab-persistence-") as scratch:
        for broker in sys.argv[1:]:
            refusal = get_launcher(broker).configure("tuned", persistence=True).persistence_problem()
            if refusal:
                print(f"| {broker} | on | — | refused: {refusal} | | |", flush=True)
            for persistence in (False,) if refusal else (True, False):
                for signal, stop in STOPS.items():
                    verdicts: dict[str, dict[str, Any]] = {}
                    version = broker
                    for name in ("persistence-queued", "persistence-retained"):
                        out = Path(scratch) / f"{broker}-{persistence}-{signal}-{name}"
                        try:
                            result = mqttlab.run(with_signal(name, signal, Path(scratch)), broker=broker,
                                                 set={"launch.persistence": persistence}, out=out)
                        except RunFailed as error:
                            print(f"| {broker} | {'on' if persistence else 'off'} | {stop} | did not run: {error} |")
                            continue
                        version = json.loads((result.directory / "manifest.json").read_text())["broker"]["version"] or broker
                        limited = bool(result.summary.get("generator_limited"))
                        verdicts.update({v["what"]: {**v, "generator_limited": limited}
                                         for v in result.summary.get("promises", []) if v["name"].startswith("restart_")})
                    print(f"| {version} | {'on' if persistence else 'off'} | {stop} | "
                          + " | ".join(cell(verdicts.get(what)) for what in ("sessions", "queued", "retained")) + " |", flush=True)


if __name__ == "__main__":
    main()
