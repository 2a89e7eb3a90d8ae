"""Are a run's figures steady well before a shorter length? The check a reproduction shows before
it shortens the paper's runs: one long run per broker, its per-second series (series.csv) cut
to the seconds a shortened run would measure (after its own, shorter warm-up) and compared with
the long run's whole measured phase.

Per-second percentiles cannot be merged exactly, so a window's latency is the median over its
seconds of each second's p50 (or p99): a figure that one burst cannot move. A broker whose
figures wander second by second (bursts every few seconds) has no window that matches the
whole run closely, so the rule, printed beside the table, asks whether the shortened window is
like the run's later windows of the same length: its delivered rate within 2 % of the whole
run's, and its p50 and p99 within the range the later windows span (widened by 25 %, at least
100 µs). A window still warming up lies above that range. The broker's memory is judged alike, where
the run kept its resources (resources.csv): the first window's peak RSS within the later windows'
range of peak RSS, widened by 25 %; a broker whose memory still grows through the run has a first
window below it, and its memory figures from a shortened run are the shortened run's, not the
broker's steady state. Two cases judge nothing: a long run flagged
generator-limited (its figures bound the host as much as the broker), and a run whose later
windows differ among themselves by more than a factor of SPREAD in p50 (an episode of falling
behind): any first window would lie in so wide a range.

    python -m mqttlab.reproductions.steadiness RUN_DIR... --warmup 5s --length 10s"""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Optional

import yaml

from mqttlab.scenario.units import parse_duration

RATE_TOLERANCE = 0.02
LATENCY_TOLERANCE = 0.25
LATENCY_FLOOR_US = 100.0  # below this a difference is the clock's grain, not a trend
SPREAD = 3.0
MEMORY_TOLERANCE = 0.25
RULE = (f"steady when the first window's delivered rate is within {RATE_TOLERANCE:.0%} of the whole measured phase's "
        f"and its p50 and p99 (medians over its seconds) lie within the range of the later windows of its length, "
        f"widened by {LATENCY_TOLERANCE:.0%} (at least {LATENCY_FLOOR_US:.0f} µs); cannot tell when the later windows' "
        f"p50 differ by more than ×{SPREAD:g} among themselves; not judged when the long run was flagged generator-limited")
MEMORY_RULE = (f"memory steady when the first window's peak broker RSS lies within the range of the later windows' peak RSS, "
               f"widened by {MEMORY_TOLERANCE:.0%}; not judged when the long run was flagged generator-limited")


@dataclass
class Window:
    seconds: int
    rate: float  # messages received per second
    p50_us: float  # median over the seconds of each second's e2e p50
    p99_us: float  # likewise for p99
    worst_p99_us: float  # the worst second
    rss_peak_mb: Optional[float] = None  # the broker's peak RSS over the window's seconds (None: not sampled)


@dataclass
class Steadiness:
    run: str
    first: Window
    whole: Window
    later: list[Window]  # the measured phase cut into windows of the first's length, after it
    generator_limited: bool = False

    @property
    def verdict(self) -> str:
        if self.generator_limited:
            return "not judged: generator-limited"
        p50 = [window.p50_us for window in self.later]
        if min(p50) > 0 and max(p50) / min(p50) > SPREAD:
            return f"cannot tell: later windows' p50 differ ×{max(p50) / min(p50):.0f}"
        return "yes" if self.steady else "no"

    def latency_range(self, figure: str) -> tuple[float, float]:
        values = [getattr(window, figure) for window in self.later]
        low, high = min(values), max(values)
        return (low - max(LATENCY_TOLERANCE * low, LATENCY_FLOOR_US), high + max(LATENCY_TOLERANCE * high, LATENCY_FLOOR_US))

    @property
    def memory_verdict(self) -> str:
        later = [window.rss_peak_mb for window in self.later if window.rss_peak_mb is not None]
        first = self.first.rss_peak_mb
        if first is None or len(later) < len(self.later):
            return "not recorded"
        if self.generator_limited:
            return "not judged: generator-limited"
        if first < min(later) * (1 - MEMORY_TOLERANCE):
            return f"no: later windows reach {max(later):,.0f} MB"
        return "yes" if first <= max(later) * (1 + MEMORY_TOLERANCE) else "no: above the later windows"

    @property
    def steady(self) -> bool:
        def inside(figure: str) -> bool:
            low, high = self.latency_range(figure)
            return low <= getattr(self.first, figure) <= high

        return abs(self.first.rate - self.whole.rate) <= RATE_TOLERANCE * self.whole.rate and inside("p50_us") and inside("p99_us")


