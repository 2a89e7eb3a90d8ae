"""Latency at the wire: each message's time through the broker as a loopback packet capture saw
it, beside mqttlab's own end-to-end figure for the same run (issue 37: the instrument measured
against something it did not write).

A run captured on `lo` (`options.capture`, netem/capture.py) holds every MQTT packet of the run
with the kernel's timestamp of the moment it crossed the loopback device. Each PUBLISH carries the
engine's 16-byte measurement header (crates/mqttlab-engine/src/payload.rs: publisher u32, sequence
u32, intended send time in µs of CLOCK_MONOTONIC u48, send lag in µs u16, big-endian), so a
message is matched by its header between the publisher's PUBLISH going to the broker and each of
the broker's PUBLISHes carrying it to a subscriber (one per subscriber connection). The wire time
of a delivery is the second frame's time minus the first's: the broker's share, with no client
thread in it. Wireshark's MQTT dissector (through tshark) splits a segment that carries several
MQTT packets, and reports a packet split over several segments in the one that completes it.

mqttlab's figure is `e2e_uncorrected` (actual send to receive on the engine's clock). The engine
keeps it only as a histogram, not per message, so the two cannot be paired message by message;
they are compared as distributions of the same set of deliveries: those whose intended send time
falls in the measured window (after warm-up), the rule the engine records by, and the check
demands that the capture's count of them equals the histogram's. Both distributions are read by
the same rule: the wire times are recorded in a histogram of the run's own kind (µs, same range
and precision) and summarised by the engine's `histogram_stats`.

One part of the gap can be had per message: the header says when the engine sent (intended time
plus lag), and the capture's clock reading (wall time against CLOCK_MONOTONIC, taken when it
started; both clocks are slewed alike, so the offset holds through a run) puts that on the
capture's clock: `send_to_wire` is the time from the engine's send stamp to its PUBLISH crossing
`lo`. The rest of the gap (the frame's arrival to the engine's receive stamp) is not recorded per
message, so it is only the difference of the distributions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqttlab.analysis.captures import CaptureAnalysisError, Header, capture_info, read_header
from mqttlab.netem.capture import CAPTURE_FILE, tshark_fields

PERCENTILES = ("p50", "p90", "p99")
_FIELDS = ["frame.time_epoch", "tcp.stream", "tcp.dstport", "tcp.analysis.retransmission", "mqtt.msg"]


def epoch_ns(text: str) -> int:
    """frame.time_epoch ("1795759808.463019325") as integer ns: a float would round it to 0.2 µs."""
    seconds, _, fraction = text.partition(".")
    return int(seconds) * 1_000_000_000 + int((fraction + "000000000")[:9])


@dataclass
class WireMatch:
    """Every PUBLISH of a run's capture matched by its header (TCP retransmissions left out)."""

    published: int = 0  # distinct headers going to the broker
    deliveries: int = 0  # PUBLISHes leaving the broker whose header went to it
    measured: int = 0  # of the deliveries, those whose intended send falls in the measured window
    unmatched: int = 0  # PUBLISHes leaving the broker with no header, or one that never went to it
    repeated_up: int = 0  # a header going to the broker again (not a TCP retransmission)
    repeated_down: int = 0  # a header leaving again on the same connection
    undelivered: int = 0  # headers going to the broker that never left it
    wire_us: list[int] = field(default_factory=list)  # per measured delivery: broker in → broker out
    send_to_wire_us: list[int] = field(default_factory=list)  # per measured message: engine's send stamp → PUBLISH on lo


