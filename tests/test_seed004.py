"""Seed 004 in miniature: MQTT and MQTT-SN side by side over an emulated link, through
`mqttlab suite run` (fresh mosquitto per run, the MQTT-SN gateway beside it in the broker's
namespace) down to the report's latency-and-loss-against-rate table. Needs root / CAP_NET_ADMIN
for the emulated network, else it skips and says why."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mqttlab.brokers.sources import SourceUnavailable
from mqttlab.netem import capability

ROOT = Path(__file__).resolve().parent.parent
DELAY_MS = 20  # each way: a round trip of 40 ms

MINI_SUITE = """
name: seed004-mini
brokers: [mosquitto]
repetitions: 1
base:
  publishers: {{count: 1, qos: 0, payload: 20, topic: "seed004/t", rate: 20}}
  subscribers: {{count: 1, qos: 0, filters: ["seed004/t"]}}
  load: {{duration: 2s, warmup: 0s, grace: 3s}}
  network: {{delay: {delay_ms}ms}}
scenarios:
  s01-1p1s: {{}}
variants:
  protocol:
    mqtt:    {{transport.kind: mqtt}}
    mqtt-sn: {{transport.kind: mqtt-sn, transport.gateway: {gateway}}}
"""


# mqttlab's gateway in front of Mosquitto, and RSMB serving the MQTT-SN clients itself (the seed's
# setup, what `suite run seed004` uses): both beside the broker in its namespace.
@pytest.mark.parametrize("gateway", ["mqttlab", "rsmb"])
def test_mqtt_and_mqtt_sn_over_a_20ms_link_are_both_slower_than_the_link_and_fully_accounted(tmp_path, gateway):
    missing = capability.detect().missing()
    if missing:
        pytest.skip(missing)
    from mqttlab.brokers import get_launcher

    if not get_launcher("mosquitto").find():
        pytest.skip("mosquitto is not installed")
    suite = tmp_path / "seed004-mini.yaml"
    if gateway == "rsmb":
        try:
            get_launcher("rsmb").install()
        except SourceUnavailable as error:
            pytest.skip(f"rsmb cannot be built here: {error}")
    suite.write_text(MINI_SUITE.format(delay_ms=DELAY_MS, gateway=gateway))
    out = tmp_path / "suite"
    done = subprocess.run([sys.executable, "-m", "mqttlab", "suite", "run", str(suite), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr + done.stdout
    with (out / "report" / "rate_sweep.csv").open() as handle:
        rows = {row["protocol"]: row for row in csv.DictReader(handle)}
    sn = "mqtt-sn" if gateway == "mqttlab" else f"mqtt-sn ({gateway})"  # the protocol's line names a gateway not ours
    assert set(rows) == {"mqtt", sn}
    for protocol, row in rows.items():
        # Publisher → broker → subscriber crosses the link twice: more than half the RTT per
        # crossing, so at least the whole RTT end to end.
        assert float(row["latency_p50_ms"]) >= 2 * DELAY_MS, (protocol, row)
        assert int(row["sent"]) >= 30 and int(row["delivered"]) == int(row["expected"]) == int(row["sent"]), (protocol, row)
        assert int(row["lost"]) == 0 and float(row["loss_percent"]) == 0.0
    # 1 s Tretry against a 40 ms round trip: nothing needed sending twice (a fresh socket's first
    # datagram once went missing and cost every handshake a Tretry; the counter shows it).
    assert int(rows[sn]["retransmitted"]) == 0
    sn_run = next((out / "runs").glob("*-mqtt-sn/mosquitto/rep-1"))
    summary = json.loads((sn_run / "summary.json").read_text())
    manifest = json.loads((sn_run / "manifest.json").read_text())
    assert summary["latency"]["connack"]["max_us"] < 1_000_000
    assert manifest["gateway"]["name"] == ("rsmb" if gateway == "rsmb" else "mqttlab-gateway")
    if gateway == "rsmb":  # RSMB is built from its pinned tree: the manifest names its commit
        assert manifest["gateway"]["build"]["commits"] == {".": "36fd4ba9433d"}
    # The gateway ran inside the broker's namespace: it reached the broker on the namespace's address.
    assert manifest["gateway"]["host"].startswith("10.213.") and manifest["gateway"]["broker"].startswith(f"mqtt://{manifest['gateway']['host']}:")
    assert manifest["broker"]["url"].startswith(f"mqtt://{manifest['network']['broker_address']}:")
    assert "Latency and loss against rate" in (out / "report" / "report.html").read_text()
