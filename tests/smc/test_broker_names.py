"""Whether `--broker` names a launcher or a URL is decided by one rule (scenario.fields.is_url)
for runs and for the SMC pipeline alike; the SMC clients then take plain MQTT URLs only."""

from __future__ import annotations

import pytest

from mqttlab.brokers import BrokerError, get_launcher
from mqttlab.smc.broker import split_brokers


def test_names_and_plain_urls_are_accepted_and_other_schemes_refused_naming_the_broker() -> None:
    assert split_brokers("mosquitto, mqtt://127.0.0.1:1883,tcp://h:1") == ["mosquitto", "mqtt://127.0.0.1:1883", "tcp://h:1"]
    for url in ("mqtts://h:8883", "ssl://h:8883", "ws://h:80/mqtt", "wss://h/mqtt"):
        with pytest.raises(ValueError, match=f"'{url}': the SMC clients speak plain MQTT only"):
            split_brokers(f"mosquitto,{url}")


def test_a_url_of_an_unknown_scheme_is_an_external_broker_refused_for_its_scheme() -> None:
    launcher = get_launcher("http://broker.lab:80")
    with pytest.raises(BrokerError, match="scheme must be mqtt://, mqtts://, ws:// or wss://, got 'http'"):
        launcher.describe()  # type: ignore[attr-defined]
