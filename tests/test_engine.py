"""The engine against real brokers on loopback: delivery accounting, QoS flows, shard merging,
faults. Plans are written out in full here so each test shows exactly what it runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mqttlab import _engine
from mqttlab.brokers import get_launcher
from mqttlab.brokers.base import free_ports
from mqttlab.tls import make_tls_material


def plan(port: int, *, pubs=3, subs=3, topic="t/%i", filters=("t/%i",), qos=1, sub_qos=None, rate=200.0,
         messages=None, duration_ms=1000, warmup_ms=0, grace_ms=2000, version=4, host="127.0.0.1",
         tls=None, username=None, password=None, size=64, connect_timeout_ms=3000, shard=None, keepalive_s=30,
         **options):
    return {
        "broker": {"host": host, "port": port, "tls": tls},
        "mqtt": {"version": version, "username": username, "password": password, "keepalive_s": keepalive_s,
                 "clean_start": True, "session_expiry_s": 0, "connect_timeout_ms": connect_timeout_ms},
        "publishers": {"count": pubs, "client_id": "eng-pub-%i", "topic": topic, "qos": qos, "retain": False,
                       "rate": rate, "arrival": "constant", "messages": messages,
                       "payload": {"dist": "fixed", "size": size}, "inflight": 100},
        "subscribers": {"count": subs, "client_id": "eng-sub-%i", "filters": list(filters),
                        "qos": qos if sub_qos is None else sub_qos},
        "load": {"duration_ms": duration_ms, "warmup_ms": warmup_ms, "grace_ms": grace_ms,
                 "connect_rate": 0.0, "seed": 7},
        "shard": shard or {"publishers": [0, pubs], "subscribers": [0, subs]},
        "options": {"record_latency": True, "reconnect": False, "progress_interval_ms": 200, **options},
    }


def run(p: dict, progress=None) -> tuple[dict, dict]:
    raw = _engine.run_shard(json.dumps(p), progress)
    summary = json.loads(_engine.summarize(json.dumps(p), raw))
    return json.loads(raw), summary


def hist_count(encoded: str) -> int:
    stats = json.loads(_engine.histogram_stats(encoded))
    return 0 if stats is None else stats["count"]


@pytest.fixture(scope="module")
def mosquitto(tmp_path_factory):
    with get_launcher("mosquitto").start(tmp_path_factory.mktemp("mosquitto"), tls=True) as broker:
        yield broker


@pytest.fixture(scope="module")
def rumqttd(tmp_path_factory):
    with get_launcher("rumqttd").start(tmp_path_factory.mktemp("rumqttd")) as broker:
        yield broker


@pytest.mark.parametrize("broker_name", ["mosquitto", "rumqttd"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_point_to_point_delivers_every_message_once(request, broker_name, qos):
    broker = request.getfixturevalue(broker_name)
    raw, s = run(plan(broker.port, qos=qos, messages=100, duration_ms=0))
    m = s["messages"]
    assert s["status"] == "completed"
    assert m["sent"] == 300
    assert m["expected"] == 300
    assert m["delivered"] == 300 and m["lost"] == 0
    assert m["duplicated"] == 0 and m["unexpected"] == 0
    assert s["violations"] == []
    assert s["latency"]["e2e"]["count"] == 300
    # Latency from the intended send time is never below the one from the actual send.
    assert s["latency"]["e2e"]["p50_us"] >= s["latency"]["e2e_uncorrected"]["p50_us"]
    ack = {0: None, 1: "puback", 2: "pubcomp"}[qos]
    if ack:
        assert m["acked"] == 300
        assert s["latency"][ack]["count"] == 300
    assert s["latency"]["connack"]["count"] == 6 and s["latency"]["suback"]["count"] == 3


def test_mqtt5_fan_out_and_fan_in_are_accounted_per_receiver(mosquitto):
    # 1 publisher -> 4 subscribers: each message is owed 4 times. Two engine threads, so one of
    # them holds subscribers only, and must measure as well as the one with the publisher.
    _, s = run(plan(mosquitto.port, pubs=1, subs=4, topic="fo/0", filters=("fo/0",), messages=50,
                    duration_ms=0, version=5, threads=2))
    assert (s["messages"]["expected"], s["messages"]["delivered"]) == (200, 200)
    assert s["latency"]["e2e"]["count"] == 200
    # 4 publishers -> 1 subscriber on a wildcard.
    _, s = run(plan(mosquitto.port, pubs=4, subs=1, topic="fi/%i", filters=("fi/+",), messages=50,
                    duration_ms=0, version=5))
    assert (s["messages"]["expected"], s["messages"]["delivered"]) == (200, 200)


def test_engine_threads_follow_the_planned_rate_unless_asked(mosquitto):
    # 3 -> 3 at 200 msg/s each is far below one thread's share: one thread serves it.
    raw, s = run(plan(mosquitto.port, qos=0, messages=20, duration_ms=0))
    assert raw["generator"]["threads"] == 1 and s["messages"]["delivered"] == 60
    raw, s = run(plan(mosquitto.port, qos=0, messages=20, duration_ms=0, threads=3))
    assert raw["generator"]["threads"] == 3 and s["messages"]["delivered"] == 60


def test_shared_subscription_is_owed_each_message_once_per_group(mosquitto):
    _, s = run(plan(mosquitto.port, pubs=2, subs=3, topic="sh/%i", filters=("$share/g/sh/+",), messages=60,
                    duration_ms=0, version=5))
    m = s["messages"]
    assert (m["expected"], m["delivered"], m["lost"], m["unexpected"]) == (120, 120, 0, 0)
    # Who got them: every member counted, the even split lies between the least and the most.
    split = s["shared_groups"][0]
    assert (split["members"], split["delivered"]) == (3, 120)
    assert split["least"] <= 40 <= split["most"] and abs(split["most_share"] - split["most"] / 120) < 1e-9


def test_warmup_is_excluded_from_latency_but_not_from_accounting(mosquitto):
    _, s = run(plan(mosquitto.port, pubs=1, subs=1, qos=0, rate=100.0, duration_ms=2000, warmup_ms=1000))
    m = s["messages"]
    assert m["delivered"] == m["sent"] == 200
    # Half the schedule falls in the warm-up (±1 for the random phase of the first send).
    assert 99 <= s["latency"]["e2e"]["count"] <= 101
    assert s["warmup_s"] == 1.0


def test_same_seed_gives_the_same_schedule(mosquitto):
    p = plan(mosquitto.port, pubs=2, subs=0, qos=0, rate=50.0, duration_ms=600)
    p["publishers"]["arrival"] = "poisson"
    counts = [json.loads(_engine.run_shard(json.dumps(p)))["sent_per_publisher"] for _ in range(2)]
    assert counts[0] == counts[1]


def test_shards_running_side_by_side_merge_to_the_single_run(mosquitto):
    base = dict(pubs=4, subs=4, topic="sm/%i", filters=("sm/+",), qos=1, messages=40, duration_ms=0, rate=100.0)
    _, single = run(plan(mosquitto.port, **base))
    start_at = time.time_ns() + 1_500_000_000
    shards = [
        plan(mosquitto.port, **base, shard={"publishers": [0, 2], "subscribers": [0, 2], "start_at_unix_ns": start_at}),
        plan(mosquitto.port, **base, shard={"publishers": [2, 4], "subscribers": [2, 4], "start_at_unix_ns": start_at}),
    ]
    results: list[str] = [""] * 2

    def go(i: int) -> None:
        results[i] = _engine.run_shard(json.dumps(shards[i]))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    merged = _engine.merge_results(results)
    whole = plan(mosquitto.port, **base)
    s = json.loads(_engine.summarize(json.dumps(whole), merged))
    for key in ("sent", "expected", "delivered", "lost", "duplicated"):
        assert s["messages"][key] == single["messages"][key], key
    assert s["messages"]["delivered"] == 4 * 40 * 4
    assert s["latency"]["e2e"]["count"] == single["latency"]["e2e"]["count"] == 640
    assert len(json.loads(merged)["shards"]) == 2


def test_unreachable_broker_fails_fast_with_one_line():
    (port,) = free_ports(1)
    t0 = time.monotonic()
    with pytest.raises(ConnectionError) as e:
        _engine.run_shard(json.dumps(plan(port)))
    assert time.monotonic() - t0 < 3
    assert str(e.value) == f"cannot connect to mqtt://127.0.0.1:{port}: connection refused"


def test_unknown_host_is_named():
    with pytest.raises(ConnectionError, match="unknown host"):
        _engine.run_shard(json.dumps(plan(1883, host="no-such-host.invalid")))


def test_invalid_plan_lists_every_problem():
    p = plan(1883, qos=3)
    p["publishers"]["inflight"] = 0
    with pytest.raises(ValueError) as e:
        _engine.run_shard(json.dumps(p))
    assert "publishers.qos" in str(e.value) and "publishers.inflight" in str(e.value)


def _start_mosquitto(tmp_path: Path, lines: list[str], port: int | None = None) -> tuple[subprocess.Popen, int]:
    """A Mosquitto with settings the launcher does not offer (passwords, a bad certificate)."""
    port = port or free_ports(1)[0]
    conf = tmp_path / f"m{port}.conf"
    conf.write_text("\n".join([f"listener {port} 127.0.0.1", "persistence false", "user root", *lines]) + "\n")
    proc = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mosquitto did not start")


def test_bad_credentials_report_the_connack_reason(tmp_path):
    passwords = tmp_path / "passwd"
    passwords.write_text("")
    subprocess.run(["mosquitto_passwd", "-b", str(passwords), "alice", "secret"], check=True)
    proc, port = _start_mosquitto(tmp_path, ["allow_anonymous false", f"password_file {passwords}"])
    try:
        with pytest.raises(ConnectionError) as e:
            _engine.run_shard(json.dumps(plan(port, username="alice", password="wrong")))
        assert "CONNACK reason 0x05 (not authorized)" in str(e.value)
        with pytest.raises(ConnectionError) as e:
            _engine.run_shard(json.dumps(plan(port, username="alice", password="wrong", version=5)))
        assert "CONNACK reason 0x87 (not authorized)" in str(e.value)
        _, s = run(plan(port, username="alice", password="secret", messages=5, duration_ms=0))
        assert s["messages"]["delivered"] == 15
    finally:
        proc.terminate()
        proc.wait(5)


def test_tls_failures_name_the_check_that_failed(tmp_path, mosquitto):
    tls_dir = tmp_path / "tls"
    m = make_tls_material(tls_dir)
    tls_port = mosquitto.tls_port
    ok = {"ca_file": str(mosquitto.ca_file), "cert_file": None, "key_file": None, "insecure": False, "server_name": None}
    _, s = run(plan(tls_port, tls=ok, messages=10, duration_ms=0))
    assert s["messages"]["delivered"] == 30 and s["latency"]["tls"]["count"] == 6

    system_roots = dict(ok, ca_file=None)  # the system's trust store knows nothing of our CA
    with pytest.raises(ConnectionError, match="signed by an unknown CA"):
        _engine.run_shard(json.dumps(plan(tls_port, tls=system_roots)))
    other_ca = dict(ok, ca_file=str(m.ca_file))  # a CA of the same name that did not sign it
    with pytest.raises(ConnectionError, match="not signed by the given CA"):
        _engine.run_shard(json.dumps(plan(tls_port, tls=other_ca)))
    wrong_name = dict(ok, server_name="somewhere-else.example")
    with pytest.raises(ConnectionError, match="not valid for this host name"):
        _engine.run_shard(json.dumps(plan(tls_port, tls=wrong_name)))
    insecure = dict(ok, ca_file=None, insecure=True, server_name="somewhere-else.example")
    _, s = run(plan(tls_port, tls=insecure, messages=5, duration_ms=0))
    assert s["messages"]["delivered"] == 15

    proc, eport = _start_mosquitto(tmp_path, ["allow_anonymous true", f"cafile {m.ca_file}",
                                               f"certfile {m.expired_cert_file}", f"keyfile {m.expired_key_file}"])
    try:
        expired = dict(ok, ca_file=str(m.ca_file))
        with pytest.raises(ConnectionError, match="has expired"):
            _engine.run_shard(json.dumps(plan(eport, tls=expired)))
    finally:
        proc.terminate()
        proc.wait(5)


def test_broker_killed_mid_run_keeps_partial_results_and_counts_losses(tmp_path):
    proc, port = _start_mosquitto(tmp_path, ["allow_anonymous true"])
    killer = threading.Timer(1.0, lambda: os.kill(proc.pid, signal.SIGKILL))
    killer.start()
    try:
        t0 = time.monotonic()
        raw, s = run(plan(port, qos=1, rate=200.0, duration_ms=5000, grace_ms=3000))
        assert time.monotonic() - t0 < 4.5, "the run ends when the broker is gone"
    finally:
        killer.cancel()
        proc.wait(5)
    assert s["status"] == "broker_lost"
    assert "lost" in s["error"] and "closed the connection" in s["error"]
    m = s["messages"]
    assert m["sent"] > 0 and m["delivered"] > 0
    # Whatever was sent but never arrived is counted as lost, and not as a QoS violation:
    # the connections broke.
    assert m["lost"] == m["expected"] - m["delivered"]
    assert not any(v["kind"].endswith("_loss") for v in s["violations"])
    assert hist_count(raw["histograms"]["e2e"]) == m["delivered"]


def test_quiet_clients_keep_their_connections_alive_with_pings(mosquitto):
    # Mosquitto closes a connection silent for 1.5 keep-alives. With a 1 s keep-alive, a publisher
    # sending every 4 s and a subscriber receiving nothing (t/1 has no publisher) survive only by
    # their PINGREQs. (The run ends once its two messages are delivered, at least 4 s in.)
    started = time.monotonic()
    raw, s = run(plan(mosquitto.port, pubs=1, subs=2, qos=1, rate=0.25, duration_ms=8000, keepalive_s=1))
    assert time.monotonic() - started >= 4
    assert s["status"] == "completed"
    assert s["errors"] == [], s["errors"]
    assert raw["counters"]["sent"] == 2
    assert s["messages"]["delivered"] == 2 and s["messages"]["lost"] == 0


def test_progress_reports_phases_and_totals(mosquitto):
    seen: list[dict] = []
    run(plan(mosquitto.port, pubs=2, subs=2, qos=0, rate=100.0, duration_ms=1200), lambda j: seen.append(json.loads(j)))
    phases = {p["phase"] for p in seen}
    assert "measuring" in phases and seen[-1]["phase"] == "done"
    assert seen[-1]["total"]["sent"] == sum(p["interval"]["sent"] for p in seen)
    assert seen[-1]["connected"] == {"publishers": 2, "subscribers": 2, "held_back": 0}


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_round_trip_mode_measures_rtt_on_the_publishers_clock(mosquitto, qos):
    p = plan(mosquitto.port, pubs=2, subs=2, topic="req/%i", filters=("req/%i",), qos=qos, messages=50, duration_ms=0)
    p["publishers"]["reply_filter"] = "rep/%i"
    p["subscribers"]["echo_topic"] = "rep/%i"
    _, s = run(p)
    assert s["round_trip"] == {"sent": 100, "replies": 100, "lost": 0, "duplicated": 0}
    assert s["messages"]["delivered"] == 100
    rtt, one_way = s["latency"]["rtt"], s["latency"]["e2e"]
    assert rtt["count"] == 100
    # The way there and back takes longer than the way there.
    assert rtt["p50_us"] > one_way["p50_us"]


def test_reply_filter_matching_the_own_topic_is_refused():
    p = plan(1883, topic="x/%i")
    p["publishers"]["reply_filter"] = "x/+"
    with pytest.raises(ValueError, match="publishers.reply_filter"):
        _engine.run_shard(json.dumps(p))


def test_with_reconnect_the_run_survives_a_broker_restart(tmp_path):
    proc, port = _start_mosquitto(tmp_path, ["allow_anonymous true"])
    restarted: list[subprocess.Popen] = []

    def restart() -> None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        time.sleep(0.5)
        restarted.append(_start_mosquitto(tmp_path, ["allow_anonymous true"], port=port)[0])

    timer = threading.Timer(1.0, restart)
    timer.start()
    try:
        _, s = run(plan(port, pubs=2, subs=2, qos=1, rate=100.0, duration_ms=4000, grace_ms=2000, reconnect=True))
    finally:
        timer.cancel()
        for p in restarted:
            p.terminate()
            p.wait(5)
    assert s["status"] == "completed"
    assert s["connections"]["lost"] == 4
    m = s["messages"]
    # Messages before the kill and after the reconnect arrive; those in between are lost or dropped.
    assert m["delivered"] > 300 and m["dropped"] + m["lost"] > 0
    assert m["delivered"] + m["lost"] == m["expected"]
    assert any(e["kind"] == "connection_lost" for e in s["errors"])


class MisbehavingBroker:
    """A TCP listener that answers MQTT clients with bytes chosen by the test: the only way to
    make a broker send malformed, oversized or unexpected packets on purpose."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(10)
        try:
            while True:
                conn, _ = self.sock.accept()
                conn.recv(4096)  # the CONNECT
                conn.sendall(self.reply)
                time.sleep(0.2)
                conn.close()
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()


