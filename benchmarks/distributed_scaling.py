"""How the aggregate send rate grows from 1 to 2 Dask workers (LocalCluster, worker processes).

For each worker count the offered rate is raised step by step against one Mosquitto on loopback
(publishers only, QoS 0, 64 B: the broker only reads, so it keeps headroom longest). A step counts
when the generator kept its schedule (not generator-limited) and everything offered was sent.
Beside each step the CPU of the broker and of the whole machine is sampled, so the table says
what ran out first.

    .venv/bin/python benchmarks/distributed_scaling.py [--rates 10000,20000,40000,80000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import psutil

from mqttlab import engine
from mqttlab.brokers import get_launcher
from mqttlab.distributed import connect, run_plan
from mqttlab.planning import bind_broker, load_scenario, plan_of

PUBLISHERS = 20


def plan_for(port: int, total_rate: float, seconds: float) -> engine.Plan:
    overrides = {
        "publishers.count": PUBLISHERS, "subscribers.count": 0, "publishers.topic": "scale/%i",
        "publishers.qos": 0, "publishers.payload": 64, "publishers.rate": total_rate / PUBLISHERS,
        "load.duration": f"{seconds}s", "load.warmup": "1s", "load.grace": "1s",
    }  # fmt: skip
    scenario = load_scenario(None, overrides=overrides)
    return bind_broker(plan_of(scenario), f"mqtt://127.0.0.1:{port}", scenario)


def measure(client, broker_pid: int, port: int, rate: float, seconds: float) -> dict:
    broker = psutil.Process(broker_pid)
    cpu_before, wall_before = broker.cpu_times(), time.monotonic()
    psutil.cpu_percent(None)
    outcome = run_plan(plan_for(port, rate, seconds), client)
    machine = psutil.cpu_percent(None)
    cpu_after, wall_after = broker.cpu_times(), time.monotonic()
    broker_share = (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / (wall_after - wall_before)
    s = outcome.summary
    return {
        "offered": rate,
        "sent_per_s": s["rates"]["sent_per_s"],
        "dropped": s["messages"]["dropped"],
        "limited": s["generator_limited"],
        "lag_p99_ms": (s["generator"]["schedule_lag_p99_us"] or 0) / 1000,
        "gen_cpu_us_per_msg": s["generator"]["cpu_per_msg_us"],
        "broker_cpu": broker_share,
        "machine_cpu_pct": machine,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="10000,20000,40000,80000", help="total offered rates, msg/s")
    parser.add_argument("--seconds", type=float, default=3.0, help="load per step, warm-up of 1 s included")
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print(f"host: {os.cpu_count()} cores; {PUBLISHERS} publishers, QoS 0, 64 B, no subscribers")
    print(f"{'workers':>7} {'offered/s':>10} {'sent/s':>10} {'dropped':>8} {'limited':>8} {'lag p99 ms':>10} "
          f"{'gen µs/msg':>10} {'broker CPU':>10} {'machine %':>9}")  # fmt: skip
    with get_launcher("mosquitto").start(Path(tempfile.mkdtemp(prefix="scale-"))) as broker:
        for workers in (int(w) for w in args.workers.split(",")):
            with connect(f"local:{workers}") as client:
                for rate in rates:
                    row = measure(client, broker.pid, broker.port, rate, args.seconds)
                    print(f"{workers:>7} {row['offered']:>10.0f} {row['sent_per_s']:>10.0f} {row['dropped']:>8} "
                          f"{str(row['limited']):>8} {row['lag_p99_ms']:>10.2f} {row['gen_cpu_us_per_msg']:>10.2f} "
                          f"{row['broker_cpu']:>10.2f} {row['machine_cpu_pct']:>9.0f}", flush=True)  # fmt: skip
                    if row["limited"] and row["sent_per_s"] < 0.9 * rate:
                        break  # past this worker count's capacity: higher steps tell nothing new


if __name__ == "__main__":
    main()
