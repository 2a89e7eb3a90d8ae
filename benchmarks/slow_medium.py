"""Seed 002's crash as an experiment (issue 34, item 5; docs/state.md, "A slow medium"): Mosquitto
with its persistence on a slow medium under a rising QoS 1/2 load of persistent sessions,
measured step by step until it falls behind or dies, beside the same ladder on the same medium
unthrottled. Seed 002's lessons learned: Mosquitto crashed when it could not keep up persisting
messages (persistence on, as Debian ships it; many messages a second; a slow medium).

The medium: a small ext4 filesystem on a loop device (a file in a temporary directory), its
writes throttled by a cgroup v1 blkio rule on that loop device alone
(blkio.throttle.write_bps_device, optionally write_iops_device). Measured here
(tests/test_slow_medium.py): the rule holds back the writes a process of the cgroup makes
synchronous (fsync, O_DIRECT); buffered writes left to the kernel's flusher threads are not held
(cgroup v1 has no writeback accounting). Mosquitto 2.0 writes its whole database at each autosave
in its one thread and fsyncs it before renaming it into place (persist_write.c), so its saves
go through the throttle and its event loop waits for them.

Each step is one `mqttlab run` (its own broker and results directory, kept under --out) started
inside the cgroup, so the broker it launches is born there; the rule names only the loop device,
so the generator and the results directory (on another device) are not throttled. The broker is
Mosquitto's tuned configuration (docs/brokers.md) from a config file with persistence on, its
persistence_location on the medium and a short autosave_interval, and its log at information
level (every autosave is a line). The load: publishers → one subscriber each, persistent
sessions (clean session 0), QoS 1 (or --qos 2), 1000 B payloads; half the subscribers go offline
at 1 s for 6 s (of a 10 s step), so the broker holds their messages and writes them at every save.

The rule for a step, printed under the table (RULE), and no verdict on a generator-limited run.

    .venv/bin/python benchmarks/slow_medium.py                       # both ladders, about 4 min
    .venv/bin/python benchmarks/slow_medium.py --rates 500,2000 --only throttled --out /tmp/slow

Needs root (a loop device, a mount, a cgroup); everything it sets up is removed on the way out,
also on failure. Exits 2 when the host refuses the medium, with the command and its error."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

BLKIO = Path("/sys/fs/cgroup/blkio")
ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
# The rule of a step (docs/state.md prints it beside the table).
P99_LIMIT_US = 1_000_000
DROPPED_LIMIT = 0.01
BACK_PRESSURE_LIMIT = 0.05
RULE = ("dies: the broker's process gone before the run ended (status broker_lost); "
        "falls behind: a QoS 1/2 message lost (not delivered by the end of the grace), or over "
        f"{DROPPED_LIMIT:.0%} of the sends due dropped because the publisher's in-flight window (publishers.inflight: "
        "unacknowledged messages) was full, or the live e2e p99 (subscribers online, from the intended send) over "
        f"{P99_LIMIT_US / 1e6:g} s, or the publishers' sockets full over {BACK_PRESSURE_LIMIT:.0%} of their connection "
        "time (back_pressure_share); keeps up otherwise; a run flagged generator-limited carries no verdict")
# Log lines every run has: anything else the broker printed is shown with the step.
ROUTINE = re.compile(r"New connection from|New client connected|Client \S+ disconnected\.|Saving in-memory database|"
                     r"mosquitto version \S+ (starting|running|terminating)|Config loaded from|Opening ipv[46] listen socket|"
                     r"should not be run as root")
SAVING = re.compile(r"^(\d+): Saving in-memory database")


class MediumRefused(RuntimeError):
    """The host refused a step of the medium's setup: the command (or file written) and its error."""


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MediumRefused(f"`{shlex.join(command)}`: {exc}") from None
    if done.returncode != 0:
        raise MediumRefused(f"`{shlex.join(command)}` exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise MediumRefused(f"writing {text.strip()!r} to {path}: {exc.strerror or exc}") from None


class SlowMedium:
    """A filesystem on a loop device whose writes are throttled for the processes of one blkio
    cgroup. Entering makes it (image file, loop device, ext4, mount, cgroup); leaving removes all
    of it in reverse, also when entering failed half way. Only what it made is touched: its own
    temporary directory, the loop device `losetup --find` gave it, its own cgroup."""

    def __init__(self, size_mb: int = 256, write_bps: Optional[int] = MIB, write_iops: Optional[int] = None) -> None:
        self.size_mb = size_mb
        self.write_bps = write_bps
        self.write_iops = write_iops
        self.scratch: Optional[Path] = None
        self.device: Optional[str] = None
        self.major_minor = ""
        self.mount: Optional[Path] = None
        self.cgroup: Optional[Path] = None
        self._stack = ExitStack()

    def __enter__(self) -> SlowMedium:
        try:
            self._make()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _make(self) -> None:
        if os.geteuid() != 0:
            raise MediumRefused("a loop device, a mount and a blkio cgroup need root")
        if not (BLKIO / "blkio.throttle.write_bps_device").is_file():
            raise MediumRefused(f"no cgroup v1 blkio controller with throttling at {BLKIO}")
        self.scratch = Path(tempfile.mkdtemp(prefix="mqttlab-slow-medium-"))
        self._stack.callback(shutil.rmtree, self.scratch, True)
        image = self.scratch / "medium.img"
        with image.open("wb") as handle:
            handle.truncate(self.size_mb * MIB)
        self.device = _run(["losetup", "--find", "--show", str(image)])
        self._stack.callback(_run, ["losetup", "--detach", self.device])
        rdev = os.stat(self.device).st_rdev
        self.major_minor = f"{os.major(rdev)}:{os.minor(rdev)}"
        # Inode tables and journal written now, not by ext4's lazy-init thread during the load.
        _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard", self.device])
        self.mount = self.scratch / "mnt"
        self.mount.mkdir()
        _run(["mount", "-t", "ext4", self.device, str(self.mount)])
        self._stack.callback(_run, ["umount", str(self.mount)])
        self.cgroup = BLKIO / f"mqttlab-slow-medium-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        try:
            self.cgroup.mkdir()
        except OSError as exc:
            raise MediumRefused(f"mkdir {self.cgroup}: {exc.strerror or exc}") from None
        self._stack.callback(self._remove_cgroup)
        self.throttle(self.write_bps, self.write_iops)

    def throttle(self, write_bps: Optional[int], write_iops: Optional[int] = None) -> None:
        """Sets the cgroup's write limits on the loop device; None lifts one (v1 takes 0 as none)."""
        assert self.cgroup is not None
        self.write_bps, self.write_iops = write_bps, write_iops
        _write(self.cgroup / "blkio.throttle.write_bps_device", f"{self.major_minor} {write_bps or 0}\n")
        _write(self.cgroup / "blkio.throttle.write_iops_device", f"{self.major_minor} {write_iops or 0}\n")

    def describe(self) -> str:
        limits = [f"{self.write_bps / MIB:g} MiB/s" if self.write_bps else "", f"{self.write_iops} IOPS" if self.write_iops else ""]
        return ", ".join(part for part in limits if part) or "unthrottled"

    def wrap(self, command: list[str]) -> list[str]:
        """`command` run inside the cgroup from its first instruction (its children are born there)."""
        assert self.cgroup is not None
        script = 'echo $$ > "$1" || exit 97; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "mqttlab-slow-medium", str(self.cgroup / "cgroup.procs"), *command]

    def written_bytes(self) -> int:
        """Bytes the cgroup's processes wrote to the loop device so far (through the throttle)."""
        assert self.cgroup is not None
        for line in (self.cgroup / "blkio.throttle.io_service_bytes").read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == self.major_minor and parts[1] == "Write":
                return int(parts[2])
        return 0

    def _remove_cgroup(self) -> None:
        assert self.cgroup is not None
        # Only processes this medium's wrap started can be in it; any still there (a step cut
        # short) are ended by PID before the cgroup goes.
        for attempt in range(100):
            pids = [int(pid) for pid in (self.cgroup / "cgroup.procs").read_text().split()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM if attempt < 50 else signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        self.cgroup.rmdir()


# --- one step -------------------------------------------------------------------------------


def broker_config(persistence_dir: Path, autosave_s: int) -> str:
    """Mosquitto's tuned settings (from its launcher, each documented in docs/brokers.md) but for
    persistence and the log, which are this experiment's."""
    from mqttlab.brokers.mosquitto import MosquittoLauncher

    lines = ["# benchmarks/slow_medium.py: mosquitto's tuned settings, persistence on the slow medium"]
    for setting, _ in MosquittoLauncher.tuned_settings:
        if not setting.startswith(("persistence", "log_type")):
            lines.append(setting)
    lines += ["persistence true", f"persistence_location {persistence_dir}/", f"autosave_interval {autosave_s}",
              "log_type error", "log_type warning", "log_type notice", "log_type information"]
    return "\n".join(lines) + "\n"


def step_scenario(rate: float, qos: int, payload: int, config: Path, seconds: float = 10.0, inflight: int = 100,
                  pairs: int = 10) -> dict[str, Any]:
    """One step's scenario: `pairs` publishers at `rate` msg/s over all of them, each to its own
    subscriber; half the subscribers away from 1 s until 3 s before the load ends."""
    return {
        "name": f"slow-medium-{rate:g}",
        "broker": "mosquitto",
        "launch": {"config": str(config)},
        "mqtt": {"clean_start": False},
        "publishers": {"count": pairs, "topic": "slow/%i", "qos": qos, "rate": rate / pairs, "payload": payload,
                       "inflight": inflight},
        "subscribers": {"count": pairs, "filters": ["slow/%i"], "offline": {"at": "1s", "duration": f"{seconds - 4:g}s", "fraction": 0.5}},
        "load": {"duration": f"{seconds:g}s", "warmup": "0s", "grace": "5s"},
    }


def verdict(summary: dict[str, Any]) -> str:
    if summary.get("status") == "broker_lost":
        return "dies"
    if summary.get("generator_limited"):
        return "— (generator-limited)"
    e2e = (summary.get("latency") or {}).get("e2e") or {}
    back_pressure = (summary.get("generator") or {}).get("back_pressure_share") or 0.0
    messages = summary["messages"]
    dropped = messages["dropped"] / max(1, messages["sent"] + messages["dropped"])
    if messages["lost"] > 0 or dropped > DROPPED_LIMIT or (e2e.get("p99_us") or 0) > P99_LIMIT_US or back_pressure > BACK_PRESSURE_LIMIT:
        return "falls behind"
    return "keeps up"


def log_findings(log: Path) -> dict[str, Any]:
    """What the broker's log says: its saves (count, the seconds between their starts: with a
    short autosave_interval, a save that takes long shows as a long gap; the log's clock has
    whole seconds), the lines beyond the routine ones, and its last line."""
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    saves = [int(m.group(1)) for m in map(SAVING.match, lines) if m]
    notable = [line for line in lines if line.strip() and not ROUTINE.search(line)]
    kinds: dict[str, int] = {}
    first: dict[str, str] = {}
    for line in notable:
        kind = re.sub(r"mqttlab-\w+-\d+", "<client>", line.split(": ", 1)[-1])
        kinds[kind] = kinds.get(kind, 0) + 1
        first.setdefault(kind, line)
    gaps = [b - a for a, b in zip(saves, saves[1:])]
    return {
        "saves": len(saves),
        "between_saves_s": gaps,
        "longest_between_saves_s": max(gaps, default=None),
        "notable": [{"line": first[kind], "count": count} for kind, count in kinds.items()],
        "terminated": any("terminating" in line for line in lines),
        "last_line": lines[-1] if lines else None,
    }


def longest_ack_stall(series: Path, seconds: float) -> int:
    """The longest run of whole seconds of the load in which no PUBACK/PUBCOMP came back."""
    import csv

    longest = current = 0
    with series.open() as handle:
        for row in csv.DictReader(handle):
            if float(row["t_s"]) >= seconds:
                break
            current = current + 1 if int(row["acked"]) == 0 else 0
            longest = max(longest, current)
    return longest


def _database_bytes(directory: Path) -> int:
    """The largest of mosquitto.db and the mosquitto.db.new a save is writing (renamed as we look)."""
    sizes = [0]
    for path in directory.glob("mosquitto.db*"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            pass
    return max(sizes)


def run_step(medium: SlowMedium, ladder: str, rate: float, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One step: a fresh database directory on the medium, one `mqttlab run` inside the cgroup,
    the medium watched while it runs (the database's size, the bytes written through the throttle)."""
    assert medium.mount is not None
    name = f"{ladder}-{rate:g}"
    data = medium.mount / name
    data.mkdir()
    config = out / f"{name}.conf"
    config.write_text(broker_config(data, args.autosave))
    scenario = out / f"{name}.yaml"
    scenario.write_text(yaml.safe_dump(step_scenario(rate, args.qos, args.payload, config, args.seconds, args.inflight)))
    results = out / name
    command = medium.wrap([sys.executable, "-m", "mqttlab", "run", str(scenario), "--out", str(results)])
    written_before = medium.written_bytes()
    db_peak = 0
    started = time.monotonic()
    with open(out / f"{name}.out", "w") as console:
        child = subprocess.Popen(command, cwd=ROOT, stdout=console, stderr=subprocess.STDOUT)
        try:
            while child.poll() is None:
                if time.monotonic() - started > args.step_timeout:
                    break  # ended below; its results directory, if any, says how far it got
                db_peak = max(db_peak, _database_bytes(data))
                time.sleep(0.2)
        finally:
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
    row: dict[str, Any] = {"ladder": ladder, "medium": medium.describe(), "rate": rate, "qos": args.qos,
                           "exit_code": child.returncode, "seconds": round(time.monotonic() - started, 1),
                           "written_mb": (medium.written_bytes() - written_before) / MIB, "db_peak_mb": db_peak / MIB,
                           "results": str(results)}
    shutil.rmtree(data, ignore_errors=True)
    summary_path = results / "summary.json"
    if not summary_path.is_file():
        row.update(verdict="did not run", error=(out / f"{name}.out").read_text()[-500:])
        return row
    summary = json.loads(summary_path.read_text())
    broker = (summary.get("resources") or {}).get("broker") or {}
    e2e = (summary.get("latency") or {}).get("e2e") or {}
    row.update(
        status=summary.get("status"),
        alive=summary.get("status") != "broker_lost",
        cpu_mean=broker.get("mean_cpu_share"), cpu_max=broker.get("max_cpu_share"),
        rss_peak_mb=(broker.get("peak_rss_bytes") or 0) / MIB,
        expected=summary["messages"]["expected"], delivered=summary["messages"]["delivered"], lost=summary["messages"]["lost"],
        sent=summary["messages"]["sent"], dropped=summary["messages"]["dropped"],
        ack_stall_s=longest_ack_stall(results / "series.csv", args.seconds),
        e2e_p99_ms=(e2e.get("p99_us") or 0) / 1000, back_pressure_share=summary["generator"]["back_pressure_share"],
        generator_limited=summary.get("generator_limited"), generator_limited_reasons=summary.get("generator_limited_reasons"),
        verdict=verdict(summary), log=log_findings(results / "broker" / "mosquitto.log"),
    )
    host = results / "host-load.json"
    if host.is_file():
        row["host_busy_cores"] = json.loads(host.read_text()).get("busy_cores")
    return row


# --- the ladders ----------------------------------------------------------------------------


def _cell(value: Any, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| medium | offered msg/s | broker | CPU mean / max (cores) | RSS peak MB | db peak MB | written MB | "
            "longest between saves s | longest ack stall s | sent (dropped, window full) | delivered of expected | lost | "
            "live e2e p99 ms | back-pressure | generator-limited | verdict |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for row in rows:
        if "status" not in row:
            lines.append(f"| {row['medium']} | {row['rate']:,g} | did not run |" + " |" * 13 + f" {row['verdict']} |")
            continue
        lines.append(
            f"| {row['medium']} | {row['rate']:,g} | {'alive' if row['alive'] else 'gone'} | "
            f"{_cell(row['cpu_mean'], '.2f')} / {_cell(row['cpu_max'], '.2f')} | {row['rss_peak_mb']:.1f} | {row['db_peak_mb']:.1f} | "
            f"{row['written_mb']:.1f} | {_cell(row['log']['longest_between_saves_s'], 'd')} | {row['ack_stall_s']} | "
            f"{row['sent']:,} ({row['dropped']:,}) | {row['delivered']:,} of {row['expected']:,} | "
            f"{row['lost']:,} | {row['e2e_p99_ms']:,.1f} | {row['back_pressure_share']:.1%} | {'yes' if row['generator_limited'] else 'no'} | "
            f"{row['verdict']} |")
    return "\n".join(lines)


def log_notes(rows: list[dict[str, Any]]) -> str:
    notes = []
    for row in rows:
        if "log" not in row or row["verdict"] == "keeps up":
            continue
        log = row["log"]
        said = "; ".join(f"`{item['line']}`" + (f" (×{item['count']})" if item["count"] > 1 else "") for item in log["notable"][:4])
        notes.append(f"- {row['medium']}, {row['rate']:,g} msg/s ({row['verdict']}): {log['saves']} saves "
                     f"(s between their starts: {', '.join(map(str, log['between_saves_s'])) or '—'}); "
                     f"beyond the routine lines the log says: {said or 'nothing'}; last line: `{log['last_line']}`")
    return "\n".join(notes)


def ladder(medium: SlowMedium, name: str, rates: list[float], args: argparse.Namespace, out: Path,
           report: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """The rates in turn until the broker dies (a higher rate says no more)."""
    rows = []
    for rate in rates:
        row = run_step(medium, name, rate, args, out)
        report(row)
        rows.append(row)
        if row.get("verdict") == "dies":
            break
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="250,500,1000,2000,4000", help="offered msg/s over all publishers, one step each (default 250,500,1000,2000,4000)")
    parser.add_argument("--qos", type=int, choices=(1, 2), default=1)
    parser.add_argument("--payload", type=int, default=1000, help="bytes (default 1000)")
    parser.add_argument("--write-bps", type=float, default=1.0, help="the throttle in MiB/s (default 1)")
    parser.add_argument("--write-iops", type=int, default=None, help="a write IOPS limit too (default none)")
    parser.add_argument("--seconds", type=float, default=10.0, help="each step's load (default 10; half the subscribers away from 1 s to 3 s before its end)")
    parser.add_argument("--inflight", type=int, default=100,
                        help="each publisher's window of unacknowledged messages (default 100, the engine's; a send due while it is full is dropped)")
    parser.add_argument("--autosave", type=int, default=1, help="Mosquitto's autosave_interval in s (default 1)")
    parser.add_argument("--size-mb", type=int, default=256, help="the medium's size (default 256)")
    parser.add_argument("--only", choices=("throttled", "unthrottled"), default=None, help="one ladder only")
    parser.add_argument("--step-timeout", type=float, default=120.0, help="a step still going after this many s is ended")
    parser.add_argument("--out", type=Path, default=None, help="where the steps' results go (default results/slow-medium-<time>)")
    args = parser.parse_args(argv)
    # A SIGTERM ends the run like Ctrl-C: through the `finally`s, so the medium is taken down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rates = [float(rate) for rate in args.rates.split(",")]
    out = args.out or ROOT / "results" / f"slow-medium-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"started {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; QoS {args.qos}, {args.payload} B, "
          f"in-flight window {args.inflight}, {args.seconds:g} s steps, autosave_interval {args.autosave} s; results in {out}", flush=True)
    ladders = [name for name in ("unthrottled", "throttled") if args.only in (None, name)]
    rows: list[dict[str, Any]] = []
    try:
        with SlowMedium(args.size_mb, int(args.write_bps * MIB)) as medium:
            print(f"medium: ext4 on {medium.device} ({medium.major_minor}, {args.size_mb} MiB image), "
                  f"blkio cgroup {medium.cgroup}", flush=True)
            for name in ladders:
                if name == "throttled":
                    medium.throttle(int(args.write_bps * MIB), args.write_iops)
                else:
                    medium.throttle(None, None)
                rows += ladder(medium, name, rates, args, out,
                               lambda row: print(f"  {row['medium']}, {row['rate']:,g} msg/s: {row['verdict']} ({row['seconds']} s)", flush=True))
    except MediumRefused as refused:
        print(f"the host refused the slow medium: {refused}", file=sys.stderr)
        return 2
    finally:
        (out / "slow_medium.json").write_text(json.dumps({"rule": RULE, "argv": sys.argv, "rows": rows}, indent=2))
    print()
    print(table(rows))
    print(f"\nrule: {RULE}")
    notes = log_notes(rows)
    if notes:
        print("\n" + notes)
    print(f"\ntook {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