CONNACK_OK = bytes([0x20, 0x02, 0x00, 0x00])


@pytest.mark.parametrize("reply, reason", [
    (bytes([0x20, 0x03, 0x00, 0x00, 0x00]), "malformed CONNACK"),              # one byte too many
    (bytes([0x90, 0x03, 0x00, 0x01, 0x00]), "broker sent SUBACK before CONNACK"),
    (bytes([0x20]), "closed the connection before CONNACK"),
    # A valid CONNACK, then a PUBLISH header announcing 200 MB: refused before any body is read.
    (CONNACK_OK + bytes([0x30, 0x80, 0x80, 0x80, 0x64]), "exceeds the maximum"),
    # A valid CONNACK, then a packet type that does not exist.
    (CONNACK_OK + bytes([0xF0, 0x00]), "malformed packet from broker"),
])
def test_a_misbehaving_broker_ends_the_connection_with_a_reason(reply, reason):
    broker = MisbehavingBroker(reply)
    try:
        rss_before = psutil_rss()
        with pytest.raises(ConnectionError, match=reason):
            _engine.run_shard(json.dumps(plan(broker.port, pubs=0, subs=1)))
        assert psutil_rss() - rss_before < 50 * 1024 * 1024, "an announced size must not be allocated"
    finally:
        broker.close()


