"""What the host allows a run: open files for its connections, raised as far as the process may and
refused with one line otherwise; source ports, spread over loopback addresses when one address
has too few. Each run is a real `mqttlab run` against a launched Mosquitto."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MQTTLAB = [sys.executable, "-m", "mqttlab"]


def run(args: list[str], prefix: list[str] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, *MQTTLAB, "run", *args], capture_output=True, text=True, timeout=120)


def test_a_soft_open_file_limit_below_the_connections_is_raised(tmp_path: Path):
    # 600 connections under a soft limit of 512: mqttlab raises it (the hard limit allows) and so
    # does the broker it launches afterwards, which inherits it.
    done = run(["-P", "300", "-S", "300", "-t", "fd/%i", "-f", "fd/%i", "-r", "1", "-d", "3s", "--warmup", "0s",
                "--broker", "mosquitto", "-o", str(tmp_path / "run")], prefix=["prlimit", "--nofile=512:4096"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["connections"]["publishers"] == {"ok": 300, "failed": 0}
    assert summary["connections"]["subscribers"] == {"ok": 300, "failed": 0}
    assert summary["messages"]["lost"] == 0 and summary["messages"]["delivered"] == summary["messages"]["sent"] > 0


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_more_connections_than_the_hard_limit_allows_stop_the_run_before_anything_starts(tmp_path: Path):
    # Without CAP_SYS_RESOURCE (dropped here, as many containers run) a hard limit cannot be raised.
    done = run(["-P", "3000", "-S", "10", "-t", "fd/%i", "-f", "fd/+", "-r", "0.01", "-d", "2s", "--warmup", "0s",
                "--broker", "mosquitto", "-o", str(tmp_path / "run")],
               prefix=["prlimit", "--nofile=1024:1024", "setpriv", "--bounding-set=-sys_resource", "--"])  # fmt: skip
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "opens 3010 connections" in lines[0] and "hard limit 1024" in lines[0]
    assert "CAP_SYS_RESOURCE" in lines[0] and "ulimit -Hn 3266" in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace with its own port range)")
def test_more_connections_than_one_address_has_ports_come_from_several_loopback_addresses(tmp_path: Path):
    # A namespace whose ephemeral range has 100 ports per address: 150 connections to the
    # broker (launched in the same namespace) need two source addresses.
    namespace = f"mqttlab-{os.getpid()}-ports"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        subprocess.run(["ip", "-n", namespace, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=50000 50099"], check=True)
        done = run(["-P", "150", "-S", "0", "-t", "ports/%i", "-r", "1", "-d", "2s", "--warmup", "0s",
                    "--broker", "mosquitto", "-o", str(tmp_path / "run")], prefix=["ip", "netns", "exec", namespace])  # fmt: skip
    finally:
        subprocess.run(["ip", "netns", "del", namespace], check=False)
    assert done.returncode == 0, done.stderr
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert plan["shard"]["source_addresses"] == ["127.0.0.1", "127.0.0.2"]
    assert summary["connections"]["publishers"] == {"ok": 150, "failed": 0}
    assert summary["messages"]["sent"] > 0 and summary["errors"] in ([], {}, None)
