"""Message bundling from a packet capture (seed 002): how many MQTT packets ride in one TCP
segment, per direction and per message type.

`mqttlab run --capture` records the run's MQTT traffic with `tshark` on the device the clients'
segments cross: the host end of the emulated link (TUN device or veth) when the scenario has a
`network:` section, else `lo`. The capture is filtered to the broker's TCP port and kept as
`RESULTS/capture/capture.pcapng`, so it can be opened in Wireshark or analysed again. After the run
tshark decodes it (`-d tcp.port==PORT,mqtt`, so a non-standard port is read as MQTT) and prints,
per frame, the TCP payload length and the MQTT message types it completes; `bundling()` counts
them.

A frame is counted once: every device used here sees each segment exactly once (on `lo` the
kernel hands a looped-back packet to the capture once; the TUN and veth ends see one direction's
packets leaving and the other's arriving). An MQTT packet split over several segments is counted in
the segment that completes it, which is where tshark's reassembly reports it."""

from __future__ import annotations

import csv
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator, Optional

CAPTURE_FILE = "capture.pcapng"
# tshark's first start on a host loads its dissectors cold: 5.4 s here on a quiet host, over 10 s
# under the parallel test run (both capture tests failed so); later starts take 0.3 s.
START_TIMEOUT = 30.0
# After the load the clients still send DISCONNECT and TCP closes its connections; this much time
# lets those segments reach the capture before it stops.
SETTLE_S = 0.3
START_SETTLE_S = 0.5
# The kernel's capture buffer: tshark's default 2 MiB dropped most segments of 1 MB messages on
# `lo` (64 KB segments at tens of MB/s while the host was busy). 256 MiB took so long to set up
# that a run's first CONNECTs went by before the capture was ready; 64 MiB held both.
BUFFER_MIB = 64

# MQTT control packet types (mqtt.msgtype), MQTT 3.1.1 section 2.2.1 and 5.0 (AUTH).
MESSAGE_TYPES = {
    1: "CONNECT", 2: "CONNACK", 3: "PUBLISH", 4: "PUBACK", 5: "PUBREC", 6: "PUBREL", 7: "PUBCOMP",
    8: "SUBSCRIBE", 9: "SUBACK", 10: "UNSUBSCRIBE", 11: "UNSUBACK", 12: "PINGREQ", 13: "PINGRESP",
    14: "DISCONNECT", 15: "AUTH",
}  # fmt: skip
DIRECTIONS = ("up", "down")  # up = clients → broker, as in docs/network.md


class CaptureError(Exception):
    """The capture cannot be made (no tshark, no permission, the device is gone)."""


def tshark_path() -> Optional[str]:
    return shutil.which("tshark")


