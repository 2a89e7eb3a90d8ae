"""A small MQTT 3.1.1 broker for tests, on loopback, that can break the promises the protocol
makes about state on purpose: the only way to show each broken promise named with its count.
Exact topic filters and a trailing `#`, QoS 1, persistent sessions and retained messages."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any, Optional


class ScriptedBroker:
    """The broker. Its faults: `drop_every` drops every n-th message it would queue for an offline
    session, `forget_sessions` answers every return with no session, `stale_retained` keeps a
    topic's first retained value instead of its last, `will_on_disconnect` publishes a client's
    will after its DISCONNECT too, `keep_taken_over` leaves a connection open when a second one
    takes its session over, `keep_deleted_retained` stores a retained PUBLISH with an empty payload
    instead of deleting the topic's retained message, `lose_after_takeover` drops the next n
    messages for a session a second connection took over."""

    def __init__(self, drop_every: int = 0, forget_sessions: bool = False, stale_retained: bool = False, will_on_disconnect: bool = False,
                 keep_taken_over: bool = False, keep_deleted_retained: bool = False, lose_after_takeover: int = 0) -> None:
        self.drop_every, self.forget_sessions, self.stale_retained = drop_every, forget_sessions, stale_retained
        self.will_on_disconnect, self.keep_taken_over = will_on_disconnect, keep_taken_over
        self.keep_deleted_retained, self.lose_after_takeover = keep_deleted_retained, lose_after_takeover
        self.dropped = 0
        self.retained: dict[bytes, bytes] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.queued = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> "ScriptedBroker":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket) -> Optional[tuple[int, bytes]]:
        head = conn.recv(1)
        if not head:
            return None
        length, shift = 0, 0
        while True:
            byte = conn.recv(1)[0]
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        body = b""
        while len(body) < length:
            chunk = conn.recv(length - len(body))
            if not chunk:
                return None
            body += chunk
        return head[0], body

    @staticmethod
    def _packet(first: int, body: bytes) -> bytes:
        length, encoded = len(body), b""
        while True:
            byte, length = length & 0x7F, length >> 7
            encoded += bytes([byte | (0x80 if length else 0)])
            if not length:
                return bytes([first]) + encoded + body

    @staticmethod
    def _matches(topic_filter: bytes, topic: bytes) -> bool:
        return topic_filter == topic or (topic_filter.endswith(b"#") and topic.startswith(topic_filter[:-1]))

    def _deliver(self, session: dict[str, Any], topic: bytes, payload: bytes, retain: bool = False) -> None:
        session["pkid"] = session["pkid"] % 65535 + 1
        packet = self._packet(0x32 | int(retain), struct.pack("!H", len(topic)) + topic + struct.pack("!H", session["pkid"]) + payload)
        try:
            session["conn"].sendall(packet)
        except OSError:
            pass

    def _serve(self, conn: socket.socket) -> None:
        session: Optional[dict[str, Any]] = None
        will: Optional[tuple[bytes, bytes]] = None
        graceful = False
        while True:
            try:
                packet = self._read(conn)
            except OSError:
                packet = None
            if packet is None:
                break
            first, body = packet
            kind = first >> 4
            if kind == 1:  # CONNECT: protocol name, level, flags, keep alive, client id
                name_len = struct.unpack("!H", body[:2])[0]
                flags = body[2 + name_len + 1]
                id_len = struct.unpack("!H", body[2 + name_len + 4:2 + name_len + 6])[0]
                client_id = body[2 + name_len + 6:2 + name_len + 6 + id_len].decode()
                if flags & 0x04:  # a will: its topic and payload follow the client id
                    at = 2 + name_len + 6 + id_len
                    size = struct.unpack("!H", body[at:at + 2])[0]
                    topic = body[at + 2:at + 2 + size]
                    at += 2 + size
                    size = struct.unpack("!H", body[at:at + 2])[0]
                    will = (topic, body[at + 2:at + 2 + size])
                with self.lock:
                    old = self.sessions.get(client_id)
                    if old and old["conn"] is not None and not self.keep_taken_over:
                        old["conn"].shutdown(socket.SHUT_RDWR)  # a session taken over: its old connection closed
                    present = bool(old) and not flags & 0x02 and not self.forget_sessions
                    session = old if present else {"filters": set(), "queue": [], "pkid": 0}
                    if old and old["conn"] is not None:
                        session["lose"] = self.lose_after_takeover  # lost in the handover (a broken promise)
                    session["conn"] = conn
                    self.sessions[client_id] = session
                    conn.sendall(self._packet(0x20, bytes([int(present), 0])))
                    for topic, payload in session["queue"]:
                        self._deliver(session, topic, payload)
                    session["queue"] = []
            elif kind == 8 and session is not None:  # SUBSCRIBE: packet id, then filters with their QoS
                pkid, at, granted, added = body[:2], 2, b"", []
                while at < len(body):
                    size = struct.unpack("!H", body[at:at + 2])[0]
                    added.append(body[at + 2:at + 2 + size])
                    at += 2 + size + 1
                    granted += b"\x01"
                with self.lock:
                    session["filters"].update(added)
                    conn.sendall(self._packet(0x90, pkid + granted))
                    for topic, payload in self.retained.items():
                        if any(self._matches(f, topic) for f in added):
                            self._deliver(session, topic, payload, retain=True)
            elif kind == 3:  # PUBLISH: acknowledge (QoS 1), then forward or queue
                size = struct.unpack("!H", body[:2])[0]
                topic = body[2:2 + size]
                if first & 0x06:
                    pkid, payload = body[2 + size:4 + size], body[4 + size:]
                    conn.sendall(self._packet(0x40, pkid))
                else:
                    payload = body[2 + size:]
                with self.lock:
                    if first & 0x01 and not payload and not self.keep_deleted_retained:
                        self.retained.pop(topic, None)  # an empty retained message deletes the topic's
                    elif first & 0x01 and not (self.stale_retained and topic in self.retained):
                        self.retained[topic] = payload
                    for other in self.sessions.values():
                        if not any(self._matches(f, topic) for f in other["filters"]):
                            continue
                        if other.get("lose"):
                            other["lose"] -= 1
                            self.dropped += 1
                            continue
                        if other["conn"] is not None:
                            self._deliver(other, topic, payload)
                            continue
                        self.queued += 1
                        if self.drop_every and self.queued % self.drop_every == 0:
                            self.dropped += 1  # the broken promise
                        else:
                            other["queue"].append((topic, payload))
            elif kind == 12:  # PINGREQ
                conn.sendall(self._packet(0xD0, b""))
            elif kind == 14:  # DISCONNECT: the session stays, offline
                graceful = True
                break
        with self.lock:
            if session is not None and session.get("conn") is conn:
                session["conn"] = None
            if will is not None and (not graceful or self.will_on_disconnect):
                topic, payload = will
                for other in self.sessions.values():
                    if other["conn"] is not None and any(self._matches(f, topic) for f in other["filters"]):
                        self._deliver(other, topic, payload)
        conn.close()


