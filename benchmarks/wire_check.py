"""mqttlab's latency against the wire (issue 37, item 2): runs through a launched Mosquitto with a
tshark capture on loopback (`options.capture`), every message matched by its measurement header
between the publisher's PUBLISH going to the broker and the broker's PUBLISH leaving for the
subscriber (mqttlab.analysis.wire_latency), and prints the capture's figures beside mqttlab's
e2e_uncorrected (actual send to receive: with kernel timestamps, the publisher's PUBLISH leaving
the host's stack to its arrival at the subscriber's) for the same deliveries, with the gap and
the issue's target judged by the rule printed under the table. Needs tshark and the right to
capture (root).

    .venv/bin/python benchmarks/wire_check.py                 # the five loads, 8 s each (1 s warm-up)
    .venv/bin/python benchmarks/wire_check.py --runs 3        # each load three times, the loads in turn
    .venv/bin/python benchmarks/wire_check.py --seconds 4 --keep /tmp/wire   # keep the results directories

Exits 1 when a matching is not exact (its problems are printed), 0 otherwise: the target's
verdict is information (one run on a shared host judges nothing alone), not the exit code."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import mqttlab
from mqttlab.analysis.wire_latency import wire_check

HISTOGRAM = "e2e_uncorrected"  # mqttlab's actual send → receive
# The target: within 10 µs of the wire at p50 and p90, at most 1.1 × the wire at p99,
# stated for one publisher at 50 and 1,000 msg/s.
TARGET_GAP_US = 10
TARGET_P99_RATIO = 1.1


def rule(histogram: str = HISTOGRAM) -> str:
    return (f"target (1 → 1 loads): |mqttlab − wire| ≤ {TARGET_GAP_US} µs at p50 and p90, and mqttlab p99 ≤ {TARGET_P99_RATIO:g} × wire p99; "
            f"mqttlab = {histogram}{' (actual send → receive on the engine’s clock, each stamped by the kernel where it could)' if histogram == HISTOGRAM else ''}; "
            "wire = broker in → broker out on lo")  # fmt: skip


@dataclass
class Case:
    pairs: int  # publishers, each with its own subscriber
    rate: float  # msg/s per publisher
    qos: int

    @property
    def name(self) -> str:
        return f"{self.pairs} → {self.pairs}, {self.rate:,g} msg/s{' each' if self.pairs > 1 else ''}, QoS {self.qos}"

    @property
    def judged(self) -> bool:
        return self.pairs == 1  # the loads the issue states its target for


CASES = [Case(1, 50, 0), Case(1, 1000, 0), Case(1, 50, 1), Case(1, 1000, 1), Case(10, 100, 1)]


def run_case(case: Case, seconds: float, warmup: float, out: Path, broker: str = "mosquitto", histogram: str = HISTOGRAM) -> dict[str, Any]:
    """One captured run of the default scenario (64 B payloads, publisher i → subscriber i) at
    `case`'s load, and its wire check against mqttlab's `histogram` (mqttlab.analysis.wire_latency)."""
    settings = {
        "publishers.count": case.pairs, "subscribers.count": case.pairs, "publishers.rate": case.rate,
        "publishers.qos": case.qos, "subscribers.qos": case.qos, "publishers.payload": 64,
        "load.duration": f"{seconds:g}s", "load.warmup": f"{warmup:g}s", "options.capture": True,
    }  # fmt: skip
    result = mqttlab.run(None, broker=broker, set=settings, out=out)
    if result.status != "completed":
        raise RuntimeError(f"{case.name}: the run ended {result.status}: {result.summary.get('error')}")
    return {**wire_check(result.directory, histogram), "send_stamps": result.summary["measurement"].get("send_stamps")}


def _kernel_stamped(check: dict[str, Any]) -> str:
    """How many deliveries the engine timed from the kernel's send stamp (the rest from its own)."""
    stamps = check.get("send_stamps")
    return "— (engine's stamps)" if not stamps else f"{stamps['kernel']:,} of {stamps['kernel'] + stamps['client']:,}"


def verdict(case: Case, check: dict[str, Any]) -> str:
    if not case.judged:
        return "— (no target stated)"
    gap, ratio = check["gap"], check["p99_ratio"]
    if gap is None or ratio is None:
        return "not measured"
    met = abs(gap["p50"]) <= TARGET_GAP_US and abs(gap["p90"]) <= TARGET_GAP_US and ratio <= TARGET_P99_RATIO
    return "met" if met else "missed"


def _figures(stats: dict[str, Any]) -> str:
    return " / ".join(f"{stats[key]:,}" for key in ("p50_us", "p90_us", "p99_us", "max_us"))


def table(rows: list[tuple[Case, dict[str, Any]]], histogram: str = HISTOGRAM) -> str:
    """The markdown table of the checks, one row per load, with the rule under it."""
    lines = ["| load | wire p50 / p90 / p99 / max (µs) | mqttlab p50 / p90 / p99 / max (µs) | gap p50 / p90 / p99 / max (µs) "
             "| p99 ratio | send → wire p50 / p99 (µs) | deliveries matched | sends kernel-stamped | target |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for case, check in rows:
        gap = check["gap"]
        gaps = " / ".join(f"{gap[key]:+,}" for key in ("p50", "p90", "p99", "max")) if gap else "—"
        counts = check["counts"]
        lines.append(f"| {case.name} | {_figures(check['wire'])} | {_figures(check['mqttlab'])} | {gaps} | {check['p99_ratio']} "
                     f"| {check['send_to_wire']['p50_us']:,} / {check['send_to_wire']['p99_us']:,} "
                     f"| {counts['measured']:,} of {counts['histogram']:,} | {_kernel_stamped(check)} | {verdict(case, check)} |")  # fmt: skip
    return "\n".join(lines) + f"\n\n{rule(histogram)}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="load duration of each run, warm-up included (default 8)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up, left out of both figures (default 1)")
    parser.add_argument("--broker", default="mosquitto", help="the broker mqttlab launches (default mosquitto)")
    parser.add_argument("--histogram", default=HISTOGRAM, help="mqttlab's figure to set beside the wire (default e2e_uncorrected)")
    parser.add_argument("--keep", type=Path, help="keep the results directories here (default: a temporary directory)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each load, the loads taken in turn (default 1)")
    args = parser.parse_args(argv)
    rows, failures = [], []
    with tempfile.TemporaryDirectory(prefix="mqttlab-wire-") as scratch:
        base = args.keep or Path(scratch)
        for run in range(args.runs):
            for index, case in enumerate(CASES):
                load_before = os.getloadavg()[0]
                out = base / f"{run}-{index}-{case.pairs}x{case.rate:g}-qos{case.qos}"
                check = run_case(case, args.seconds, args.warmup, out, args.broker, args.histogram)
                print(f"{case.name}: load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after", file=sys.stderr, flush=True)
                rows.append((case, check))
                failures += [f"{case.name}: {problem}" for problem in check["problems"]]
    rows.sort(key=lambda row: CASES.index(row[0]))  # a load's runs together, in the order they ran
    print(table(rows, args.histogram))
    if args.runs > 1:
        for case in (c for c in CASES if c.judged):
            met = sum(verdict(c, check) == "met" for c, check in rows if c is case)
            print(f"{case.name}: target met in {met} of {args.runs} runs")
    for failure in failures:
        print(f"NOT EXACT: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
