"""How much the generator costs, and where it stops: the engine against Mosquitto on loopback.

    .venv/bin/python benchmarks/engine_bench.py [--repeat 3] [--quick]

Figures (64-byte payloads, MQTT 3.1.1, 10 publishers -> 10 subscribers on bench/%i):
  1. CPU per message at a fixed 10,000 msg/s, QoS 0 and QoS 1, publish side and subscribe side
     measured in two separate processes (a publishers-only shard and a subscribers-only shard
     started together), so each side's CPU is its own; with exact send times each on its own
     wake-up, with the default 50 µs send-ahead (options.send_ahead) and with a 1 ms timer grid
     (options.timer_resolution).
  2. The highest offered rate one process (publishers + subscribers) sustains without being marked
     generator-limited, next to Mosquitto's CPU: the broker must saturate first. With one engine
     thread (broker and generator a core each) and with the default thread count; with exact send
     times (each on its own wake-up) and with the 1 ms grid.
  3. RSS of one process holding 10,000 idle connections.
  4. The cost of measuring: the same run with and without latency recording.
Next to figure 1 (QoS 0) runs `benchmarks/floor`, the least any generator can do per message on
this host (sleep until a send is due and write it; wait for a socket and read it), on the same
schedule against the same broker: the engine's own overhead is the difference.
Each figure is the median of --repeat runs; ratios come from runs made back to back.
Where `perf stat` can count, one more run of each figure-1 case (engine and floor) counts the
instructions per message, user and kernel: unlike CPU time, hardly moved by other tenants.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from mqttlab.brokers import get_launcher

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

# Runs one shard in a fresh process and prints its raw result plus the process's peak RSS.
SHARD_RUNNER = """
import json, resource, sys
from mqttlab import _engine
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
raw = json.loads(_engine.run_shard(sys.stdin.read()))
raw["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(raw))
"""


def plan(port: int, *, pubs=10, subs=10, qos=0, rate_total=10_000.0, duration_ms=10_000, warmup_ms=2_000,
         record_latency=True, shard=None, topic="bench/%i", filters=("bench/%i",), connect_rate=0.0,
         timer_resolution_us=0, threads=0, send_ahead_us=0) -> dict:
    return {
        "broker": {"host": "127.0.0.1", "port": port, "tls": None},
        "mqtt": {"version": 4, "username": None, "password": None, "keepalive_s": 60, "clean_start": True,
                 "session_expiry_s": 0, "connect_timeout_ms": 30_000},
        "publishers": {"count": pubs, "client_id": "bench-pub-%i", "topic": topic, "qos": qos, "retain": False,
                       "rate": rate_total / max(pubs, 1), "arrival": "constant", "messages": None,
                       "payload": {"dist": "fixed", "size": 64}, "inflight": 1000},
        "subscribers": {"count": subs, "client_id": "bench-sub-%i", "filters": list(filters), "qos": qos},
        "load": {"duration_ms": duration_ms, "warmup_ms": warmup_ms, "grace_ms": 3000, "connect_rate": connect_rate,
                 "seed": 1},
        "shard": shard or {"publishers": [0, pubs], "subscribers": [0, subs]},
        "options": {"record_latency": record_latency, "reconnect": False, "progress_interval_ms": 1000,
                    "timer_resolution_us": timer_resolution_us, "threads": threads, "send_ahead_us": send_ahead_us},
    }


def run_shards(plans: list[dict]) -> list[dict]:
    return finish_shards(start_shards(plans))


def start_shards(plans: list[dict]) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", SHARD_RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in plans]
    for proc, p in zip(procs, plans):
        proc.stdin.write(json.dumps(p))
        proc.stdin.close()
    return procs


def finish_shards(procs: list[subprocess.Popen]) -> list[dict]:
    out = []
    for proc in procs:
        text = proc.stdout.read()
        if proc.wait() != 0:
            raise SystemExit("a shard process failed")
        out.append(json.loads(text))
    return out


class CpuWatch:
    """CPU share of one core used by a process while a block runs."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)

    def __enter__(self) -> "CpuWatch":
        t = self.proc.cpu_times()
        self.cpu0, self.wall0 = t.user + t.system, time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        t = self.proc.cpu_times()
        self.share = (t.user + t.system - self.cpu0) / (time.monotonic() - self.wall0)


def cpu(raw: dict) -> float:
    return raw["generator"]["cpu_user_s"] + raw["generator"]["cpu_sys_s"]


class InstructionWindow:
    """Instructions (user and kernel) each of some processes executes in a window of wall time,
    counted by `perf stat`. Unlike CPU time they hardly depend on what else the shared host runs,
    so they compare the engine with the floor across hosts and sessions. Empty where perf cannot
    count (no perf, or a VM without a virtual PMU). Counting costs CPU time itself (in a VM every
    context switch saves and restores the counters), so the CPU figures come from other runs."""

    def __init__(self, pids: list[int], delay_s: float, seconds: float, enabled: bool) -> None:
        self.seconds = seconds
        self.counts: list[dict] = []
        self._thread = threading.Thread(target=self._count, args=(pids, delay_s), daemon=True)
        if enabled:
            self._thread.start()

    def _count(self, pids: list[int], delay_s: float) -> None:
        time.sleep(delay_s)
        try:
            stats = [subprocess.Popen(["perf", "stat", "-x,", "-e", "instructions:u,instructions:k", "-p", str(pid),
                                       "--", "sleep", str(self.seconds)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True) for pid in pids]
        except FileNotFoundError:
            return
        for stat in stats:
            counts = {}
            for line in stat.communicate()[1].splitlines():
                fields = line.split(",")
                if len(fields) > 2 and fields[0].isdigit():
                    counts["user" if fields[2].endswith(":u") else "kernel"] = int(fields[0])
            self.counts.append(counts)

    def per_message(self, index: int, rate_per_s: float) -> dict:
        """Instructions per message of process `index`, handling `rate_per_s` messages a second."""
        if self._thread.is_alive():
            self._thread.join()
        if len(self.counts) <= index or len(self.counts[index]) < 2:
            return {}
        messages = rate_per_s * self.seconds
        return {f"{kind}_instructions_per_msg": round(n / messages) for kind, n in self.counts[index].items()}


def per_message_cost(port: int, qos: int, duration_ms: int, timer_resolution_us: int = 0,
                     count_instructions: bool = False, send_ahead_us: int = 0) -> dict:
    start_at = time.time_ns() + 2_000_000_000
    pub_plan = plan(port, qos=qos, duration_ms=duration_ms, timer_resolution_us=timer_resolution_us, send_ahead_us=send_ahead_us,
                    shard={"publishers": [0, 10], "subscribers": [0, 0], "start_at_unix_ns": start_at})
    sub_plan = plan(port, qos=qos, duration_ms=duration_ms, timer_resolution_us=timer_resolution_us, send_ahead_us=send_ahead_us,
                    shard={"publishers": [0, 0], "subscribers": [0, 10], "start_at_unix_ns": start_at})
    procs = start_shards([sub_plan, pub_plan])
    # Counted from a second after the start (warm-up included) to two seconds before the end.
    window = InstructionWindow([p.pid for p in procs], 3.0, duration_ms / 1000 - 2, count_instructions)
    subs, pubs = finish_shards(procs)
    return {
        "publish_us_per_msg": cpu(pubs) * 1e6 / max(pubs["counters"]["sent"], 1),
        "subscribe_us_per_msg": cpu(subs) * 1e6 / max(subs["counters"]["received"], 1),
        "sent": pubs["counters"]["sent"],
        "received": subs["counters"]["received"],
        **{f"publish_{k}": v for k, v in window.per_message(1, 10_000).items()},
        **{f"subscribe_{k}": v for k, v in window.per_message(0, 10_000).items()},
    }


FLOOR = ROOT / "benchmarks" / "floor"


def build_floor() -> Path:
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(FLOOR / "Cargo.toml")], check=True)
    return FLOOR / "target" / "release" / "floor"


