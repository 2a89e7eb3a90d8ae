"""Same-run A/B of two checkouts' engines on the steady path: CPU per message at 10,000 msg/s,
10 -> 10 clients, QoS 0 and 1, the default 50 µs send-ahead (or the timing given), 5 s, publish
and subscribe sides in processes of their own (engine_bench.per_message_cost), against a tuned Mosquitto. The two
alternate, `--pairs` times, the order swapped every other pair; the ratios are B/A per pair, and
their median is printed.

    .venv/bin/python benchmarks/engine_ab.py OLD_CHECKOUT NEW_CHECKOUT --pairs 7
    .venv/bin/python benchmarks/engine_ab.py OLD NEW --grid-us 1000 --send-ahead-us 0   # on the 1 ms grid

Each checkout runs with its own virtualenv (`CHECKOUT/.venv`, made by its `make setup`, or a link to another's:
the checkout's `python/` comes first on the path).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FIGURES = ("publish_us_per_msg", "subscribe_us_per_msg")


def sample(checkout: Path, timing: list[str]) -> dict[str, dict[str, float]]:
    """One run of `checkout`'s engine, in its own virtualenv (this file's --sample mode)."""
    # The checkout's own package first: two checkouts may share one virtualenv.
    env = {**os.environ, "PYTHONPATH": str(checkout / "python")}
    done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), __file__, "--sample", str(checkout), *timing],
                          cwd=checkout, capture_output=True, text=True, timeout=300, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(checkout: Path, grid_us: int, send_ahead_us: int) -> None:
    sys.path.insert(0, str(checkout / "benchmarks"))
    import engine_bench
    from mqttlab.brokers import get_launcher

    out = {}
    with tempfile.TemporaryDirectory() as tmp, get_launcher("mosquitto").start(Path(tmp)) as broker:
        for qos in (0, 1):
            cost = engine_bench.per_message_cost(broker.port, qos, 5000, grid_us, send_ahead_us=send_ahead_us)
            out[f"qos{qos}"] = {figure: cost[figure] for figure in FIGURES}
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, nargs="?")
    ap.add_argument("b", type=Path, nargs="?")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--grid-us", type=int, default=0, help="send times on this grid (options.timer_resolution), 0: exact")
    ap.add_argument("--send-ahead-us", type=int, default=50, help="options.send_ahead (the default 50 µs)")
    ap.add_argument("--sample", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sample is not None:
        return measure(args.sample, args.grid_us, args.send_ahead_us)
    timing = ["--grid-us", str(args.grid_us), "--send-ahead-us", str(args.send_ahead_us)]
    runs: dict[str, list] = {"a": [], "b": []}
    for pair in range(args.pairs):
        for side in ("a", "b") if pair % 2 == 0 else ("b", "a"):
            runs[side].append(sample(getattr(args, side), timing))
    for qos in ("qos0", "qos1"):
        for figure in FIGURES:
            ratios = [b[qos][figure] / a[qos][figure] for a, b in zip(runs["a"], runs["b"])]
            print(f"{qos} {figure}: B/A median {statistics.median(ratios):.3f} (pairs {min(ratios):.2f}-{max(ratios):.2f}), "
                  f"B {statistics.median(r[qos][figure] for r in runs['b']):.2f} µs, A {statistics.median(r[qos][figure] for r in runs['a']):.2f} µs")


if __name__ == "__main__":
    main()
