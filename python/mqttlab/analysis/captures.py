"""Protocol figures measured from a run's packet capture (seed 002's tables, as a capture gives
them): the bytes of each MQTT packet and of the frame that carries it, the overhead of a PUBLISH
exchange per QoS, the cost of a connection, message bundling, and each message's round trip.

The capture is the one `mqttlab run --capture` keeps in a results directory
(`capture/capture.pcapng`, netem/capture.py); Wireshark's MQTT dissector reads it through tshark,
which reassembles a packet split over several segments and reports it in the segment that
completes it. Nothing here is computed from the protocol: every byte is one the capture saw.

Frame bytes are what the capture device carried: on `lo` and on a veth an Ethernet header of
14 bytes, on a TUN device (the user-space link emulator) none, so each table says the link header
it saw. TCP retransmissions are left out of every figure (they repeat bytes already counted) and
counted apart.

Every figure of one run is gathered as plain data by `capture_figures`: from the capture when the
results directory holds it, else from `capture/figures.json`, the same data as a reproduction
page's evidence keeps it (reproductions/evidence.py), since the captures themselves are too large
to commit. Both ways give the same numbers: the figures read from a capture pass through the same
JSON before anyone uses them."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional

from mqttlab.netem.capture import CAPTURE_FILE, DIRECTIONS, MESSAGE_TYPES, bundling, tshark_fields

PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 3, 4, 5, 6, 7
CONNECT, CONNACK, DISCONNECT = 1, 2, 14
ACKNOWLEDGEMENTS = (PUBACK, PUBREC, PUBREL, PUBCOMP)
FIGURES_FILE = "figures.json"  # beside the capture, in capture/: what a page's evidence keeps of it
FIGURES_FORMAT = "mqttlab-capture-figures/1"
HEADER_HEX = 32  # the 16-byte measurement header, as tshark prints mqtt.msg (hex)
_FIELDS = ["frame.time_epoch", "frame.len", "ip.len", "tcp.stream", "tcp.dstport", "tcp.len", "tcp.flags.syn",
           "tcp.flags.fin", "tcp.analysis.retransmission", "mqtt.hdrflags", "mqtt.len", "tcp.ack", "tcp.nxtseq",
           "tcp.options.sack_le"]  # fmt: skip


class CaptureAnalysisError(Exception):
    """A results directory without a capture that can be read; the message says what to do."""


@dataclass
class Header:
    """The engine's measurement header at the start of a payload (crates/mqttlab-engine/src/payload.rs)."""

    publisher: int
    sequence: int
    intended_us: int
    lag_us: int

    @property
    def key(self) -> tuple[int, int]:
        return self.publisher, self.sequence

    @property
    def sent_ns(self) -> int:
        """The actual send on the engine's clock, as the engine itself reads it from the header."""
        return (self.intended_us + self.lag_us) * 1000


def read_header(message_hex: str) -> Optional[Header]:
    """The measurement header at the start of a payload given in hex; None for a shorter one."""
    if len(message_hex) < HEADER_HEX:
        return None
    try:
        return Header(int(message_hex[0:8], 16), int(message_hex[8:16], 16), int(message_hex[16:28], 16), int(message_hex[28:32], 16))
    except ValueError:
        raise CaptureAnalysisError(f"tshark printed a PUBLISH payload that is not hex ({message_hex[:40]!r}): a Wireshark that shows mqtt.msg as text") from None


@dataclass
class Packet:
    type: int
    qos: int  # of a PUBLISH; 0 for the other types
    size: int  # bytes of the whole MQTT packet: fixed header, remaining length, the rest


@dataclass
class Frame:
    time: float  # the capture's clock (Unix seconds)
    stream: int  # tshark's TCP connection index
    up: bool  # clients → broker
    frame_bytes: int
    ip_bytes: int
    tcp_len: int
    control: bool  # SYN or FIN: connection set-up or tear-down
    retransmission: bool
    packets: list[Packet] = field(default_factory=list)  # the MQTT packets this segment completes, in order
    ack: int = 0  # TCP acknowledgement number (relative): the other side's bytes received so far
    next_seq: int = 0  # TCP sequence number after this segment's payload (relative)
    fin: bool = False
    # It reports a segment that arrived twice (a D-SACK block, RFC 2883: a SACK edge below its own
    # acknowledgement number): the answer to a retransmission, not to the segment first sent.
    reports_duplicate: bool = False

    @property
    def bare_ack(self) -> bool:
        return self.tcp_len == 0 and not self.control

    @property
    def carries_publish(self) -> bool:
        """Whether any of its TCP payload is PUBLISH bytes: it completes a PUBLISH, or it carries
        more than the small packets it completes (a middle or first segment of a large PUBLISH)."""
        if any(p.type == PUBLISH for p in self.packets):
            return True
        return self.tcp_len > sum(p.size for p in self.packets)


