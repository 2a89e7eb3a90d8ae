"""How fast the `mqttlab` command starts, against `python -c "import click"` on the same host.

    .venv/bin/python benchmarks/startup.py [--pairs 7] [--broker mqtt://HOST:PORT]

Each program runs in pairs with the reference, the order alternating from pair to pair, and its
figure is the median of the pairs' ratios (absolute times are context only: this host's speed
moves between days). Measured:
- `mqttlab --version` and `mqttlab run --help`: wall time (target: at most 2x the reference);
- a run of 10 messages against a broker given by URL (`--json`): the CPU (user + system) of the
  whole process less the engine's load (summary.json's generator CPU), the CPU outside the load
  (target: at most 0.1 s), and its ratio to the reference's CPU;
- floors, for context: Python alone, and importing typer and pydantic (with one model).
Without --broker a Mosquitto is started on a free loopback port and ended afterwards. The package's
bytecode is compiled first, as an installed package has it.
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mqttlab

PYTHON = sys.executable
MQTTLAB = str(Path(sys.executable).parent / "mqttlab")  # the console script a user runs
REFERENCE = [PYTHON, "-c", "import click"]
FLOORS = {
    "python -c pass": [PYTHON, "-c", "pass"],
    "import typer": [PYTHON, "-c", "import typer"],
    "import pydantic, one model": [PYTHON, "-c", "import pydantic\nclass M(pydantic.BaseModel):\n    x: int = 1"],
}


def timed(command: list[str], stdout: Path | None = None) -> tuple[float, float]:
    """Wall time and CPU (user + system) of one run of `command` (its output into `stdout`), which
    must succeed."""
    with open(stdout or os.devnull, "w") as sink, tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=sink, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)  # the rusage of this child alone
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode not in (0, 1):  # 1: the run's findings, still a run
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)}: exit {child.returncode}\n{errors.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def outside_the_load(command: list[str], summary: Path) -> float:
    """The CPU outside the engine's load of one `mqttlab run --json`."""
    _, cpu = timed(command, stdout=summary)
    generator = json.loads(summary.read_text())["generator"]
    return cpu - generator["cpu_user_s"] - generator["cpu_sys_s"]


def paired(ours: Callable[[], float], reference: Callable[[], float], pairs: int) -> tuple[list[float], list[float]]:
    """Our figure and the reference's in `pairs` pairs, which of the two runs first alternating."""
    figures: tuple[list[float], list[float]] = ([], [])
    for pair in range(pairs):
        for side in ((0, 1) if pair % 2 else (1, 0)):
            figures[side].append((ours, reference)[side]())
    return figures


def wall_of(command: list[str]) -> Callable[[], float]:
    return lambda: timed(command)[0]


def started_mosquitto() -> tuple[subprocess.Popen, str]:
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    broker = subprocess.Popen([binary, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return broker, f"mqtt://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    broker.kill()
    raise SystemExit(f"{binary} did not listen on {port} within 10 s")


def line(label: str, ours: list[float], reference: list[float], unit: str = "s") -> str:
    ratios = [a / b for a, b in zip(ours, reference)]
    return (f"{label:36s} {statistics.median(ours):6.3f} {unit}  reference {statistics.median(reference):6.3f} {unit}  "
            f"ratio {statistics.median(ratios):5.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--broker", help="mqtt://HOST:PORT; default: a Mosquitto started here")
    args = parser.parse_args()
    compileall.compile_dir(Path(mqttlab.__file__).parent, quiet=1)

    broker = None
    url = args.broker
    if url is None:
        broker, url = started_mosquitto()
    try:
        with tempfile.TemporaryDirectory() as folder:
            runs = itertools.count()

            def run() -> float:
                out = Path(folder) / f"run-{next(runs)}"
                return outside_the_load([MQTTLAB, "run", "--broker", url, "-P", "1", "-S", "1", "-n", "10", "--json",
                                         "-o", str(out)], Path(folder) / "summary.json")

            print(f"{time.strftime('%Y-%m-%d')}, {platform.node()}, Python {platform.python_version()}, {os.cpu_count()} cores, "
                  f"{args.pairs} pairs; reference: python -c \"import click\"")
            print("wall time (target: ratio at most 2)")
            for label, command in (("mqttlab --version", [MQTTLAB, "--version"]), ("mqttlab run --help", [MQTTLAB, "run", "--help"])):
                print(line(label, *paired(wall_of(command), wall_of(REFERENCE), args.pairs)))
            for label, command in FLOORS.items():
                print(line(f"  floor: {label}", *paired(wall_of(command), wall_of(REFERENCE), args.pairs)))
            print("CPU, user + system (target: at most 0.1 s outside the load)")
            print(line("mqttlab run, outside the load", *paired(run, lambda: timed(REFERENCE)[1], args.pairs)))
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(10)


if __name__ == "__main__":
    main()