# What the engine says of a failed connect, for programs: its kind and the fields that tell the
# cases apart, so that the front chooses a remedy without reading the message.
@pytest.mark.parametrize("reply, version, details", [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", 4, {"kind": "not_mqtt", "first_byte": ord("H")}),
    (bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]), 4, {"kind": "not_mqtt", "first_byte": 0x15}),  # a TLS alert
    # MQTT 3.1.1's "unacceptable protocol version" to an MQTT 5 CONNECT: a code MQTT 5 has not.
    (bytes([0x20, 0x02, 0x00, 0x01]), 5, {"kind": "protocol", "first_byte": 0x20, "connack_code": 0x01}),
    (bytes([0x20, 0x02, 0x00, 0x05]), 4, {"kind": "connack", "connack_code": 0x05}),
    (bytes([0x20]), 5, {"kind": "closed"}),
])
def test_a_failed_connect_comes_with_its_kind_and_fields_as_data(reply, version, details):
    broker = MisbehavingBroker(reply)
    try:
        with pytest.raises(ConnectionError) as failed:
            _engine.run_shard(json.dumps(plan(broker.port, pubs=0, subs=1, version=version)))
    finally:
        broker.close()
    assert json.loads(failed.value.details) == details


def test_refused_and_tls_failures_carry_their_kind(mosquitto):
    port = free_ports(1)[0]  # nobody listens there
    with pytest.raises(ConnectionError) as refused:
        _engine.run_shard(json.dumps(plan(port, pubs=0, subs=1)))
    assert json.loads(refused.value.details) == {"kind": "refused"}
    system_roots = {"ca_file": None, "cert_file": None, "key_file": None, "insecure": False, "server_name": None}
    with pytest.raises(ConnectionError) as untrusted:
        _engine.run_shard(json.dumps(plan(mosquitto.tls_port, pubs=0, subs=1, tls=system_roots)))
    assert json.loads(untrusted.value.details) == {"kind": "tls", "certificate": "unknown_issuer"}