class Capture:
    """tshark writing the broker port's TCP traffic on `device` to `directory/capture.pcapng`
    while the context is open.

        with Capture("lo", 1883, directory) as capture:
            ... the run ...
        table = capture.analyse()
    """

    def __init__(self, device: str, port: int, directory: Path) -> None:
        self.device = device
        self.port = int(port)
        self.directory = Path(directory)
        self.path = self.directory / CAPTURE_FILE
        self.dropped: Optional[int] = None
        self.clock: Optional[dict[str, int]] = None
        self._process: Optional[subprocess.Popen] = None
        self._log = self.directory / "tshark.log"

    def __enter__(self) -> "Capture":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        tshark = tshark_path()
        if tshark is None:
            raise CaptureError("tshark is not installed (Debian: apt-get install tshark)")
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self._log, "wb")
        # -q: no per-packet lines; tshark reports "Capturing on ..." on stderr once the device is
        # open, which is the moment the load may start without losing its first segments.
        self._process = subprocess.Popen(
            [tshark, "-q", "-n", "-i", self.device, "-B", str(BUFFER_MIB), "-f", f"tcp port {self.port}", "-w", str(self.path)],
            stdout=subprocess.DEVNULL, stderr=log,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = self._log_text()
            if "Capturing on" in text:
                # tshark says so when dumpcap has opened the device, a moment before the filter is
                # attached and packets flow: a run's first CONNECTs were missing now and then.
                time.sleep(START_SETTLE_S)
                self.clock = clock_pair()
                return
            if self._process.poll() is not None:
                raise CaptureError(f"tshark on {self.device} ended at once: {_last_line(text)}")
            time.sleep(0.05)
        self.stop()
        raise CaptureError(f"tshark did not start capturing on {self.device} within {START_TIMEOUT:g} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            time.sleep(SETTLE_S)
            process.send_signal(signal.SIGINT)  # tshark finishes the file and reports its drops
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.dropped = _dropped_packets(self._log_text())

    def _log_text(self) -> str:
        try:
            return self._log.read_text(errors="replace")
        except OSError:
            return ""

    def analyse(self) -> dict[str, Any]:
        """The bundling section for summary.json (see `bundling`), from the capture file."""
        frames = read_frames(self.path, self.port)
        out = bundling(frames)
        out.update({"device": self.device, "port": self.port, "file": CAPTURE_FILE, "capture_dropped": self.dropped,
                    "clock": self.clock})
        return out


def clock_pair() -> dict[str, int]:
    """The capture's clock (wall time, which tshark stamps frames with) read against the engine's
    (CLOCK_MONOTONIC, which stamps each payload's intended send time): a frame's time can then be
    set against a message's send time. The monotonic clock is read on both sides of the wall clock."""
    before = time.monotonic_ns()
    unix = time.time_ns()
    after = time.monotonic_ns()
    return {"unix_ns": unix, "mono_ns": (before + after) // 2}


def tshark_fields(path: Path, port: int, fields: list[str], display_filter: Optional[str] = None) -> Iterator[list[str]]:
    """One list of cells per frame of the capture, tshark's MQTT dissector applied to `port`, in
    the order of `fields`; a field that occurs several times in a frame (one per MQTT packet) is
    one cell with the values joined by commas. Streamed: a large capture's rows are not all held."""
    tshark = tshark_path()
    if tshark is None:
        raise CaptureError("tshark is not installed (Debian: apt-get install tshark)")
    command = [tshark, "-n", "-r", str(path), "-d", f"tcp.port=={port},mqtt", "-T", "fields",
               "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    if display_filter:
        command += ["-Y", display_filter]
    for name in fields:
        command += ["-e", name]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None and process.stderr is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            if line.strip():
                yield (line.split("\t") + [""] * len(fields))[: len(fields)]
        error = process.stderr.read()
        if process.wait() != 0:
            raise CaptureError(f"tshark cannot read {path}: {_last_line(error)}")


FRAME_FIELDS = ["frame.number", "tcp.dstport", "tcp.len", "tcp.analysis.retransmission", "mqtt.msgtype"]


def read_frames(path: Path, port: int) -> list[dict[str, Any]]:
    """One row per captured TCP frame: direction, TCP payload length, MQTT message types it
    completes (in order) and whether TCP analysis marks it a retransmission."""
    return [_frame(cells, port) for cells in tshark_fields(path, port, FRAME_FIELDS)]


def parse_fields(text: str, port: int) -> list[dict[str, Any]]:
    """Rows of tshark's `-T fields` output in the column order of `read_frames`."""
    return [_frame((line.split("\t") + [""] * 5)[:5], port) for line in text.splitlines() if line.strip()]


def _frame(cells: list[str], port: int) -> dict[str, Any]:
    _, dstport, length, retransmission, types = cells
    return {
        "direction": "up" if dstport and int(dstport.split(",")[0]) == port else "down",
        "tcp_len": int(length.split(",")[0] or 0),
        "retransmission": bool(retransmission),
        "types": [int(t) for t in types.split(",") if t.strip()],
    }  # fmt: skip


def bundling(frames: list[dict[str, Any]]) -> dict[str, Any]:
    """Per direction: segments (with TCP payload / without, i.e. bare ACKs / retransmitted),
    MQTT packets, packets per data segment; per direction and message type: packets, the segments
    that carry at least one of them, packets of that type per such segment, the most in one
    segment, and how many of those segments also carry another type (piggy-backing, as the seed's
    PUBREL + PUBCOMP behind a PUBLISH)."""
    directions: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for direction in DIRECTIONS:
        mine = [f for f in frames if f["direction"] == direction]
        # A TCP retransmission repeats bytes already counted: its MQTT packets would be counted twice.
        retransmitted = [f for f in mine if f["retransmission"]]
        data = [f for f in mine if f["tcp_len"] > 0 and not f["retransmission"]]
        with_mqtt = [f for f in data if f["types"]]
        packets = sum(len(f["types"]) for f in data)
        directions[direction] = {
            "segments": len(mine),
            "data_segments": len(data),
            "bare_ack_segments": sum(1 for f in mine if f["tcp_len"] == 0),
            "retransmitted_segments": len(retransmitted),
            "mqtt_packets": packets,
            "segments_with_mqtt": len(with_mqtt),
            "packets_per_segment": round(packets / len(with_mqtt), 3) if with_mqtt else None,
            "max_packets_per_segment": max((len(f["types"]) for f in with_mqtt), default=0),
            "bundled_segments": sum(1 for f in with_mqtt if len(f["types"]) > 1),
        }
        for code in sorted({t for f in data for t in f["types"]}):
            carrying = [f for f in data if code in f["types"]]
            count = sum(f["types"].count(code) for f in carrying)
            rows.append({
                "direction": direction,
                "type": MESSAGE_TYPES.get(code, f"type {code}"),
                "packets": count,
                "segments": len(carrying),
                "packets_per_segment": round(count / len(carrying), 3),
                "max_per_segment": max(f["types"].count(code) for f in carrying),
                "shared_segments": sum(1 for f in carrying if any(t != code for t in f["types"])),
            })  # fmt: skip
    return {"directions": directions, "by_type": rows}


def write_csv(section: dict[str, Any], path: Path) -> Path:
    """The per-type table as CSV beside the capture (the same rows as summary.json)."""
    columns = ["direction", "type", "packets", "segments", "packets_per_segment", "max_per_segment", "shared_segments"]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(section["by_type"])
    return path


def _dropped_packets(log: str) -> Optional[int]:
    # tshark ends with e.g. "123 packets captured" and, when the kernel dropped some, "N packets dropped".
    for line in log.splitlines():
        words = line.strip().split()
        if len(words) >= 3 and words[1] in ("packet", "packets") and words[2].startswith("dropped") and words[0].isdigit():
            return int(words[0])
    return 0 if "captured" in log else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip() and "dangerous" not in line]
    return lines[-1] if lines else "no message"
