"""A tiny MQTT 3.1.1 client over a plain or TLS socket: connect, subscribe, publish, receive.

It exists to tell whether a broker really serves MQTT (readiness after start) and to run a
publish/subscribe round trip in tests. It is not the load generator: one blocking socket,
QoS 0, 1 and 2, one exchange at a time, no reconnects."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, PINGREQ, PINGRESP, DISCONNECT = 8, 9, 12, 13, 14

CONNACK_REASONS = {
    1: "unacceptable protocol version",
    2: "client identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorised",
}


class ProbeError(Exception):
    """The broker did not answer as MQTT 3.1.1 requires (or not in time)."""


@dataclass(frozen=True)
class Message:
    topic: str
    payload: bytes
    qos: int


def _encode_length(length: int) -> bytes:
    out = bytearray()
    while True:
        digit, length = length % 128, length // 128
        out.append(digit | (0x80 if length else 0))
        if not length:
            return bytes(out)


def _utf8(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def _packet(first_byte: int, body: bytes) -> bytes:
    return bytes([first_byte]) + _encode_length(len(body)) + body


class MqttProbe:
    """One MQTT 3.1.1 connection (or an MQTT 5 one, for connect checks only). Use as a context
    manager; every wait is bounded by `timeout`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        tls_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        timeout: float = 5.0,
        keepalive: int = 60,
        protocol_level: int = 4,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        if protocol_level not in (4, 5):
            raise ValueError("protocol_level must be 4 (MQTT 3.1.1) or 5 (MQTT 5)")
        self.timeout = timeout
        self.protocol_level = protocol_level
        raw = socket.create_connection((host, port), timeout=timeout)
        try:
            if tls_context is not None:
                raw = tls_context.wrap_socket(raw, server_hostname=server_hostname or host)
            self._sock = raw
            self._buffer = bytearray()
            self._inbox: deque[Message] = deque()
            self._next_packet_id = 1
            self._connect(client_id, keepalive, username, password)
        except BaseException:
            raw.close()
            raise

    def __enter__(self) -> MqttProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- wire ---------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def _fill(self, needed: int, deadline: float) -> None:
        while len(self._buffer) < needed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProbeError("timed out waiting for the broker")
            self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise ProbeError("timed out waiting for the broker") from None
            if not chunk:
                raise ProbeError("the broker closed the connection")
            self._buffer += chunk

    def _read_packet(self, deadline: float) -> tuple[int, int, bytes]:
        """Returns (packet type, flags, body) of the next packet."""
        self._fill(2, deadline)
        length, multiplier, index = 0, 1, 1
        while True:
            self._fill(index + 1, deadline)
            digit = self._buffer[index]
            length += (digit & 0x7F) * multiplier
            index += 1
            if not digit & 0x80:
                break
            multiplier *= 128
            if index > 4:
                raise ProbeError("malformed remaining length from the broker")
        self._fill(index + length, deadline)
        first = self._buffer[0]
        body = bytes(self._buffer[index:index + length])
        del self._buffer[:index + length]
        return first >> 4, first & 0x0F, body

    def _take_id(self) -> int:
        packet_id = self._next_packet_id
        self._next_packet_id = packet_id % 65535 + 1
        return packet_id

    def _wait_for(self, wanted: int, packet_id: int | None, deadline: float, refuse: int | None = None) -> bytes:
        """Reads until a packet of type `wanted` (with `packet_id`, if given) arrives; PUBLISH
        packets met on the way are kept for `receive`. A `refuse` packet with the same id is
        the broker breaking the exchange and raises ProbeError."""
        while True:
            kind, flags, body = self._read_packet(deadline)
            if kind == PUBLISH:
                self._inbox.append(self._accept_publish(flags, body))
                continue
            if kind == refuse and packet_id is not None and struct.unpack("!H", body[:2])[0] == packet_id:
                raise ProbeError(f"the broker answered with packet type {kind} where MQTT requires type {wanted}")
            if kind != wanted:
                continue
            if packet_id is not None and struct.unpack("!H", body[:2])[0] != packet_id:
                continue
            return body

    def _accept_publish(self, flags: int, body: bytes) -> Message:
        qos = (flags >> 1) & 0x03
        topic_len = struct.unpack("!H", body[:2])[0]
        topic = body[2:2 + topic_len].decode()
        offset = 2 + topic_len
        if qos:
            packet_id = struct.unpack("!H", body[offset:offset + 2])[0]
            offset += 2
            if qos == 1:
                self._send(_packet(PUBACK << 4, struct.pack("!H", packet_id)))
            else:
                # QoS 2, receiver side: PUBREC, wait for the broker's PUBREL, PUBCOMP. The probe
                # receives one message at a time, so waiting here keeps the exchange in order.
                self._send(_packet(PUBREC << 4, struct.pack("!H", packet_id)))
                self._wait_for(PUBREL, packet_id, time.monotonic() + self.timeout)
                self._send(_packet(PUBCOMP << 4, struct.pack("!H", packet_id)))
        return Message(topic, body[offset:], qos)

    # -- MQTT ---------------------------------------------------------------------------

    def _connect(self, client_id: str, keepalive: int, username: str | None = None,
                 password: str | None = None) -> None:
        clean_session = 0x02
        if username is not None:
            clean_session |= 0x80
        if password is not None:
            clean_session |= 0x40
        # MQTT 5 adds a properties block (empty here) after the keep-alive.
        properties = b"\x00" if self.protocol_level == 5 else b""
        body = (_utf8("MQTT") + bytes([self.protocol_level, clean_session]) + struct.pack("!H", keepalive)
                + properties + _utf8(client_id))
        if username is not None:
            body += _utf8(username)
        if password is not None:
            body += _utf8(password)
        self._send(_packet(CONNECT << 4, body))
        deadline = time.monotonic() + self.timeout
        kind, _, answer = self._read_packet(deadline)
        if kind != CONNACK or len(answer) < 2:
            raise ProbeError(f"expected CONNACK, got packet type {kind}")
        code = answer[1]
        if code:
            if self.protocol_level == 4:
                reason = CONNACK_REASONS.get(code, f"code {code}")
            else:
                reason = f"reason code {code:#04x}"
            raise ProbeError(f"connection refused: {reason}")

    def _require_v4(self, what: str) -> None:
        if self.protocol_level != 4:
            raise ProbeError(f"the probe can {what} only over MQTT 3.1.1; MQTT 5 is for connect checks")

    def subscribe(self, topic: str, qos: int = 0) -> int:
        """Subscribes and returns the granted QoS."""
        self._require_v4("subscribe")
        packet_id = self._take_id()
        body = struct.pack("!H", packet_id) + _utf8(topic) + bytes([qos])
        self._send(_packet((SUBSCRIBE << 4) | 0x02, body))
        answer = self._wait_for(SUBACK, packet_id, time.monotonic() + self.timeout)
        granted = answer[2]
        if granted == 0x80:
            raise ProbeError(f"subscription to {topic!r} refused")
        return granted

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        """Publishes; with QoS 1 returns after the broker's PUBACK, with QoS 2 after its PUBCOMP."""
        self._require_v4("publish")
        if qos not in (0, 1, 2):
            raise ValueError("qos must be 0, 1 or 2")
        header = _utf8(topic)
        packet_id = None
        if qos:
            packet_id = self._take_id()
            header += struct.pack("!H", packet_id)
        self._send(_packet((PUBLISH << 4) | (qos << 1), header + payload))
        if qos == 1:
            self._wait_for(PUBACK, packet_id, time.monotonic() + self.timeout)
        elif qos == 2:
            # A broker without QoS 2 (RabbitMQ 3.10) answers PUBACK, breaking MQTT 3.1.1 §4.3.3.
            self._wait_for(PUBREC, packet_id, time.monotonic() + self.timeout, refuse=PUBACK)
            # PUBREL carries the fixed-header flags 0b0010.
            self._send(_packet((PUBREL << 4) | 0x02, struct.pack("!H", packet_id)))
            self._wait_for(PUBCOMP, packet_id, time.monotonic() + self.timeout)

    def receive(self, timeout: float | None = None) -> Message:
        """The next message delivered on a subscription."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._inbox:
            kind, flags, body = self._read_packet(deadline)
            if kind == PUBLISH:
                self._inbox.append(self._accept_publish(flags, body))
        return self._inbox.popleft()

    def ping(self) -> None:
        self._send(_packet(PINGREQ << 4, b""))
        self._wait_for(PINGRESP, None, time.monotonic() + self.timeout)

    def close(self) -> None:
        try:
            self._send(_packet(DISCONNECT << 4, b""))
        except OSError:
            pass
        finally:
            self._sock.close()


def client_tls_context(ca_file: str | None) -> ssl.SSLContext:
    """A client context that trusts only `ca_file` (the run's throwaway CA) and checks the name."""
    context = ssl.create_default_context(cafile=ca_file)
    context.check_hostname = True
    return context


def round_trip(
    host: str,
    port: int,
    *,
    tls_context: ssl.SSLContext | None = None,
    qos: int = 1,
    payload: bytes = b"mqttlab round trip",
    timeout: float = 5.0,
    credentials: tuple[str, str] | None = None,
) -> Message:
    """Subscribes with one client, publishes with another, and returns what the subscriber got.

    Raises ProbeError if nothing arrives in time."""
    tag = f"{time.monotonic_ns():x}"
    topic = f"mqttlab/probe/{tag}"
    common: dict[str, Any] = dict(tls_context=tls_context, timeout=timeout)
    if credentials is not None:
        common.update(username=credentials[0], password=credentials[1])
    with MqttProbe(host, port, client_id=f"mqttlab-sub-{tag}", **common) as subscriber:
        subscriber.subscribe(topic, qos)
        with MqttProbe(host, port, client_id=f"mqttlab-pub-{tag}", **common) as publisher:
            publisher.publish(topic, payload, qos)
        return subscriber.receive()