def test_a_plan_the_engine_refuses_says_so_as_data():
    unbound = plan(1883)
    del unbound["broker"]["host"], unbound["broker"]["port"]
    with pytest.raises(ValueError, match="no broker address") as refused:
        _engine.run_shard(json.dumps(unbound))
    assert json.loads(refused.value.details) == {"kind": "plan"}


def psutil_rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_batched_submission_keeps_every_message_accounted(mosquitto, qos):
    # On a 1 ms grid, ten publishers fall due together: io_uring submissions carry several sends
    # at once, and every message is still owed and delivered once. How many ride together depends
    # on the host's scheduling (QoS 2's handshake replies arrive one by one: a busy CI host measured
    # 2.0 on average); that some do is the path's property. A window as long as the run: a busy
    # host's pause of the broker cannot leave a send without room (a window of 100 holds 0.2 s here).
    p = plan(mosquitto.port, pubs=10, subs=10, qos=qos, rate=500.0, messages=200, duration_ms=0,
             timer_resolution_us=1000, submission="batched")
    p["publishers"]["inflight"] = 200
    _, s = run(p)
    m, g = s["messages"], s["generator"]
    assert s["status"] == "completed"
    assert (m["sent"], m["expected"], m["delivered"], m["lost"], m["duplicated"], m["dropped"]) == (2000, 2000, 2000, 0, 0, 0)
    assert m["acked"] == (0 if qos == 0 else 2000)
    assert g["submission"] == "io_uring" and g["sends_per_submission"] > 1, g
    assert g["submission_wait_max_us"] is not None and s["latency"]["e2e"]["count"] == 2000
    # Direct, the default, says so; TLS writes its own records, batched or not.
    _, direct = run(plan(mosquitto.port, pubs=2, subs=2, qos=qos, messages=20, duration_ms=0))
    assert (direct["generator"]["submission"], direct["generator"]["sends_per_submission"]) == ("write", None)


