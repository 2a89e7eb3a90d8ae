"""Soak: one long run at a moderate rate, watched from outside, to show that what a run keeps
stays bounded: the generator's and the broker's resident memory, the results directory on disk
and the per-second series (one row per second by design, so its size per row must not grow).

    .venv/bin/python benchmarks/soak.py                 # 20 minutes, 10 -> 10 clients at 50 msg/s each
    .venv/bin/python benchmarks/soak.py --minutes 3 --every 15

It starts `mqttlab run` (embedded rumqttd unless --broker) in a child process, samples it every
--every seconds with psutil (generator = the `mqttlab run` process itself, broker = its child
processes) and reads the run's live.json for how far it is; at the end it reads the results
directory. Not part of the test command: it takes as long as it says."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def tree_size(path: Path) -> int:
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(base) / name).stat().st_size
            except OSError:
                pass
    return total


def rss(process: psutil.Process, children: bool) -> int:
    try:
        targets = process.children(recursive=True) if children else [process]
        return sum(p.memory_info().rss for p in targets if p.is_running())
    except psutil.Error:
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20.0, help="length of the load (default 20)")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples (default 60)")
    parser.add_argument("--pubs", type=int, default=10)
    parser.add_argument("--subs", type=int, default=10)
    parser.add_argument("--rate", type=float, default=50.0, help="msg/s per publisher (default 50: 500 msg/s in all)")
    parser.add_argument("--broker", default=None, help="broker to launch or URL (default: the embedded rumqttd)")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default: a temporary one)")
    args = parser.parse_args()

    out = args.out or Path(tempfile.mkdtemp(prefix="mqttlab-soak-")) / "run"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mqttlab", "run", "--pubs", str(args.pubs), "--subs", str(args.subs),
               "--rate", str(args.rate), "--duration", f"{args.minutes * 60:g}s", "--warmup", "10s",
               "--out", str(out), "--json"]
    if args.broker:
        command += ["--broker", args.broker]
    print(f"soak: {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    with open(out.parent / "soak-run.log", "wb") as log, open(out.parent / "soak-summary.json", "wb") as summary_file:
        child = subprocess.Popen(command, stdout=summary_file, stderr=log, cwd=ROOT)
        process = psutil.Process(child.pid)
        rows = []
        header = f"{'t (s)':>7} {'load s':>7} {'sent':>10} {'gen RSS MB':>11} {'broker RSS MB':>14} {'dir KB':>9}"
        print(header, flush=True)
        while child.poll() is None:
            live = {}
            try:
                live = json.loads((out / "live.json").read_text())
            except (OSError, ValueError):
                pass
            row = {
                "t_s": time.monotonic() - started,
                "load_s": (live.get("progress") or {}).get("elapsed_s"),
                "sent": ((live.get("snapshot") or {}).get("total") or {}).get("sent"),
                "generator_rss": rss(process, children=False),
                "broker_rss": rss(process, children=True),
                "dir_bytes": tree_size(out),
            }
            rows.append(row)
            load = f"{row['load_s']:.0f}" if row["load_s"] is not None else "–"
            print(f"{row['t_s']:7.0f} {load:>7} {row['sent'] or 0:>10,} {row['generator_rss'] / 1e6:11.1f} "
                  f"{row['broker_rss'] / 1e6:14.1f} {row['dir_bytes'] / 1e3:9.1f}", flush=True)
            deadline = time.monotonic() + args.every
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
    code = child.returncode
    summary = json.loads((out.parent / "soak-summary.json").read_text() or "{}")
    series_rows = max(0, len((out / "series.csv").read_text().splitlines()) - 1) if (out / "series.csv").is_file() else 0
    result_bytes = (out / "result.json").stat().st_size if (out / "result.json").is_file() else 0
    # The bound: memory after the warm-up against memory at the end of the load.
    loaded = [r for r in rows if r["load_s"] is not None and r["load_s"] >= 10]
    print()
    print(f"exit code {code}, status {summary.get('status')}, {args.minutes:g} min at {args.pubs} x {args.rate:g} msg/s")
    messages = summary.get("messages") or {}
    print(f"messages: sent {messages.get('sent', 0):,}, delivered {messages.get('delivered', 0):,} of {messages.get('expected', 0):,}, lost {messages.get('lost', 0):,}")
    if len(loaded) >= 2:
        first, last = loaded[0], loaded[-1]
        minutes = max((last["t_s"] - first["t_s"]) / 60, 1e-9)
        for key, name in (("generator_rss", "generator RSS"), ("broker_rss", "broker RSS")):
            growth = (last[key] - first[key]) / 1e6
            print(f"{name}: {first[key] / 1e6:.1f} MB -> {last[key] / 1e6:.1f} MB ({growth:+.2f} MB, {growth / minutes:+.3f} MB/min)")
        print(f"results dir during the run: {first['dir_bytes'] / 1e3:.1f} KB -> {last['dir_bytes'] / 1e3:.1f} KB")
    print(f"results dir at the end: {tree_size(out) / 1e6:.2f} MB; result.json {result_bytes / 1e3:.0f} KB")
    if series_rows:
        print(f"per-second series: {series_rows} rows for {args.minutes * 60:g} s of load "
              f"({result_bytes / series_rows:.0f} B of result.json per row, series.csv {(out / 'series.csv').stat().st_size / series_rows:.0f} B per row)")
    print(f"results: {out}")
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    raise SystemExit(main())
