"""mqttlab beside the best peer generator and the kernel's floor, in one run: CPU per message sent.

    .venv/bin/python benchmarks/peers.py [--pairs 3] [--seconds 15]     # at fixed rates
    .venv/bin/python benchmarks/peers.py --saturation [--pairs 3]       # as fast as each can send

The load, the same for every program: one Mosquitto on loopback (launched by mqttlab, tuned),
10 publishers x 1,000 msg/s, QoS 0, 64-byte payloads, MQTT 3.1.1, no subscribers.

The programs, run one after another in each round so that a round's programs share the host's
speed of the moment (it moves 3x between days here):
  mqttwrk         the best peer we can install (crates.io, `cargo install mqttwrk --version 0.2.0`
                  into benchmarks/.peers, not into the product); it paces on a 1 ms tokio
                  interval. Whole process.
  mqttlab         `mqttlab run` in each timing mode (exact: every send on its own wake-up;
                  ahead: options.send_ahead=50us, the default; grid: the 1 ms grid): the whole
                  process (Python, engine, results written) and the engine's own load-phase CPU
                  (summary generator.cpu_per_msg_us), with how late its sends left (schedule lag
                  p99 and max).
  floor           benchmarks/floor, the least any generator can do on the same schedule (sleep on
                  a timerfd until a send is due, write it), in each timing mode; load only.
  ..._batched     on the grid, mqttlab with options.submission=batched and the floor with
                  --batch uring: the sends due at a wake-up in one io_uring submission.
Each round gives the ratios mqttlab / mqttwrk and mqttlab / floor; printed are the medians over
the rounds of every figure and ratio, and a JSON report is written under benchmarks/results/.

With --saturation, the load is instead 10 publishers x 200,000 messages, QoS 0, 64 B, as fast as
each program can send them, into benchmarks/sink (our minimal MQTT server, far cheaper per message
than any broker, so that the generator is the limit; a fresh one per program, which also counts what
arrived). The figure users compare generators by is messages per core-second: messages sent over
the whole process's CPU (user + system).
  mqttwrk         `bench -r 0`, its unthrottled mode. Whole process.
  mqttlab         `mqttlab run` offered 1,000,000 msg/s per publisher, far beyond what it can send,
                  on the 1 ms grid and with the default timing; being open loop it drops the sends
                  that fall due while a connection's output is full, and the report says how many.
  QoS 1           when the scenario schema has `publishers.arrival: window` (send whenever the
                  in-flight window has room, as mqttwrk does): both at QoS 1 with a window of 100,
                  every message acknowledged, CPU per message at the same delivered count.
Each round gives the ratios mqttlab / mqttwrk of messages per core-second.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from mqttlab.brokers import get_launcher

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PEERS = ROOT / "benchmarks" / ".peers"
FLOOR = ROOT / "benchmarks" / "floor"
SINK = ROOT / "benchmarks" / "sink"
MQTTLAB = ROOT / ".venv" / "bin" / "mqttlab"
MQTTWRK_VERSION = "0.2.0"
PUBLISHERS, RATE_EACH, PAYLOAD = 10, 1_000, 64
SATURATION_MESSAGES, SATURATION_RATE, WINDOW = 200_000, 1_000_000, 100


def install_mqttwrk() -> Path:
    binary = PEERS / "bin" / "mqttwrk"
    if not binary.exists():
        print(f"installing mqttwrk {MQTTWRK_VERSION} into {PEERS} (a few minutes)", flush=True)
        subprocess.run(["cargo", "install", "--quiet", "mqttwrk", "--version", MQTTWRK_VERSION, "--root", str(PEERS)], check=True)
    return binary


def build_floor() -> Path:
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(FLOOR / "Cargo.toml")], check=True)
    return FLOOR / "target" / "release" / "floor"


def build_sink() -> Path:
    subprocess.run(["cargo", "build", "--release", "--quiet", "--locked", "--manifest-path", str(SINK / "Cargo.toml")], check=True)
    return SINK / "target" / "release" / "sink"


@contextmanager
def sink(binary: Path) -> Iterator[tuple[int, dict]]:
    """A fresh sink; its port, and after the block what it received (filled in on leaving)."""
    process = subprocess.Popen([str(binary)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    seen: dict = {}
    try:
        yield int(process.stdout.readline()), seen
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=10)
    seen.update(json.loads(out.strip().splitlines()[-1]))


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def whole_process(command: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Runs `command` to its end; its output and the CPU seconds it used, all of it."""
    before = children_cpu_s()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(command)}` failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done, children_cpu_s() - before


def mqttwrk(binary: Path, port: int, seconds: int) -> dict:
    done, cpu = whole_process([str(binary), "bench", "-S", "127.0.0.1", "-P", str(port), "-p", str(PUBLISHERS),
                               "-n", str(RATE_EACH * seconds), "-r", str(RATE_EACH), "-m", str(PAYLOAD)])  # fmt: skip
    sent = re.search(r"Aggregate PubStats.*?outgoing_publish:\s*(\d+)", done.stdout, re.S)
    if sent is None:
        raise SystemExit("mqttwrk printed no outgoing_publish count")
    messages = int(sent.group(1))
    return {"sent": messages, "process_us_per_msg": cpu * 1e6 / messages}


def per_core(sent: int, cpu: float, seen: dict) -> dict:
    """The saturation figures of one whole process that sent `sent` messages using `cpu` seconds,
    and the sink's own CPU per message, to show it was not the limit."""
    if seen["publishes"] != sent:  # what the program counts as sent should all have reached the sink
        print(f"  warning: {sent} sent, {seen['publishes']} received by the sink", flush=True)
    sink_us = (seen["cpu_user_s"] + seen["cpu_sys_s"]) * 1e6 / max(seen["publishes"], 1)
    return {"sent": sent, "cpu_s": cpu, "process_us_per_msg": cpu * 1e6 / sent, "msgs_per_core_s": sent / cpu, "sink_us_per_msg": sink_us}


def mqttwrk_saturated(binary: Path, sink_binary: Path, qos: int) -> dict:
    with sink(sink_binary) as (port, seen):
        done, cpu = whole_process([str(binary), "bench", "-S", "127.0.0.1", "-P", str(port), "-p", str(PUBLISHERS),
                                   "-n", str(SATURATION_MESSAGES), "-r", "0", "-m", str(PAYLOAD), "--publish-qos", str(qos),
                                   "-i", str(WINDOW)])  # fmt: skip
    sent = re.search(r"Aggregate PubStats.*?outgoing_publish:\s*(\d+)", done.stdout, re.S)
    if sent is None:
        raise SystemExit("mqttwrk printed no outgoing_publish count")
    # mqttwrk's count is of its publishes; the sink's of every PUBLISH that arrived, at any QoS.
    return per_core(int(sent.group(1)), cpu, seen)


def mqttlab_saturated(sink_binary: Path, out: Path, *, qos: int = 0, grid_ms: int = 0, window: bool = False, batched: bool = False) -> dict:
    command = [str(MQTTLAB), "run", "-P", str(PUBLISHERS), "-S", "0", "-t", "bench/%i", "-q", str(qos), "-s", f"{PAYLOAD}B",
               "-n", str(SATURATION_MESSAGES), "-o", str(out)]  # fmt: skip
    if window:
        command += ["--set", "publishers.arrival=window", "--inflight", str(WINDOW)]
    else:
        command += ["-r", str(SATURATION_RATE)]  # far beyond what it can send: it sends as fast as it can
    if grid_ms:
        command += ["--set", f"options.timer_resolution={grid_ms}ms"]
    if batched:
        command += ["--set", "options.submission=batched"]
    with sink(sink_binary) as (port, seen):
        _, cpu = whole_process([*command, "--broker", f"mqtt://127.0.0.1:{port}"])
    summary = json.loads((out / "summary.json").read_text())
    shutil.rmtree(out)
    messages = summary["messages"]
    return {**per_core(messages["sent"], cpu, seen), "dropped": messages["dropped"], "acked": messages["acked"],
            "engine_us_per_msg": summary["generator"]["cpu_per_msg_us"]}  # fmt: skip


def has_window_arrival() -> bool:
    schema = subprocess.run([str(MQTTLAB), "scenario", "schema"], capture_output=True, text=True, check=True).stdout
    return "window" in json.loads(schema)["$defs"]["Publishers"]["properties"]["arrival"].get("enum", [])


def mqttlab(port: int, seconds: int, grid_ms: int, out: Path, ahead_us: int = 0, batched: bool = False) -> dict:
    command = [str(MQTTLAB), "run", "--broker", f"mqtt://127.0.0.1:{port}", "-P", str(PUBLISHERS), "-S", "0",
               "-t", "bench/%i", "-q", "0", "-s", f"{PAYLOAD}B", "-r", str(RATE_EACH), "-d", f"{seconds}s",
               "--warmup", "0s", "-o", str(out)]  # fmt: skip
    if grid_ms:
        command += ["--set", f"options.timer_resolution={grid_ms}ms"]
    command += ["--set", f"options.send_ahead={ahead_us}us"]  # 0: every send wakes on its own
    if batched:
        command += ["--set", "options.submission=batched"]
    _, cpu = whole_process(command)
    summary = json.loads((out / "summary.json").read_text())
    sent = summary["messages"]["sent"]
    generator = summary["generator"]
    shutil.rmtree(out)
    return {"sent": sent, "process_us_per_msg": cpu * 1e6 / sent, "engine_us_per_msg": generator["cpu_per_msg_us"],
            "lag_p99_us": generator["schedule_lag_p99_us"], "lag_max_us": generator["schedule_lag_max_us"]}


def floor(binary: Path, port: int, seconds: int, grid_ms: int, ahead_us: int = 0, batched: bool = False) -> dict:
    done, _ = whole_process([str(binary), "pub", f"127.0.0.1:{port}", "--clients", str(PUBLISHERS),
                             "--rate", str(PUBLISHERS * RATE_EACH), "--seconds", str(seconds), "--grid-us", str(grid_ms * 1000),
                             "--ahead-us", str(ahead_us), "--batch", "uring" if batched else "none"])  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"sent": out["messages"], "load_us_per_msg": out["us_per_msg"]}


def median(rounds: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def write_report(report: dict, name: str) -> None:
    print("\nmedians over the rounds:")
    for key, value in report["medians"].items():
        print(f"  {key:<40} {value:.4g}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"written {out}")


def host() -> dict:
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "kernel": platform.release()}


def saturation(pairs: int) -> None:
    wrk, sink_binary = install_mqttwrk(), build_sink()
    window = has_window_arrival()
    print(f"into benchmarks/sink: {PUBLISHERS} publishers x {SATURATION_MESSAGES:,} messages, {PAYLOAD} B, as fast as each "
          f"program can send; QoS 1 window-filling: {'yes' if window else 'skipped (no publishers.arrival: window)'}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        programs: dict[str, Callable[[], dict]] = {
            "mqttwrk": lambda: mqttwrk_saturated(wrk, sink_binary, 0),
            "mqttlab_grid": lambda: mqttlab_saturated(sink_binary, run, grid_ms=1),
            "mqttlab_default": lambda: mqttlab_saturated(sink_binary, run),
            "mqttlab_grid_batched": lambda: mqttlab_saturated(sink_binary, run, grid_ms=1, batched=True),
        }
        if window:
            programs["mqttwrk_qos1"] = lambda: mqttwrk_saturated(wrk, sink_binary, 1)
            programs["mqttlab_window_qos1"] = lambda: mqttlab_saturated(sink_binary, run, qos=1, window=True)
        rounds: list[dict] = []
        for k in range(max(pairs, 1)):
            measured = {name: run() for name, run in programs.items()}
            row: dict = {f"{name}.{key}": value for name, figures in measured.items() for key, value in figures.items()}
            pairs_of = [("grid", "mqttlab_grid", "mqttwrk"), ("default", "mqttlab_default", "mqttwrk"),
                        ("grid batched", "mqttlab_grid_batched", "mqttwrk")]
            if window:
                pairs_of.append(("qos1 window", "mqttlab_window_qos1", "mqttwrk_qos1"))
            for mode, ours, theirs in pairs_of:
                row[f"{mode}: msgs per core / mqttwrk"] = measured[ours]["msgs_per_core_s"] / measured[theirs]["msgs_per_core_s"]
                row[f"{mode}: engine msgs per core / mqttwrk"] = measured[theirs]["process_us_per_msg"] / measured[ours]["engine_us_per_msg"]
            rounds.append(row)
            print(f"round {k + 1}: " + ", ".join(f"{key} {value:.4g}" for key, value in row.items()), flush=True)
    write_report({"host": host(), "load": "saturation", "rounds": rounds, "medians": {key: median(rounds, key) for key in rounds[0]}},
                 "peers-saturation")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3, help="rounds of all programs (at least 3)")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--ahead-us", type=int, default=50, help="the send_ahead window of the `mqttlab_ahead` program")
    ap.add_argument("--saturation", action="store_true", help="the saturation cases into benchmarks/sink instead of fixed rates")
    args = ap.parse_args()
    if args.saturation:
        return saturation(args.pairs)
    wrk, floor_binary = install_mqttwrk(), build_floor()
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, get_launcher("mosquitto").start(Path(tmp) / "broker") as broker:
        print(f"against {broker.version} at {broker.url()}; {PUBLISHERS} x {RATE_EACH} msg/s, QoS 0, {PAYLOAD} B, "
              f"{args.seconds} s per program", flush=True)  # fmt: skip
        programs: dict[str, Callable[[], dict]] = {
            "mqttwrk": lambda: mqttwrk(wrk, broker.port, args.seconds),
            "mqttlab_exact": lambda: mqttlab(broker.port, args.seconds, 0, Path(tmp) / "run"),
            "mqttlab_ahead": lambda: mqttlab(broker.port, args.seconds, 0, Path(tmp) / "run", ahead_us=args.ahead_us),
            "floor_exact": lambda: floor(floor_binary, broker.port, args.seconds, 0),
            "floor_ahead": lambda: floor(floor_binary, broker.port, args.seconds, 0, ahead_us=args.ahead_us),
            "mqttlab_grid": lambda: mqttlab(broker.port, args.seconds, 1, Path(tmp) / "run"),
            "floor_grid": lambda: floor(floor_binary, broker.port, args.seconds, 1),
            "mqttlab_grid_batched": lambda: mqttlab(broker.port, args.seconds, 1, Path(tmp) / "run", batched=True),
            "floor_grid_batched": lambda: floor(floor_binary, broker.port, args.seconds, 1, batched=True),
        }
        for k in range(max(args.pairs, 1)):
            measured = {name: run() for name, run in programs.items()}
            row: dict = {f"{name}.{key}": value for name, figures in measured.items() for key, value in figures.items()}
            for mode, floor_mode in (("exact", "exact"), ("ahead", "ahead"), ("grid", "grid"), ("grid_batched", "grid_batched")):
                ours = measured[f"mqttlab_{mode}"]
                row[f"{mode}: process / mqttwrk"] = ours["process_us_per_msg"] / measured["mqttwrk"]["process_us_per_msg"]
                row[f"{mode}: engine / mqttwrk"] = ours["engine_us_per_msg"] / measured["mqttwrk"]["process_us_per_msg"]
                row[f"{mode}: engine / floor"] = ours["engine_us_per_msg"] / measured[f"floor_{floor_mode}"]["load_us_per_msg"]
            rounds.append(row)
            print(f"round {k + 1}: " + ", ".join(f"{key} {value:.3g}" for key, value in row.items()), flush=True)
    report = {"host": host(), "broker": broker.version, "seconds": args.seconds, "rounds": rounds,
              "medians": {key: median(rounds, key) for key in rounds[0]}}  # fmt: skip
    write_report(report, "peers")


if __name__ == "__main__":
    main()
