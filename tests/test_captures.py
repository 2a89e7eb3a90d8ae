"""Protocol figures measured from the capture of real runs (analysis/captures.py): a round trip
through real mosquitto on loopback at QoS 0, 1 and 2, captured by real tshark, and the bytes the
capture saw checked against MQTT 3.1.1 and the Linux TCP/IP headers on `lo` (Ethernet 14, IPv4
20, TCP 20 + 12 of timestamp option). Capturing needs tshark and root; without them the test
skips and says why."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_unless_capture_on_lo
from mqttlab.analysis.captures import (
    CONNECT, DISCONNECT, FIGURES_FILE, CaptureAnalysisError, Frame, Packet, RoundTrip, capture_figures, capture_info, connection_table, fin_fall,
    figures_json, measure, round_trips,
)

ROOT = Path(__file__).resolve().parent.parent
HEADERS = 14 + 20 + 32  # a frame on lo: Ethernet, IPv4, TCP with timestamps
PUBLISHER, SUBSCRIBER = "mqttlabpub0", "mqttlabsub0-x"  # 11 and 13 bytes: CONNECT sizes differ
TOPIC = "captures/0/msg"
PAYLOAD = 32

SCENARIO = f"""
name: captures
broker: mosquitto
publishers: {{count: 1, client_id: "mqttlabpub%i", topic: "captures/%i/msg", reply_filter: "captures/%i/rtt", rate: 8, payload: {PAYLOAD}B}}
subscribers: {{count: 1, client_id: "mqttlabsub%i-x", filters: ["captures/%i/msg"], echo_topic: "captures/%i/rtt"}}
load: {{duration: 1s, warmup: 0s}}
options: {{capture: true}}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    skip_unless_capture_on_lo()
    base = tmp_path_factory.mktemp("captures")
    scenario = base / "captures.yaml"
    scenario.write_text(SCENARIO)
    out = {}
    for qos in (0, 1, 2):
        directory = base / f"qos{qos}"
        done = subprocess.run(
            [sys.executable, "-m", "mqttlab", "run", str(scenario), "--set", f"publishers.qos={qos}",
             "--set", f"subscribers.qos={qos}", "--out", str(directory)],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
        out[qos] = directory
    return out


def _summary(directory: Path) -> dict:
    return json.loads((directory / "summary.json").read_text())


def _legs(directory: Path) -> tuple[int, int]:
    """PUBLISH packets the clients sent (the publisher's messages and the subscriber's echoes) and
    received (deliveries and echoes back), as the engine counted them."""
    summary = _summary(directory)
    sent, delivered, replies = summary["messages"]["sent"], summary["messages"]["delivered"], summary["round_trip"]["replies"]
    return sent + delivered, delivered + replies


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_every_packet_has_the_size_the_protocol_gives_it(runs, qos):
    figures = measure(runs[qos])
    # A loaded host can make the kernel retransmit a segment even on lo (CI once: a FIN sent again
    # 4 ms later); the figures leave retransmissions out, which the exact counts below check.
    assert figures["link_header_bytes"] == 14 and figures["capture_dropped"] == 0
    rows = {(r["direction"], r["packet"]): r for r in figures["packets"]}
    up, down = _legs(runs[qos])
    # CONNECT: fixed header 2 + protocol name 6 + level 1 + flags 1 + keep-alive 2 + client id 2 + id.
    connects = rows[("up", "CONNECT")]
    assert (connects["mqtt_bytes_min"], connects["mqtt_bytes_max"]) == (12 + 2 + len(PUBLISHER), 12 + 2 + len(SUBSCRIBER))
    for direction, packet, size in [("down", "CONNACK", 4), ("up", "DISCONNECT", 2)]:
        row = rows[(direction, packet)]
        assert (row["packets"], row["mqtt_bytes_max"], row["frame_bytes_alone"]) == (2, size, size + HEADERS)
    # PUBLISH: fixed header 2 + topic length 2 + topic + packet id from QoS 1 + payload; every leg:
    # publisher → broker and back (the echo), broker → subscriber and back.
    publish = 2 + 2 + len(TOPIC) + (2 if qos else 0) + PAYLOAD
    for direction, count in (("up", up), ("down", down)):
        row = rows[(direction, f"PUBLISH QoS {qos}")]
        assert (row["packets"], row["mqtt_bytes_min"], row["mqtt_bytes_max"]) == (count, publish, publish)
    acknowledgements = {0: [], 1: ["PUBACK"], 2: ["PUBREC", "PUBREL", "PUBCOMP"]}[qos]
    for direction in ("up", "down"):
        for packet in acknowledgements:
            row = rows[(direction, packet)]
            # each PUBLISH's acknowledgements: PUBACK, PUBREC and PUBCOMP against its direction, PUBREL with it
            count = (down if direction == "up" else up) if packet != "PUBREL" else (up if direction == "up" else down)
            assert (row["packets"], row["mqtt_bytes_min"], row["mqtt_bytes_max"]) == (count, 4, 4)
            assert row["frames_alone"] == 0 or row["frame_bytes_alone"] == 4 + HEADERS
    assert not any(packet in ("PUBACK", "PUBREC", "PUBREL", "PUBCOMP") for _, packet in rows if packet not in acknowledgements)


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_a_publish_exchange_costs_its_acknowledgements(runs, qos):
    (exchange,) = measure(runs[qos])["exchanges"]
    assert exchange["qos"] == qos and exchange["publishes"] == sum(_legs(runs[qos])) and exchange["connections"] == 2
    assert exchange["ack_packets_per_publish"] == {0: 0, 1: 1, 2: 3}[qos]
    assert exchange["ack_mqtt_bytes_per_publish"] == {0: 0, 1: 4, 2: 12}[qos]
    # Every frame without a PUBLISH byte carries acknowledgements (66 B of headers + 4 B each, when
    # not piggy-backed on a PUBLISH) or nothing (a bare TCP ACK, 66 B).
    alone = exchange["ack_packets_per_publish"] - exchange["piggybacked_acks_per_publish"]
    assert exchange["ack_frame_bytes_per_publish"] == pytest.approx(exchange["ack_frames_per_publish"] * HEADERS + 4 * alone, abs=0.1)
    assert exchange["bare_ack_bytes_per_publish"] == pytest.approx(exchange["bare_acks_per_publish"] * HEADERS, abs=0.1)
    assert exchange["overhead_frame_bytes_per_publish"] == pytest.approx(
        exchange["ack_frame_bytes_per_publish"] + exchange["bare_ack_bytes_per_publish"], abs=0.1)
    if qos == 0:
        assert exchange["ack_frames_per_publish"] == 0 and exchange["bare_acks_per_publish"] > 0


def test_connection_set_up_and_tear_down_frames(runs):
    connections = measure(runs[1])["connections"]
    assert len(connections) == 2
    for row in connections:
        assert row["handshake_frames"] == 3  # SYN, SYN-ACK, ACK
        assert row["connack_frame_bytes"] == 4 + HEADERS and row["disconnect_frame_bytes"] == 2 + HEADERS
        assert row["connect_frame_bytes"] == row["connect_mqtt_bytes"] + HEADERS
        assert all(size == HEADERS for size in row["connect_tcp_acks"] + row["disconnect_tcp_acks"])
        # The broker acknowledges the DISCONNECT with a segment of headers alone: a bare ACK, or its
        # FIN when the client's FIN came first.
        assert row["disconnect_ack"]["frame_bytes"] == HEADERS and isinstance(row["disconnect_ack"]["bare"], bool)


@pytest.mark.parametrize("qos", [0, 2])
def test_each_message_round_trip_from_the_capture_is_within_the_engine_s(runs, qos):
    trips = round_trips(runs[qos])
    summary = _summary(runs[qos])
    assert len(trips) == summary["round_trip"]["replies"] > 0
    assert {t.sequence for t in trips} <= set(range(summary["messages"]["sent"]))
    engine = _summary(runs[qos])["latency"]["rtt"]
    # The capture sees the echo arrive a moment before the engine reads it: never later, so its
    # round trips are positive and their mean is at most the engine's (plus the clock pairing's
    # microseconds); a wrong clock offset or a wrong match would move them by far more.
    assert min(t.rtt_ms for t in trips) > 0
    mean = sum(t.rtt_ms for t in trips) / len(trips)
    assert 0.5 * engine["mean_us"] / 1000 <= mean <= engine["mean_us"] / 1000 + 0.05
    assert max(t.rtt_ms for t in trips) <= engine["max_us"] / 1000 + 0.05
    sends = [t.send_s for t in trips]
    assert sends == sorted(sends) and 0 <= sends[0] < 0.2 and sends[-1] < 1.0  # 8 msg/s from the start of the load


def test_the_shark_fin_draws_each_captured_run_s_round_trips(runs, tmp_path):
    from mqttlab.analysis import compare_directories
    from mqttlab.reports.shark_fin import write_shark_fins

    (path,) = write_shark_fins(compare_directories([runs[0]]), tmp_path)
    header = path.read_bytes()[:24]
    assert path.name == "shark-fin-captures.png" and header[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(header[16:20], "big") == 1125  # 7.5 in at 150 dpi: page width


def test_a_run_kept_as_its_figures_gives_what_its_capture_gave(runs, tmp_path):
    # What a page's evidence keeps of a captured run: its figures.json, without the capture.
    kept = tmp_path / "kept"
    shutil.copytree(runs[2], kept, ignore=shutil.ignore_patterns("*.pcapng"))
    (kept / "capture" / FIGURES_FILE).write_text(figures_json(runs[2]), encoding="utf-8")
    assert capture_figures(kept) == capture_figures(runs[2]) and measure(kept) == measure(runs[2])
    assert round_trips(kept) == round_trips(runs[2]) and capture_info(kept) == capture_info(runs[2])
    assert figures_json(kept) == figures_json(runs[2])


def _trips(*rtts: float, warmup: int = 0) -> list[RoundTrip]:
    return [RoundTrip(0, index, index - warmup, rtt) for index, rtt in enumerate(rtts)]


def test_the_broker_s_answer_to_a_re_sent_fin_is_not_taken_for_its_answer_to_the_disconnect():
    # As a loaded host once captured it (a fresh-clone CI run): the client's DISCONNECT and FIN, the
    # FIN re-sent 12 ms later, the broker's ACK of the duplicate (a D-SACK, 12 option bytes more),
    # then its FIN.
    def frame(up: bool, ack: int, next_seq: int, packet: int = 0, size: int = 0, fin: bool = False, resent: bool = False,
              dsack: bool = False) -> Frame:  # fmt: skip
        return Frame(time=0.0, stream=0, up=up, frame_bytes=HEADERS + size + 12 * dsack, ip_bytes=0, tcp_len=size, control=fin,
                     retransmission=resent, packets=[Packet(packet, 0, size)] if packet else [], ack=ack, next_seq=next_seq, fin=fin,
                     reports_duplicate=dsack)  # fmt: skip
    connect, disconnect = frame(True, 1, 26, CONNECT, 25), frame(True, 5, 28, DISCONNECT, 2)
    fin, again = frame(True, 5, 28, fin=True), frame(True, 5, 28, fin=True, resent=True)
    dsack, broker_fin = frame(False, 29, 5, dsack=True), frame(False, 29, 5, fin=True)
    [row] = connection_table([connect, disconnect, fin, again, dsack, broker_fin])
    assert row["disconnect_ack"] == {"frame_bytes": HEADERS, "bare": False}


def test_the_fin_s_fall_is_the_lowest_round_trip_after_the_highest_over_the_highest():
    assert fin_fall(_trips(100, 2000, 4000, 8000, 200, 300)) == 0.025  # the paper's fin: it collapses
    assert fin_fall(_trips(100, 2000, 4000, 8000)) == 1.0  # a queue that only grows: the peak is the last echo
    assert fin_fall(_trips(22000, 32000, 24000, 22000, 30000, 29000)) == 0.6875  # a swing, no collapse
    assert fin_fall(_trips(9000, 100, 200, 300, warmup=1)) == 1.0  # the warm-up's messages are left out
    assert fin_fall(_trips(5)) is None


def test_a_run_without_a_capture_is_refused_with_what_to_do(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "mqttlab-results/1"}))
    with pytest.raises(CaptureAnalysisError, match="--capture"):
        measure(tmp_path)
