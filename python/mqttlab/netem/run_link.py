"""The emulated link in a run (`mqttlab run`, `mqttlab.run()`): the broker's address behind it, the link
measured before the load (ICMP echo), its counters read after and the overhead computed; all of it
lands in summary.json and the manifest."""

from __future__ import annotations

from typing import Any, Mapping

from mqttlab.netem.network import EmulatedNetwork
from mqttlab.netem.overhead import counter_difference, overhead
from mqttlab.netem.probe import ping
from mqttlab.scenario.fields import BrokerAddress

PROBE_COUNT = 20
PROBE_INTERVAL = 0.02


def broker_url(url: str, network: EmulatedNetwork) -> str:
    """`url` with its host replaced by the broker's address behind the emulated conditions."""
    return BrokerAddress.parse(url)._replace(host=network.broker_address).url


def measure_before(network: EmulatedNetwork) -> dict[str, Any]:
    info = network.describe()
    info["probe_before"] = ping(network.broker_address, count=PROBE_COUNT, interval=PROBE_INTERVAL).summary()
    info["counters_before"] = network.counters()
    return info


def measure_after(network: EmulatedNetwork, info: dict[str, Any], plan: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    after = network.counters()
    link = counter_difference(info["counters_before"], after)
    # The probe's echoes went through the link before `counters_before`: they are not in `link`.
    return {**info, "counters_after": after, "counters_run": link, "overhead": overhead(plan, result, link)}
