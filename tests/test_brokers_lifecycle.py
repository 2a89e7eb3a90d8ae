"""Brokers never outlive mqttlab (killed, terminated, interrupted or crashing), start-up
failures carry the broker's log, and external brokers join by URL without being managed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from mqttlab.brokers import BrokerError, BrokerStartError, UnknownBroker, get_launcher, launcher_names
from mqttlab.brokers.base import wait_until_logged, wait_until_serving
from mqttlab.brokers.external import ExternalLauncher
from mqttlab.brokers.probe import round_trip
from mqttlab.environment.resources import ResourceSampler, summarize

PYTHONPATH = str(Path(__file__).resolve().parents[1] / "python")

# A separate mqttlab process that starts Mosquitto, reports the broker's PID and then either
# waits to be killed or dies the way the parameter says.
HOLDER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from mqttlab.brokers import get_launcher
    broker = get_launcher("mosquitto").start(Path(sys.argv[1]))
    print(json.dumps({"pid": broker.pid}), flush=True)
    sys.stdin.readline()  # the test checks the broker first, then says go (or signals us)
    if sys.argv[2] == "raise":
        raise RuntimeError("mqttlab crashed")
    time.sleep(60)
""")


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def mosquitto_available() -> None:
    if not get_launcher("mosquitto").availability().available:
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh installs it)")


@pytest.mark.parametrize("ending", ["SIGKILL", "SIGTERM", "SIGINT", "raise"])
def test_broker_dies_with_the_mqttlab_process(tmp_path: Path, ending: str, mosquitto_available: None) -> None:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), ending], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    broker_pid = None
    try:
        line = holder.stdout.readline()  # type: ignore[union-attr]
        assert line, holder.stderr.read()  # type: ignore[union-attr]
        broker_pid = json.loads(line)["pid"]
        assert psutil.pid_exists(broker_pid)
        if ending == "raise":
            holder.stdin.write("go\n")  # type: ignore[union-attr]
            holder.stdin.flush()  # type: ignore[union-attr]
        else:
            holder.send_signal(getattr(signal, ending))
        holder.wait(timeout=15)
        assert _wait_gone(broker_pid), f"broker {broker_pid} outlived mqttlab ({ending})"
    finally:
        holder.kill()
        holder.wait(timeout=10)
        if broker_pid is not None and psutil.pid_exists(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)


def test_start_failure_reports_the_exit_code_and_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "fake.log"
    log.write_text("line one\nError: something specific went wrong\n")
    dying = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    dying.wait(timeout=10)
    with pytest.raises(BrokerStartError) as caught:
        wait_until_serving("127.0.0.1", 9, child=dying, timeout=5, log_file=log, name="fake")
    assert "code 7" in str(caught.value)
    assert "something specific went wrong" in str(caught.value)


def test_a_start_not_complete_until_its_line_is_logged_and_a_boot_failure_names_the_taken_port(tmp_path: Path) -> None:
    # RabbitMQ answers on its first port before binding the others; a port taken meanwhile by another
    # process accepts the connection check, so the start waits for the log's "complete" line.
    log = tmp_path / "broker.log"
    script = ("import sys, time\n"
              "log = open(sys.argv[1], 'a')\n"
              "log.write('Starting broker...'); log.flush(); time.sleep(0.5)\n"
              "if sys.argv[2] == 'ok':\n"
              "    log.write(' completed with 1 plugins.\\n'); log.flush(); time.sleep(30)\n"
              "log.write('listen_error eaddrinuse (address already in use)\\nBOOT FAILED\\n'); raise SystemExit(1)\n")
    log.write_text("")  # as Launcher.start makes it, before the broker writes
    booting = subprocess.Popen([sys.executable, "-c", script, str(log), "ok"])
    try:
        started = time.monotonic()
        wait_until_logged("completed with", child=booting, timeout=10, log_file=log, name="fake")
        assert time.monotonic() - started >= 0.4 and "completed with" in log.read_text()
    finally:
        booting.kill()
        booting.wait(timeout=10)
    log.write_text("")
    failing = subprocess.Popen([sys.executable, "-c", script, str(log), "fail"])
    with pytest.raises(BrokerStartError, match="exited with code 1") as caught:
        wait_until_logged("completed with", child=failing, timeout=10, log_file=log, name="fake")
    assert "eaddrinuse" in str(caught.value)  # what Launcher.start retries on, with other ports
    failing.wait(timeout=10)