def match(directory: Path) -> WireMatch:
    """Matches the PUBLISHes of a captured run (see the module's text)."""
    directory = Path(directory)
    info = capture_info(directory)
    port, clock = int(info["port"]), info.get("clock")
    if not clock:
        raise CaptureAnalysisError(f"{directory}: the capture has no clock reading (captured by an older mqttlab): run it again")
    offset_ns = int(clock["unix_ns"]) - int(clock["mono_ns"])  # capture time = monotonic + offset
    window_ns = _window_start_ns(directory)
    out = WireMatch()
    up: dict[tuple[int, int], tuple[int, Header]] = {}  # header -> (capture ns, header)
    down: set[tuple[tuple[int, int], str]] = set()
    delivered: set[tuple[int, int]] = set()
    for when, stream, dstport, retransmission, messages in tshark_fields(directory / "capture" / CAPTURE_FILE, port, _FIELDS, "mqtt.msgtype == 3"):
        if retransmission:
            continue  # the same bytes again: TCP's repeat, not the broker's or the engine's
        at = epoch_ns(when)
        to_broker = dstport.split(",")[0] == str(port)
        for message in messages.split(","):
            header = read_header(message)
            if to_broker:
                if header is None:
                    continue  # not a measured message (the topic-sequence method has no header)
                if header.key in up:
                    out.repeated_up += 1
                else:
                    up[header.key] = (at, header)
                continue
            if header is None or header.key not in up:
                out.unmatched += 1
                continue
            if (header.key, stream) in down:
                out.repeated_down += 1
                continue
            down.add((header.key, stream))
            delivered.add(header.key)
            out.deliveries += 1
            if header.intended_us * 1000 >= window_ns:
                out.measured += 1
                out.wire_us.append((at - up[header.key][0]) // 1000)
    out.published = len(up)
    out.undelivered = len(up.keys() - delivered)
    # Per message, not per delivery: the send stamp to the PUBLISH reaching lo (capture clock).
    out.send_to_wire_us = [(at - offset_ns - header.sent_ns) // 1000 for at, header in up.values() if header.intended_us * 1000 >= window_ns]
    return out


def _window_start_ns(directory: Path) -> int:
    try:
        return int(_result(directory)["start_mono_ns"])
    except KeyError:
        raise CaptureAnalysisError(f"{directory}: result.json has no start_mono_ns (the load never started)") from None


def _result(directory: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((Path(directory) / "result.json").read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        raise CaptureAnalysisError(f"{directory}: no readable result.json ({error})") from None


def stats(values_us: list[int], like: str) -> dict[str, Any]:
    """The engine's statistics (count, p50_us, p90_us, p99_us, max_us, ...) of `values_us`,
    recorded in a histogram with the range and precision of the encoded histogram `like`, so that
    they are read by exactly the rule mqttlab's own figures are. A value below the histogram's
    lowest (1 µs) is recorded as the lowest."""
    from hdrh.histogram import HdrHistogram

    template = HdrHistogram.decode(like)
    histogram = HdrHistogram(template.lowest_trackable_value, template.highest_trackable_value, template.significant_figures)
    for value in values_us:
        histogram.record_value(max(int(value), template.lowest_trackable_value))
    encoded = histogram.encode()
    return _engine_stats(encoded.decode() if isinstance(encoded, bytes) else encoded)


def wire_check(directory: Path, histogram: str = "e2e_uncorrected") -> dict[str, Any]:
    """A captured run's wire figures beside mqttlab's (its `histogram`, actual send to receive), as plain data:
    {wire, mqttlab, send_to_wire: statistics (µs); gap: mqttlab − wire at p50, p90, p99, max (µs);
    p99_ratio: mqttlab p99 / wire p99; counts: the matching's tallies and mqttlab's counters;
    problems: every way the matching is not exact (empty when each message mqttlab sent was seen
    going to the broker once and each delivery it counted was seen leaving it once)}."""
    directory = Path(directory)
    result = _result(directory)
    encoded = (result.get("histograms") or {}).get(histogram)
    if not encoded:
        raise CaptureAnalysisError(f"{directory}: no {histogram} histogram (options.record_latency off, nothing delivered, or no such figure: "
                                   f"it has {', '.join(sorted(result.get('histograms') or {})) or 'none'})")
    found = match(directory)
    counters = result.get("counters") or {}
    mqttlab = _engine_stats(encoded)
    wire = stats(found.wire_us, encoded)
    counts = {
        "sent": counters.get("sent"), "received": counters.get("received"), "histogram": mqttlab.get("count"),
        "published": found.published, "deliveries": found.deliveries, "measured": found.measured,
        "unmatched": found.unmatched, "repeated_up": found.repeated_up, "repeated_down": found.repeated_down,
        "undelivered": found.undelivered, "capture_dropped": capture_info(directory).get("capture_dropped"),
    }  # fmt: skip
    return {
        "wire": wire, "mqttlab": mqttlab, "send_to_wire": stats(found.send_to_wire_us, encoded),
        "gap": {p: mqttlab[f"{p}_us"] - wire[f"{p}_us"] for p in (*PERCENTILES, "max")} if wire.get("count") else None,
        "p99_ratio": round(mqttlab["p99_us"] / wire["p99_us"], 3) if wire.get("p99_us") else None,
        "counts": counts, "problems": problems(counts),
    }  # fmt: skip


def _engine_stats(encoded: str) -> dict[str, Any]:
    from mqttlab.engine import histogram_stats  # late, as analysis/compare.py: loading the engine is not free

    return histogram_stats(encoded)


def problems(counts: dict[str, Any]) -> list[str]:
    """Every way the matching falls short of exact, said in a line each."""
    out = []
    if counts["capture_dropped"]:
        out.append(f"the kernel dropped {counts['capture_dropped']} packets of the capture")
    if counts["published"] != counts["sent"]:
        out.append(f"mqttlab sent {counts['sent']} messages; the capture saw {counts['published']} distinct headers going to the broker")
    if counts["deliveries"] != counts["received"]:
        out.append(f"mqttlab received {counts['received']} messages; the capture saw {counts['deliveries']} matched PUBLISHes leaving the broker")
    if counts["measured"] != counts["histogram"]:
        out.append(f"mqttlab's e2e_uncorrected holds {counts['histogram']} deliveries; the capture matched {counts['measured']} in the measured window")
    for key, text in (("unmatched", "PUBLISHes left the broker without a header that went to it"),
                      ("repeated_up", "headers went to the broker more than once"),
                      ("repeated_down", "headers left the broker more than once on one connection"),
                      ("undelivered", "headers went to the broker and never left it")):  # fmt: skip
        if counts[key]:
            out.append(f"{counts[key]} {text}")
    return out
