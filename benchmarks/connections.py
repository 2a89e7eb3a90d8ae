"""Many connections from one mqttlab process: how fast they open, what each costs in memory, what
keeping them alive costs in CPU, and whether any is dropped.

    .venv/bin/python benchmarks/connections.py [--connections 100000] [--minutes 10]

One Mosquitto (launched, tuned) on loopback; one `mqttlab run` process opens --connections
publishers at --connect-rate (spread over 127.0.0.x when one address has too few source ports), keeps them alive (keep-alive 15 s: a PINGREQ after 15 s of silence) and publishes
from every one of them at a low rate (one QoS 1 message of 64 B every 2 minutes), for --minutes.
Printed: the connect rate (connections over the time from the first to the last one the broker
holds, counted by `ss` every 0.1 s), peak RSS and RSS per connection (less a one-connection run's RSS), the
generator's CPU while the connections only idle and publish, and the run's own accounting
(connections lost, messages sent, acknowledged and lost). The host's open-file limit bounds the
count for mqttlab and for the broker alike; where it is too low the run says so in one line.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mqttlab import engine
from mqttlab.brokers import get_launcher

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MQTTLAB = ROOT / ".venv" / "bin" / "mqttlab"
KEEPALIVE_S, PUBLISH_EVERY_S = 15, 120


def run(url: str, connections: int, seconds: float, out: Path, rate: float = 1 / PUBLISH_EVERY_S, connect_rate: float = 0) -> tuple[dict, dict]:
    """One `mqttlab run`; its summary, and what the live state showed of its connect ramp."""
    command = [str(MQTTLAB), "run", "--broker", url, "-P", str(connections), "-S", "0", "-t", "conn/%i", "-q", "1",
               "-s", "64B", "-r", str(rate), "-d", f"{seconds:g}s", "--warmup", "0s",
               "--set", f"mqtt.keepalive={KEEPALIVE_S}s", "--set", "load.grace=5s", "--set", f"load.connect_rate={connect_rate}",
               "-o", str(out)]  # fmt: skip
    log = open(out.parent / f"{out.name}.log", "w+")  # a pipe nobody reads would stop the run when full
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)
    port = url.split(":")[2].split("?")[0]
    first = last = None
    while child.poll() is None:
        # The broker's established connections, counted by the kernel every 0.1 s.
        listing = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True).stdout
        connected, now = listing.count("\n"), time.monotonic()
        if connected and first is None:
            first = (now, connected)
        if connected >= connections and last is None:
            last = (now, connected)
        time.sleep(0.1 if last is None else 1.0)
    log.seek(0)
    stderr = log.read()
    if child.returncode not in (0, 1):
        raise SystemExit(f"mqttlab run failed ({child.returncode}): {stderr.strip().splitlines()[-1] if stderr.strip() else ''}")
    ramp = {}
    if first and last and last[0] > first[0]:
        ramp = {"connect_s": round(last[0] - first[0], 2), "connects_per_s": round((last[1] - first[1]) / (last[0] - first[0]))}
    return json.loads((out / "summary.json").read_text()), ramp


def generator_samples(out: Path) -> list[dict]:
    with open(out / "resources.csv", newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["process"] == "generator"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=100_000)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--connect-rate", type=float, default=5000.0,
                    help="new connections per second (0 = all at once: past the broker's listen backlog, SYNs are dropped and retried)")
    args = ap.parse_args()
    try:
        engine.ensure_open_files(args.connections)  # with a margin; the broker launched next inherits it
    except engine.HostCannotRun as error:
        raise SystemExit(f"error: {error}") from None
    with tempfile.TemporaryDirectory() as tmp, get_launcher("mosquitto").start(Path(tmp) / "broker") as broker:
        url = f"mqtt://127.0.0.1:{broker.port}?name=mosquitto&pid={broker.pid}"
        print(f"against {broker.version}; {args.connections:,} connections for {args.minutes:g} min", flush=True)
        run(url, 1, 5, Path(tmp) / "one", rate=1.0)
        base_rss = max(float(r["rss_bytes"]) for r in generator_samples(Path(tmp) / "one"))
        summary, ramp = run(url, args.connections, args.minutes * 60, Path(tmp) / "many", connect_rate=args.connect_rate)
        samples = generator_samples(Path(tmp) / "many")
    peak_rss = max(float(r["rss_bytes"]) for r in samples)
    # CPU once every connection is up: the second half of the run, when only keep-alives and the
    # slow publishing are left.
    steady = [float(r["cpu_share"]) for r in samples if float(r["t_s"]) > args.minutes * 30]
    connections = summary["connections"]
    report = {
        "host": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "kernel": platform.release()},
        "broker": broker.version, "connections_asked": args.connections, "minutes": args.minutes, "connect_rate_asked": args.connect_rate,
        **ramp,
        "connected": connections["publishers"]["ok"], "failed": connections["publishers"]["failed"], "lost": connections["lost"],
        "peak_rss_mb": round(peak_rss / 2**20, 1), "one_connection_rss_mb": round(base_rss / 2**20, 1),
        "rss_per_connection_kb": round((peak_rss - base_rss) / max(1, args.connections) / 1024, 2),
        "steady_cpu_share": round(statistics.median(steady), 4) if steady else None,
        "messages": {k: summary["messages"][k] for k in ("sent", "acked", "lost", "dropped")},
        "status": summary["status"],
    }
    print(json.dumps(report, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"connections-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"written {path}")
    sys.exit(0)


if __name__ == "__main__":
    main()