def test_readiness_times_out_with_the_last_problem(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.monotonic()
        with pytest.raises(BrokerStartError, match="did not accept MQTT .* within 1 s"):
            # Port 9 (discard) is not listening on loopback here: every attempt is refused.
            wait_until_serving("127.0.0.1", 9, child=sleeper, timeout=1.0, name="silent")
        assert time.monotonic() - started < 5
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def test_unknown_broker_names_the_known_ones() -> None:
    with pytest.raises(UnknownBroker) as caught:
        get_launcher("hivemq-typo")
    for name in ("mosquitto", "rumqttd", "rmqtt", "aedes", "amqtt", "moquette"):
        assert name in str(caught.value)
        assert name in launcher_names()
    assert launcher_names()[0] == "rumqttd"


def test_every_launcher_says_whether_it_is_available_and_how_to_get_it() -> None:
    for name in launcher_names():
        found = get_launcher(name).availability()
        assert isinstance(found.available, bool)
        assert found.detail
        if found.available and name != "external":
            assert found.version and found.version.startswith(name)


def test_external_broker_joins_by_url_is_sampled_and_left_running(tmp_path: Path, mosquitto_available: None) -> None:
    with get_launcher("mosquitto").start(tmp_path / "real") as real:
        url = f"mqtt://127.0.0.1:{real.port}?name=lab-broker&pid={real.pid}&version=2"
        launcher = get_launcher(url)
        assert isinstance(launcher, ExternalLauncher)
        joined = launcher.start(tmp_path / "ext")
        assert (joined.name, joined.version, joined.pid) == ("lab-broker", "lab-broker 2", real.pid)
        assert not joined.managed
        assert joined.url() == real.url()
        with ResourceSampler(joined.pid, interval=0.2) as sampler:
            for _ in range(5):
                assert round_trip(joined.host, joined.port).payload
        assert summarize(sampler.samples).peak_rss_bytes > 0
        joined.stop()
        assert psutil.pid_exists(real.pid), "an external broker is never stopped by us"
        assert round_trip(real.host, real.port).payload


def test_external_tls_broker_is_checked_over_verified_tls(tmp_path: Path, mosquitto_available: None) -> None:
    with get_launcher("mosquitto").start(tmp_path / "real", tls=True) as real:
        trusted = get_launcher(f"mqtts://127.0.0.1:{real.tls_port}?ca={real.ca_file}").start(tmp_path / "ext")
        assert trusted.url() == real.url(tls=True)
        # Without our CA the system trust store applies, which never signed the throwaway cert.
        with pytest.raises(BrokerStartError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            untrusting = get_launcher(f"mqtts://127.0.0.1:{real.tls_port}")
            untrusting.start_timeout = 1.0
            untrusting.start(tmp_path / "ext2")


@pytest.mark.parametrize("url, field", [
    ("mqtt://127.0.0.1:1883?pid=abc", "pid"),
    ("mqtt://127.0.0.1:1883?tls_port=99999", "tls_port"),
    ("mqtt://127.0.0.1:1883?colour=red", "colour"),
    ("mqtt://127.0.0.1:notaport", "port"),
])
def test_bad_external_url_names_the_field(url: str, field: str) -> None:
    with pytest.raises(BrokerError, match=field):
        get_launcher(url).describe()


def test_external_launcher_without_url_explains_the_url_form() -> None:
    launcher = get_launcher("external")
    assert not launcher.availability().available
    assert "mqtt://HOST:PORT" in launcher.availability().detail
    with pytest.raises(BrokerError, match="mqtt://HOST:PORT"):
        launcher.start(Path("."))


def test_mqtts_url_describes_a_tls_port() -> None:
    broker = get_launcher("mqtts://127.0.0.1:8883?ca=/tmp/ca.pem").describe()
    assert broker.tls_port == 8883
    assert broker.ca_file == Path("/tmp/ca.pem")
    assert broker.url() == broker.url(tls=True) == "mqtts://127.0.0.1:8883"