def floor_cost(binary: Path, port: int, duration_ms: int, timer_resolution_us: int = 0,
               count_instructions: bool = False, send_ahead_us: int = 0) -> dict:
    """The floor program's publish and subscribe sides, 10 -> 10 clients, QoS 0, 10,000 msg/s."""
    addr = f"127.0.0.1:{port}"
    sub = subprocess.Popen([str(binary), "sub", addr, "--clients", "10", "--messages", str(duration_ms * 10)],
                           stdout=subprocess.PIPE, text=True)
    sub.stdout.readline()  # subscribed
    pub = subprocess.Popen([str(binary), "pub", addr, "--clients", "10", "--rate", "10000", "--seconds",
                            str(duration_ms / 1000), "--grid-us", str(timer_resolution_us), "--ahead-us", str(send_ahead_us)],
                           stdout=subprocess.PIPE, text=True)
    # The same share of the run as the engine's window.
    window = InstructionWindow([sub.pid, pub.pid], 1.0, duration_ms / 1000 - 2, count_instructions)
    pub_text = pub.stdout.read()
    if pub.wait() != 0:
        raise SystemExit("the floor publisher failed")
    sub_out = json.loads(sub.stdout.read())
    if sub.wait() != 0:
        raise SystemExit("the floor subscriber failed")
    pub_out = json.loads(pub_text)
    return {"publish_us_per_msg": pub_out["us_per_msg"], "subscribe_us_per_msg": sub_out["us_per_msg"],
            "sent": pub_out["messages"], "received": sub_out["messages"],
            **{f"publish_{k}": v for k, v in window.per_message(1, 10_000).items()},
            **{f"subscribe_{k}": v for k, v in window.per_message(0, 10_000).items()}}