def _seconds(run_dir: Path) -> list[dict[str, float]]:
    """The seconds in which the load ran at full rate, warm-up included (t < 0): the first and
    last, partial seconds and the grace period, where nothing is sent, are left out."""
    with (run_dir / "series.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["e2e_p50_us"]]
    seconds = {int(float(row["t_s"])): row for row in rows}  # a second is written once; keep the last
    sending = [row for row in seconds.values() if float(row["sent"]) > 0]
    full = max(float(row["sent"]) for row in sending)
    return [{key: float(value) for key, value in row.items() if key != "fault" and value}
            for row in sorted(sending, key=lambda row: float(row["t_s"])) if float(row["sent"]) >= 0.5 * full]


def _broker_rss(run_dir: Path) -> dict[int, float]:
    """The broker's RSS (bytes) per second, on series.csv's time base (0: the measured phase's
    start; the sampler writes no second before it); empty when the run kept no resources.csv."""
    try:
        with (run_dir / "resources.csv").open(newline="") as handle:
            return {int(float(row["t_s"])): float(row["rss_bytes"]) for row in csv.DictReader(handle)
                    if row["process"] == "broker" and row["rss_bytes"]}
    except FileNotFoundError:
        return {}


def _window(rows: list[dict[str, float]], rss: dict[int, float]) -> Window:
    seconds = [int(row["t_s"]) for row in rows]
    peak = max(rss[t] for t in seconds) / 1e6 if seconds and all(t in rss for t in seconds) else None
    return Window(len(rows), sum(row["received"] for row in rows) / len(rows), median(row["e2e_p50_us"] for row in rows),
                  median(row["e2e_p99_us"] for row in rows), max(row["e2e_p99_us"] for row in rows), peak)


def _warmup_s(run_dir: Path) -> float:
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text(encoding="utf-8")) or {}
    return parse_duration((scenario.get("load") or {}).get("warmup", "0s"))


def check(run_dir: Path, length_s: float, warmup_s: float | None = None) -> Steadiness:
    """`length_s` measured seconds after a warm-up of `warmup_s` (default: the long run's own)."""
    rows = _seconds(run_dir)
    measured = [row for row in rows if row["t_s"] >= 0]
    start = 0.0 if warmup_s is None else warmup_s - _warmup_s(run_dir)  # on the long run's time base
    first = [row for row in rows if start <= row["t_s"] < start + length_s]
    after = [row for row in measured if row["t_s"] >= start + length_s]
    size = max(1, round(length_s))
    rss = _broker_rss(run_dir)
    later = [_window(after[i:i + size], rss) for i in range(0, len(after) - size + 1, size)]
    if len(first) < length_s or not later:
        raise ValueError(f"{run_dir}: needs a measured phase longer than {length_s:g} s (has {len(measured)} s)")
    return Steadiness(str(run_dir), _window(first, rss), _window(measured, rss), later, _generator_limited(run_dir))


def _generator_limited(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / "summary.json").read_text(encoding="utf-8")).get("generator_limited"))
    except (OSError, ValueError):
        return False


def table(checks: list[Steadiness], names: list[str]) -> str:
    def ms(us: float) -> str:
        return f"{us / 1000:.2f}"

    def mb(peak: Optional[float]) -> str:
        return "not recorded" if peak is None else f"{peak:,.1f}"

    # The memory columns where some run kept the broker's resources (runs made before that have none).
    memory = any(window.rss_peak_mb is not None for found in checks for window in (found.first, *found.later))
    lines = ["| run | window | seconds | delivered msg/s | p50 ms (median of seconds) | p99 ms (median of seconds) | worst second's p99 ms | steady |"
             + (" broker peak RSS MB | memory steady |" if memory else ""),
             "|---|---|---:|---:|---:|---:|---:|---|" + ("---:|---|" if memory else "")]
    for name, found in zip(names, checks):
        for label, window in (("first", found.first), ("whole", found.whole)):
            verdict = found.verdict if label == "first" else ""
            lines.append(f"| {name} | {label} | {window.seconds} | {window.rate:,.0f} | {ms(window.p50_us)} | {ms(window.p99_us)} | "
                         f"{ms(window.worst_p99_us)} | {verdict} |"
                         + (f" {mb(window.rss_peak_mb)} | {found.memory_verdict if label == 'first' else ''} |" if memory else ""))
        p50, p99 = ([getattr(w, figure) for w in found.later] for figure in ("p50_us", "p99_us"))
        peaks = [w.rss_peak_mb for w in found.later if w.rss_peak_mb is not None]
        lines.append(f"| {name} | {len(found.later)} later | {found.first.seconds} each | "
                     f"{min(w.rate for w in found.later):,.0f}–{max(w.rate for w in found.later):,.0f} | "
                     f"{ms(min(p50))}–{ms(max(p50))} | {ms(min(p99))}–{ms(max(p99))} | | |"
                     + ((f" {min(peaks):,.1f}–{max(peaks):,.1f} | |" if peaks else " not recorded | |") if memory else ""))
    return "\n".join(lines) + f"\n\nRule: {RULE}" + (f"; {MEMORY_RULE}." if memory else ".")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (each with series.csv)")
    parser.add_argument("--length", required=True, help="the shortened runs' measured length, e.g. 10s")
    parser.add_argument("--warmup", help="the shortened runs' warm-up (default: the long run's)")
    args = parser.parse_args()
    length, warmup = parse_duration(args.length), parse_duration(args.warmup) if args.warmup else None
    print(table([check(run, length, warmup) for run in args.runs], [run.parent.name if run.name.startswith("rep-") else run.name for run in args.runs]))


if __name__ == "__main__":
    main()
