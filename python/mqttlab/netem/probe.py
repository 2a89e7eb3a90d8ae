"""Measuring the link as traffic sees it: ICMP echo (ping) for round-trip time and loss, and a
timed TCP bulk transfer for the rate. Both run from this host's namespace to the broker's."""

from __future__ import annotations

import os
import select
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from mqttlab.netem import commands


@dataclass
class PingResult:
    sent: int
    received: int
    rtts_ms: list[float] = field(default_factory=list, repr=False)

    @property
    def loss(self) -> float:
        return 1 - self.received / self.sent if self.sent else 0.0

    def summary(self) -> dict[str, object]:
        rtts = sorted(self.rtts_ms)
        return {
            "sent": self.sent,
            "received": self.received,
            "loss": round(self.loss, 4),
            "rtt_min_ms": round(rtts[0], 3) if rtts else None,
            "rtt_median_ms": round(statistics.median(rtts), 3) if rtts else None,
            "rtt_mean_ms": round(statistics.fmean(rtts), 3) if rtts else None,
            "rtt_max_ms": round(rtts[-1], 3) if rtts else None,
            "rtt_stdev_ms": round(statistics.stdev(rtts), 3) if len(rtts) > 1 else None,
        }


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def _echo_request(ident: int, seq: int, size: int) -> bytes:
    body = b"mqttlab".ljust(size, b".")
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, _checksum(header + body), ident, seq) + body


def ping(address: str, count: int = 20, interval: float = 0.02, timeout: float = 2.0, size: int = 56) -> PingResult:
    """Sends `count` ICMP echo requests `interval` apart; replies after the last send + `timeout` count as lost."""
    if not 1 <= count <= 100_000:
        raise ValueError(f"count: must be from 1 to 100000 (got {count})")
    ident = os.getpid() & 0xFFFF
    sent_at: dict[int, float] = {}
    result = PingResult(sent=0, received=0)
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        start = time.monotonic()
        next_seq = 0
        deadline = start + count * interval + timeout
        while time.monotonic() < deadline and (next_seq < count or len(result.rtts_ms) < next_seq):
            now = time.monotonic()
            if next_seq < count and now >= start + next_seq * interval:
                sent_at[next_seq] = time.monotonic()
                sock.sendto(_echo_request(ident, next_seq, size), (address, 0))
                next_seq += 1
                continue
            due = start + next_seq * interval if next_seq < count else deadline
            ready, _, _ = select.select([sock], [], [], max(0.0, min(due, deadline) - now))
            if not ready:
                continue
            packet, _ = sock.recvfrom(65535)
            arrived = time.monotonic()
            header_len = (packet[0] & 0x0F) * 4
            kind, _, _, reply_ident, seq = struct.unpack("!BBHHH", packet[header_len:header_len + 8])
            if kind == 0 and reply_ident == ident and seq in sent_at:
                result.rtts_ms.append((arrived - sent_at.pop(seq)) * 1000)
        result.sent = next_seq
        result.received = len(result.rtts_ms)
    return result


@dataclass
class TransferResult:
    bytes: int
    seconds: float

    @property
    def bits_per_second(self) -> float:
        return self.bytes * 8 / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, object]:
        return {**asdict(self), "bits_per_second": round(self.bits_per_second)}


def bulk_transfer(namespace: str, address: str, seconds: float = 3.0, port: int = 5201) -> TransferResult:
    """Sends as fast as TCP allows for `seconds` to a sink in `namespace`; the sink reports the
    bytes it got between its first and last byte, so connection set-up does not count."""
    sink = subprocess.Popen(
        commands.in_namespace(namespace, [sys.executable, "-m", "mqttlab.netem.sink", str(port)]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        ready = sink.stdout.readline() if sink.stdout else ""
        if ready.strip() != "ready":
            raise commands.NetemError(f"the TCP sink did not start: {ready}{sink.stderr.read() if sink.stderr else ''}")
        chunk = b"\0" * 16384
        with socket.create_connection((address, port), timeout=10) as s:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                s.sendall(chunk)
        out, err = sink.communicate(timeout=seconds + 30)
        received, elapsed = out.split()
        return TransferResult(bytes=int(received), seconds=float(elapsed))
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