def summarize(raw: dict, p: dict) -> dict:
    from mqttlab import _engine

    return json.loads(_engine.summarize(json.dumps(p), json.dumps({k: v for k, v in raw.items() if k != "peak_rss_kb"})))


def rate_ladder(port: int, broker_pid: int, qos: int, rates: list[float], duration_ms: int, threads: int,
                timer_resolution_us: int = 0) -> list[dict]:
    rows = []
    for rate in rates:
        p = plan(port, qos=qos, rate_total=rate, duration_ms=duration_ms, warmup_ms=1000, threads=threads,
                 timer_resolution_us=timer_resolution_us)
        with CpuWatch(broker_pid) as broker:
            (raw,) = run_shards([p])
        s = summarize(raw, p)
        rows.append({
            "offered_per_s": rate,
            "received_per_s": round(s["rates"]["received_per_s"]),
            "generator_limited": s["generator_limited"],
            "generator_cpu_share": round(raw["generator"]["max_thread_cpu_share"], 2),
            "schedule_lag_p99_us": s["generator"]["schedule_lag_p99_us"],
            "broker_cpu_share": round(broker.share, 2),
            "e2e_p50_us": (s["latency"]["e2e"] or {}).get("p50_us"),
            "dropped": s["messages"]["dropped"],
        })
        print(f"  qos {qos}, {threads or 'auto'} engine thread(s), timer grid {timer_resolution_us} µs, "
              f"offered {rate:>9,.0f}/s -> {rows[-1]}", flush=True)
    return rows


def idle_connections(port: int, count: int) -> dict:
    p = plan(port, pubs=0, subs=count, topic="idle/%i", filters=("idle/%i",), duration_ms=3000, warmup_ms=0,
             connect_rate=3000.0)
    p["publishers"]["rate"] = 1.0
    (raw,) = run_shards([p])
    return {"connections": raw["connections"]["subscribers_ok"], "peak_rss_mb": raw["peak_rss_kb"] / 1024}