def _remaining_length_bytes(n: int) -> int:
    # The fixed header's Remaining Length field takes one byte per 7 bits of the length.
    return max(1, (n.bit_length() + 6) // 7)


def _packets(flags: str, lengths: str) -> list[Packet]:
    out = []
    for flag, length in zip(flags.split(","), lengths.split(",")):
        if not flag.strip() or not length.strip():
            continue
        value, remaining = int(flag, 0), int(length)
        kind = value >> 4
        out.append(Packet(kind, (value >> 1) & 3 if kind == PUBLISH else 0, 1 + _remaining_length_bytes(remaining) + remaining))
    return out


def capture_info(directory: Path) -> dict[str, Any]:
    """The manifest's `capture` section of a run (device, port, clock, packets the kernel dropped),
    or CaptureAnalysisError; for a run whose capture is kept as its figures only, theirs."""
    directory = Path(directory)
    if not (directory / "capture" / CAPTURE_FILE).is_file() and (directory / "capture" / FIGURES_FILE).is_file():
        return dict(_stored(directory)["info"])
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CaptureAnalysisError(f"{directory}: no readable manifest.json ({error})") from None
    info = manifest.get("capture") or {}
    if not info.get("port") or not (directory / "capture" / CAPTURE_FILE).is_file():
        raise CaptureAnalysisError(f"{directory}: the run was not captured (run it with --capture or options.capture: true)")
    return dict(info)


def read_frames(directory: Path) -> list[Frame]:
    """Every TCP frame of a run's capture with the MQTT packets it completes."""
    info = capture_info(directory)
    port = int(info["port"])
    frames = []
    for cells in tshark_fields(Path(directory) / "capture" / CAPTURE_FILE, port, _FIELDS):
        when, length, ip_len, stream, dstport, tcp_len, syn, fin, retransmission, flags, lengths, ack, next_seq, sack_left = cells
        acknowledged = int(_first(ack) or 0)
        frames.append(Frame(
            time=float(when), stream=int(_first(stream) or -1), up=_first(dstport) == str(port),
            frame_bytes=int(length), ip_bytes=int(_first(ip_len) or 0), tcp_len=int(_first(tcp_len) or 0),
            control=_first(syn) in ("1", "True") or _first(fin) in ("1", "True"), retransmission=bool(retransmission),
            packets=_packets(flags, lengths), ack=acknowledged, next_seq=int(_first(next_seq) or 0),
            fin=_first(fin) in ("1", "True"), reports_duplicate=any(int(edge) < acknowledged for edge in sack_left.split(",") if edge),
        ))  # fmt: skip
    return frames


def _first(cell: str) -> str:
    # A frame may repeat a field (an ICMP error quoting the TCP header it answers): the frame's own comes first.
    return cell.split(",")[0]


def _most_common(values: Iterable[int]) -> Optional[int]:
    counts = Counter(values)
    return counts.most_common(1)[0][0] if counts else None


def _name(packet: Packet) -> str:
    return MESSAGE_TYPES.get(packet.type, f"type {packet.type}")


def link_header_bytes(frames: list[Frame]) -> Optional[int]:
    """The link-layer header the capture device puts before IP: 14 (Ethernet) on lo and veth, 0 on TUN."""
    return _most_common(f.frame_bytes - f.ip_bytes for f in frames if f.ip_bytes)


def packet_table(frames: list[Frame]) -> list[dict[str, Any]]:
    """Per direction and MQTT packet type (PUBLISH per QoS): how many, their size at the MQTT
    layer (the most common, the smallest, the largest), and the frames that carry one such packet
    and nothing else: how many, their frame and IP bytes (most common)."""
    groups: dict[tuple[str, str], list[tuple[Packet, Frame]]] = {}
    for frame in frames:
        if frame.retransmission:
            continue
        for packet in frame.packets:
            kind = _name(packet) + (f" QoS {packet.qos}" if packet.type == PUBLISH else "")
            groups.setdefault(("up" if frame.up else "down", kind), []).append((packet, frame))
    rows = []
    for (direction, kind), members in sorted(groups.items(), key=lambda item: (item[0][0] != "up", item[1][0][0].type, item[0][1])):
        sizes = [p.size for p, _ in members]
        alone = [f for p, f in members if len(f.packets) == 1 and f.tcp_len == p.size]
        rows.append({
            "direction": direction, "packet": kind, "packets": len(members),
            "mqtt_bytes": _most_common(sizes), "mqtt_bytes_min": min(sizes), "mqtt_bytes_max": max(sizes),
            "frames_alone": len(alone), "frame_bytes_alone": _most_common(f.frame_bytes for f in alone),
            "ip_bytes_alone": _most_common(f.ip_bytes for f in alone),
        })  # fmt: skip
    return rows


def exchange_table(frames: list[Frame]) -> list[dict[str, Any]]:
    """The overhead of a PUBLISH exchange per QoS, on the connections whose PUBLISH packets all
    have that QoS, from each connection's first PUBLISH to its last acknowledgement (connection
    set-up and tear-down left out): per PUBLISH, the acknowledgements (PUBACK; PUBREC, PUBREL,
    PUBCOMP) in packets and MQTT bytes, and the frames that carry no PUBLISH byte (acknowledgements
    alone and bare TCP ACKs) in count and frame bytes. A frame carrying a PUBLISH and an
    acknowledgement (piggy-backed) costs the acknowledgement's MQTT bytes and no frame."""
    by_stream: dict[int, list[Frame]] = {}
    for frame in frames:
        if not frame.retransmission:
            by_stream.setdefault(frame.stream, []).append(frame)
    tallies: dict[int, Counter] = {}
    for stream_frames in by_stream.values():
        publishes = [p for f in stream_frames for p in f.packets if p.type == PUBLISH]
        levels = {p.qos for p in publishes}
        if len(levels) != 1:
            continue  # no PUBLISH, or several QoS levels on one connection: not one exchange's figure
        qos = levels.pop()
        marks = [i for i, f in enumerate(stream_frames) if any(p.type in (PUBLISH, *ACKNOWLEDGEMENTS) for p in f.packets)]
        window = stream_frames[marks[0]: marks[-1] + 1]
        # The bare ACK that answers the last frame of the window belongs to the exchange too.
        after = stream_frames[marks[-1] + 1: marks[-1] + 2]
        window += [f for f in after if f.bare_ack]
        tally = tallies.setdefault(qos, Counter())
        tally["connections"] += 1
        for frame in window:
            acks = [p for p in frame.packets if p.type in ACKNOWLEDGEMENTS]
            tally["publishes"] += sum(p.type == PUBLISH for p in frame.packets)
            tally["ack_packets"] += len(acks)
            tally["ack_mqtt_bytes"] += sum(p.size for p in acks)
            for p in acks:
                tally[MESSAGE_TYPES[p.type]] += 1
            if frame.carries_publish:
                tally["publish_frames"] += 1
                tally["piggybacked_acks"] += len(acks)
            elif frame.bare_ack:
                tally["bare_acks"] += 1
                tally["bare_ack_bytes"] += frame.frame_bytes
            elif acks:
                tally["ack_frames"] += 1
                tally["ack_frame_bytes"] += frame.frame_bytes
    rows = []
    for qos, t in sorted(tallies.items()):
        n = t["publishes"]

        def per(key: str, t: Counter = t, n: int = n) -> Optional[float]:
            return round(t[key] / n, 3) if n else None

        rows.append({
            "qos": qos, "connections": t["connections"], "publishes": n,
            "ack_packets_per_publish": per("ack_packets"),
            **{f"{MESSAGE_TYPES[a].lower()}_per_publish": per(MESSAGE_TYPES[a]) for a in ACKNOWLEDGEMENTS},
            "ack_mqtt_bytes_per_publish": per("ack_mqtt_bytes"),
            "ack_frames_per_publish": per("ack_frames"), "bare_acks_per_publish": per("bare_acks"),
            "piggybacked_acks_per_publish": per("piggybacked_acks"),
            # What a PUBLISH costs beyond its own frames: the paper's "MQTT+TCP" column.
            "overhead_frame_bytes_per_publish": round((t["ack_frame_bytes"] + t["bare_ack_bytes"]) / n, 1) if n else None,
            "ack_frame_bytes_per_publish": per("ack_frame_bytes"), "bare_ack_bytes_per_publish": per("bare_ack_bytes"),
        })  # fmt: skip
    return rows


def connection_table(frames: list[Frame]) -> list[dict[str, Any]]:
    """Per connection with a CONNECT: the TCP handshake (SYN, SYN-ACK and ACK frames and bytes),
    the CONNECT and CONNACK frames, the bare TCP ACKs between the CONNECT and the client's next
    MQTT packet, the DISCONNECT frame, the bare ACKs between it and the first FIN, and the
    broker's segment that acknowledges the DISCONNECT: its bytes and whether it is a bare ACK or
    the broker's FIN. A client that closes at once sends its FIN before the broker has answered
    the DISCONNECT, and the broker's FIN then acknowledges both: no bare ACK follows."""
    by_stream: dict[int, list[Frame]] = {}
    for frame in frames:
        if not frame.retransmission:
            by_stream.setdefault(frame.stream, []).append(frame)
    rows = []
    for stream, mine in sorted(by_stream.items()):
        connect = next((i for i, f in enumerate(mine) if any(p.type == CONNECT for p in f.packets)), None)
        if connect is None:
            continue
        handshake = [f for f in mine[:connect] if f.control or f.bare_ack]
        later = next((i for i in range(connect + 1, len(mine)) if mine[i].up and mine[i].packets), len(mine))
        connack = next((f for f in mine[connect:later] if any(p.type == CONNACK for p in f.packets)), None)
        disconnect = next((i for i, f in enumerate(mine) if any(p.type == DISCONNECT for p in f.packets)), None)
        fin = next((i for i in range((disconnect or 0) + 1, len(mine)) if mine[i].control), len(mine))
        rows.append({
            "connection": stream,
            "handshake_frames": len(handshake), "handshake_bytes": sum(f.frame_bytes for f in handshake),
            "connect_mqtt_bytes": _size(mine[connect], CONNECT), "connect_frame_bytes": _alone(mine[connect], CONNECT),
            "connack_mqtt_bytes": _size(connack, CONNACK), "connack_frame_bytes": _alone(connack, CONNACK),
            "connect_tcp_acks": [f.frame_bytes for f in mine[connect + 1: later] if f.bare_ack],
            "disconnect_mqtt_bytes": _size(mine[disconnect], DISCONNECT) if disconnect is not None else None,
            "disconnect_frame_bytes": _alone(mine[disconnect], DISCONNECT) if disconnect is not None else None,
            "disconnect_tcp_acks": [f.frame_bytes for f in mine[disconnect + 1: fin] if f.bare_ack] if disconnect is not None else [],
            "disconnect_ack": _acknowledgement(mine, disconnect) if disconnect is not None else None,
        })  # fmt: skip
    return rows


def _acknowledgement(frames: list[Frame], index: int) -> Optional[dict[str, Any]]:
    """The first segment without payload from the other side whose acknowledgement number covers
    frame `index`: {frame_bytes, bare (False: it carries the FIN)}; None when the capture has none.
    A segment that reports a duplicate answers a retransmission, and is passed over: when a loaded
    host re-sent the client's FIN, the broker's D-SACK (12 option bytes more) came before its FIN."""
    sent = frames[index]
    answers = (f for f in frames[index + 1:] if f.up != sent.up and f.tcp_len == 0 and not f.reports_duplicate)
    answer = next((f for f in answers if f.ack >= sent.next_seq > 0), None)
    return None if answer is None else {"frame_bytes": answer.frame_bytes, "bare": answer.bare_ack}


def _size(frame: Optional[Frame], kind: int) -> Optional[int]:
    if frame is None:
        return None
    return next((p.size for p in frame.packets if p.type == kind), None)


def _alone(frame: Optional[Frame], kind: int) -> Optional[int]:
    """The frame's bytes when it carries that one packet and nothing else (else None: shared)."""
    if frame is None or len(frame.packets) != 1 or frame.packets[0].type != kind or frame.tcp_len != frame.packets[0].size:
        return None
    return frame.frame_bytes


def bundling_table(frames: list[Frame]) -> dict[str, Any]:
    """MQTT packets per TCP segment, per direction and type (netem/capture.py's tally)."""
    return bundling([{"direction": DIRECTIONS[0] if f.up else DIRECTIONS[1], "tcp_len": f.tcp_len,
                      "retransmission": f.retransmission, "types": [p.type for p in f.packets]} for f in frames])


def measure(directory: Path) -> dict[str, Any]:
    """Every capture figure of one run, as plain data: the link header seen, the packets, the
    exchanges per QoS, the connections, bundling and the retransmitted segments left out."""
    return dict(capture_figures(directory)["figures"])


def _measure_capture(directory: Path) -> dict[str, Any]:
    info = capture_info(directory)
    frames = read_frames(directory)
    return {
        "device": info.get("device"), "port": info.get("port"), "capture_dropped": info.get("capture_dropped"),
        "frames": len(frames), "retransmitted_frames": sum(f.retransmission for f in frames),
        "link_header_bytes": link_header_bytes(frames),
        "packets": packet_table(frames), "exchanges": exchange_table(frames),
        "connections": connection_table(frames), "bundling": bundling_table(frames),
    }  # fmt: skip


# ---- each message's round trip ---------------------------------------------------------------


@dataclass
class RoundTrip:
    publisher: int
    sequence: int
    send_s: float  # intended send time, seconds from the start of the measured load (after warm-up)
    rtt_ms: float  # from the intended send to the echo's arrival at the capture device


def round_trips(directory: Path) -> list[RoundTrip]:
    """Each echoed message's round trip (see _round_trips_from_capture), in send order, to the
    microsecond; CaptureAnalysisError when the capture cannot give them."""
    figures = capture_figures(directory)
    if figures["round_trips"] is None:
        raise CaptureAnalysisError(f"{directory}: {figures['round_trips_error']}")
    return trips_from_rows(figures["round_trips"])


def trips_from_rows(rows: list[list[Any]]) -> list[RoundTrip]:
    """RoundTrips from capture_figures' rows ([publisher, sequence, send_s, rtt_ms] each)."""
    return [RoundTrip(int(publisher), int(sequence), float(send_s), float(rtt_ms)) for publisher, sequence, send_s, rtt_ms in rows]


def fin_marks(trips: list[RoundTrip]) -> Optional[tuple[RoundTrip, RoundTrip]]:
    """Seed 002's shark fin in one run's round trips (in send order): the highest of the measured
    load (warm-up left out) and the lowest after it, or the highest twice when it is the last
    echo; None with fewer than two."""
    measured = [trip for trip in trips if trip.send_s >= 0]
    if len(measured) < 2:
        return None
    peak = max(range(len(measured)), key=lambda index: measured[index].rtt_ms)
    after = measured[peak + 1:]
    return measured[peak], min(after, key=lambda trip: trip.rtt_ms) if after else measured[peak]


def fin_fall(trips: list[RoundTrip]) -> Optional[float]:
    """The fin's fall: the lowest round trip after the highest, as a share of the highest. Near 0
    when the round trip collapses after its peak, 1 when the queue only grows."""
    marks = fin_marks(trips)
    if marks is None or marks[0].rtt_ms <= 0:
        return None
    return round(marks[1].rtt_ms / marks[0].rtt_ms, 4)


class _NoRoundTrips(Exception):
    """Why a capture gives no round trips, said without the directory (the reason is kept in figures.json)."""


def _round_trips_from_capture(directory: Path) -> list[RoundTrip]:
    """Each echoed message's round trip, from the capture: the echo is the PUBLISH coming back
    (broker → client) with the same measurement header (publisher, sequence) on another topic
    than the message was sent on. Its send time is the intended send time the header carries
    (the engine's monotonic clock), set on the capture's clock by the pair of readings the capture
    took when it started; so the round trip includes the schedule's lag and every queue on the
    way, as the engine's own figure does, and ends where the capture device saw the echo. Payloads
    shorter than the 16-byte header (the topic-sequence method) have no header to match."""
    info = capture_info(directory)
    clock = info.get("clock")
    if not clock:
        raise _NoRoundTrips("the capture has no clock reading (captured by an older mqttlab): run it again")
    try:
        start_mono_ns = int(json.loads((Path(directory) / "result.json").read_text(encoding="utf-8"))["start_mono_ns"])
    except (OSError, ValueError, KeyError) as error:
        raise _NoRoundTrips(f"no result.json with the load's start ({type(error).__name__})") from None
    port = int(info["port"])
    offset_ns = int(clock["unix_ns"]) - int(clock["mono_ns"])  # capture time = monotonic + offset
    sent: dict[tuple[int, int], tuple[str, int]] = {}  # header -> (topic, intended monotonic ns)
    back: dict[tuple[int, int], float] = {}
    fields = ["frame.time_epoch", "tcp.dstport", "mqtt.topic", "mqtt.msg"]
    for when, dstport, topics, messages in tshark_fields(Path(directory) / "capture" / CAPTURE_FILE, port, fields, "mqtt.msgtype == 3"):
        up = dstport.split(",")[0] == str(port)
        for topic, message in zip(topics.split(","), messages.split(",")):
            header = read_header(message)
            if header is None:
                continue
            key, intended_ns = header.key, header.intended_us * 1000
            if up:
                sent.setdefault(key, (topic, intended_ns))
            elif key in sent and topic != sent[key][0] and key not in back:
                back[key] = float(when)
    trips = []
    for key, arrived in back.items():
        intended_ns = sent[key][1]
        trips.append(RoundTrip(key[0], key[1], (intended_ns - start_mono_ns) / 1e9, (arrived * 1e9 - intended_ns - offset_ns) / 1e6))
    return sorted(trips, key=lambda trip: trip.send_s)


# ---- all of a run's figures, from its capture or as kept ---------------------------------------


def capture_figures(directory: Path) -> dict[str, Any]:
    """Every figure of one run's capture as plain data: {format, info (the manifest's capture
    section), figures (measure), round_trips ([publisher, sequence, send_s, rtt_ms] each, or None),
    round_trips_error}. From the capture when the directory holds it, else from the
    capture/figures.json a page's evidence keeps; CaptureAnalysisError without either."""
    return json.loads(figures_json(directory))


def figures_json(directory: Path) -> str:
    """capture_figures as the JSON text figures.json holds: compact, keys sorted, so that the same
    capture always gives the same bytes."""
    directory = Path(directory)
    capture = directory / "capture" / CAPTURE_FILE
    if capture.is_file():
        stat = capture.stat()
        return _figures_from_capture(str(directory), stat.st_mtime_ns, stat.st_size)
    if (directory / "capture" / FIGURES_FILE).is_file():
        return json.dumps(_stored(directory), sort_keys=True, separators=(",", ":"))
    capture_info(directory)  # says why: not captured, or no manifest
    raise CaptureAnalysisError(f"{directory}: no capture and no {FIGURES_FILE} beside where it would be")


@lru_cache(maxsize=64)
def _figures_from_capture(directory: str, _mtime_ns: int, _size: int) -> str:
    # Parsing a capture of 1 MB messages takes tshark a while: once per capture (path, time and
    # size) and process, for the tables, the shark fins and the evidence alike.
    path = Path(directory)
    trips: Optional[list[list[Any]]]
    try:
        trips = [[t.publisher, t.sequence, round(t.send_s, 6), round(t.rtt_ms, 3)] for t in _round_trips_from_capture(path)]
        error = None
    except _NoRoundTrips as reason:
        trips, error = None, str(reason)
    data = {"format": FIGURES_FORMAT, "info": capture_info(path), "figures": _measure_capture(path),
            "round_trips": trips, "round_trips_error": error}
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _stored(directory: Path) -> dict[str, Any]:
    path = Path(directory) / "capture" / FIGURES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CaptureAnalysisError(f"{path}: cannot be read ({error})") from None
    if not isinstance(data, dict) or data.get("format") != FIGURES_FORMAT:
        raise CaptureAnalysisError(f"{path}: not {FIGURES_FORMAT} (written by another mqttlab?)")
    return data