def test_batched_submission_over_tls_writes_each_connection_itself(mosquitto):
    tls = {"ca_file": str(mosquitto.ca_file), "cert_file": None, "key_file": None, "insecure": False, "server_name": None}
    _, s = run(plan(mosquitto.tls_port, pubs=2, subs=2, messages=20, duration_ms=0, tls=tls, submission="batched"))
    assert s["messages"]["delivered"] == 40 and s["generator"]["submission"] == "write"


class SilentBroker:
    """Accepts, answers CONNECT with CONNACK, then never reads again: the client's socket
    buffer fills, as in front of a broker that has stopped."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            while True:
                conn, _ = self.sock.accept()
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                conn.recv(64)  # the CONNECT, and then nothing more is read
                conn.sendall(CONNACK_OK)
                self.held.append(conn)
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_batched_submission_in_front_of_a_full_socket_drops_what_finds_no_room():
    # The kernel takes only part of a submission once the socket buffer fills; the rest stays
    # with the connection, ahead of later sends, and sends falling due meanwhile are dropped as
    # on the direct path. The run still ends on time, every scheduled send counted once.
    broker = SilentBroker()
    try:
        _, s = run(plan(broker.port, pubs=2, subs=0, qos=0, rate=20000.0, size=1024, duration_ms=1500, grace_ms=500,
                        timer_resolution_us=1000, submission="batched"))
    finally:
        broker.close()
    m = s["messages"]
    assert s["generator"]["submission"] == "io_uring"
    assert m["dropped"] > 0 and m["sent"] > 0
    # Every send the schedule holds, sent or dropped (the grid's last tick may fall past the end).
    assert 0 <= 2 * 20000 * 1.5 - (m["sent"] + m["dropped"]) <= 2 * 20 * 2