def measuring_cost(port: int, duration_ms: int) -> dict:
    out = {}
    for record in (True, False):
        p = plan(port, qos=0, duration_ms=duration_ms, record_latency=record)
        (raw,) = run_shards([p])
        handled = raw["counters"]["sent"] + raw["counters"]["received"]
        out["with_latency" if record else "without_latency"] = cpu(raw) * 1e6 / max(handled, 1)
    return out


def instructions_only(cost: dict) -> dict:
    return {k: v for k, v in cost.items() if "instructions" in k}


def median_of(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="shorter runs and a shorter rate ladder")
    args = ap.parse_args()
    duration = 5_000 if args.quick else 10_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the broker
    report: dict = {"host": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                             "kernel": platform.release()}, "repeat": args.repeat}
    with tempfile.TemporaryDirectory() as tmp, get_launcher("mosquitto").start(Path(tmp)) as broker:
        report["broker"] = broker.version
        print(f"against {broker.version} at {broker.url()}", flush=True)
        floor = build_floor()
        for qos in (0, 1):
            # Exact send times each on its own wake-up, the default 50 µs send-ahead, the 1 ms grid.
            for grid, ahead in ((0, 0), (0, 50), (1000, 0)):
                key = f"cost_qos{qos}" + (f"_grid{grid}us" if grid else "") + (f"_ahead{ahead}us" if ahead else "")
                runs, floors = [], []
                for _ in range(args.repeat):
                    # Engine and floor alternate, so both see the same background load.
                    runs.append(per_message_cost(broker.port, qos, duration, grid, send_ahead_us=ahead))
                    if qos == 0:
                        floors.append(floor_cost(floor, broker.port, duration, grid, send_ahead_us=ahead))
                report[key] = median_of(runs)
                print(f"CPU per message at 10,000 msg/s, QoS {qos}, timer grid {grid} µs, send-ahead {ahead} µs: {report[key]}", flush=True)
                if floors:
                    report[f"floor_{key}"] = median_of(floors)
                    print(f"  floor on the same schedule: {report[f'floor_{key}']}", flush=True)
                # One more pair of runs with instructions counted (their CPU times are not used).
                report[f"instructions_{key}"] = instructions_only(
                    per_message_cost(broker.port, qos, duration, grid, count_instructions=True, send_ahead_us=ahead))
                print(f"  instructions per message: {report[f'instructions_{key}']}", flush=True)
                if qos == 0:
                    report[f"floor_instructions_{key}"] = instructions_only(
                        floor_cost(floor, broker.port, duration, grid, count_instructions=True, send_ahead_us=ahead))
                    print(f"  floor: {report[f'floor_instructions_{key}']}", flush=True)
        runs = [measuring_cost(broker.port, duration) for _ in range(args.repeat)]
        report["measuring_cost"] = median_of(runs)
        print(f"cost of measuring (µs per message handled): {report['measuring_cost']}", flush=True)
        rates = [20_000, 50_000, 100_000, 150_000] if args.quick else [20_000, 40_000, 80_000, 120_000, 160_000, 200_000, 240_000, 280_000]
        # One engine thread leaves the broker a core of its own on a 2-core host; the default
        # (threads sized by the offered rate, at most one per core) takes the second core when
        # the rate needs it and shares it with the broker.
        # The grid batches the sends due at one instant into one wake-up and one write per
        # connection, as generators on millisecond timers do: it shows where the engine stops when
        # wake-ups are not the cost.
        for grid in (0, 1000):
            for threads in (1, 0):
                for qos in (0, 1):
                    key = f"ladder_qos{qos}_threads{threads}" + (f"_grid{grid}us" if grid else "")
                    report[key] = rate_ladder(broker.port, broker.pid, qos, rates, duration // 2, threads, grid)
        report["idle_10k"] = idle_connections(broker.port, 10_000)
        print(f"10,000 idle connections: {report['idle_10k']}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"engine-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
