"""Same-run A/B of two variants of one plan on this checkout's engine, on engine_bench's steady path
(10 -> 10 clients, 10,000 msg/s, 64-byte payloads, 5 s, the publish and subscribe sides in
processes of their own, a tuned Mosquitto): what an engine option costs, and what an MQTT 5
feature saves. The variants alternate `--pairs` times, the order swapped every other pair; each
figure is the median of the per-pair ratios B/A.

    .venv/bin/python benchmarks/variants_ab.py kernel-timestamps --pairs 5
    .venv/bin/python benchmarks/variants_ab.py topic-aliases --pairs 5

- `kernel-timestamps`: receptions stamped by the kernel (the default, rx_stamp.rs) against
  stamped when read (`options.kernel_timestamps: false`), MQTT 3.1.1 at QoS 0 and 1: CPU per
  message on the publish and the subscribe side.
- `topic-aliases`: MQTT 5 with `mqtt.topic_alias_maximum: 5` against without, QoS 1 on topic
  "bench/%i": MQTT bytes the publishers wrote per message, CPU per message on both sides, and the
  broker's CPU per message (its process's CPU time over the messages it forwarded).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_bench  # noqa: E402

from mqttlab.brokers import get_launcher  # noqa: E402

SECONDS = 5


def _plans(port: int, qos: int, change: dict) -> list[dict]:
    """The subscribe side and the publish side of the steady path, `change` applied to both
    ({section: {key: value}})."""
    start_at = time.time_ns() + 2_000_000_000
    sides = []
    for shard in ({"publishers": [0, 0], "subscribers": [0, 10]}, {"publishers": [0, 10], "subscribers": [0, 0]}):
        p = engine_bench.plan(port, qos=qos, duration_ms=SECONDS * 1000, send_ahead_us=50, shard={**shard, "start_at_unix_ns": start_at})
        for section, values in change.items():
            p[section].update(copy.deepcopy(values))
        sides.append(p)
    return sides


def sample(port: int, broker_pid: int, qos: int, change: dict) -> dict[str, float]:
    broker = psutil.Process(broker_pid)
    before = sum(broker.cpu_times()[:2])
    subs, pubs = engine_bench.finish_shards(engine_bench.start_shards(_plans(port, qos, change)))
    broker_cpu = sum(broker.cpu_times()[:2]) - before
    sent, received = max(pubs["counters"]["sent"], 1), max(subs["counters"]["received"], 1)
    return {
        "publish µs CPU/msg": engine_bench.cpu(pubs) * 1e6 / sent,
        "subscribe µs CPU/msg": engine_bench.cpu(subs) * 1e6 / received,
        "publish bytes/msg": pubs["counters"]["mqtt_bytes_out"] / sent,
        "broker µs CPU/msg": broker_cpu * 1e6 / received,
    }


VARIANTS = {
    # name: (the QoS levels, A's change, B's change)
    "kernel-timestamps": ((0, 1), {"options": {"kernel_timestamps": False}}, {}),
    "topic-aliases": ((1,), {"mqtt": {"version": 5}}, {"mqtt": {"version": 5, "topic_alias_maximum": 5}}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variant", choices=sorted(VARIANTS))
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    levels, change_a, change_b = VARIANTS[args.variant]
    with tempfile.TemporaryDirectory() as tmp, get_launcher("mosquitto").start(Path(tmp)) as broker:
        for qos in levels:
            runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
            for pair in range(args.pairs):
                for side in ("a", "b") if pair % 2 == 0 else ("b", "a"):
                    runs[side].append(sample(broker.port, broker.pid, qos, change_a if side == "a" else change_b))
            print(f"{args.variant}, QoS {qos}, {args.pairs} pairs: median of B/A (B = {change_b or 'the default'}, A = {change_a})")
            for figure in runs["a"][0]:
                a_values = [r[figure] for r in runs["a"]]
                ratios = [b[figure] / a[figure] for a, b in zip(runs["a"], runs["b"]) if a[figure]]
                print(f"  {figure:22} A median {statistics.median(a_values):8.2f}  B/A {statistics.median(ratios):.3f}  "
                      f"(pairs {', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
