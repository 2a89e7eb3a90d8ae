"""The `network:` section of a scenario: units, per-direction overrides, and errors naming the field.
Also the choice of method and the overhead arithmetic; none of this needs root."""

from __future__ import annotations

import pytest

from mqttlab.netem.capability import Capabilities
from mqttlab.netem.commands import NetemError
from mqttlab.engine import packet_sizes
from mqttlab.netem.overhead import exchange_table
from mqttlab.netem.shaping import choose_method, tbf_args
from mqttlab.planning import load_scenario, plan_of, validate_scenario
from mqttlab.scenario import ScenarioError, scenario_to_yaml


def network(**spec):
    return validate_scenario({"network": spec}).network


def problems(spec) -> str:
    with pytest.raises(ScenarioError) as error:
        validate_scenario({"network": spec})
    return error.value.listing()


def test_top_level_values_apply_to_each_direction_and_overrides_win():
    n = network(delay="75ms", jitter="5ms", loss="2%", rate="100kbit", down={"rate": "10KB/s", "loss": 0})
    up, down = n.direction("up"), n.direction("down")
    assert (up.delay, up.jitter, up.loss, up.rate) == (0.075, 0.005, 0.02, 100_000)
    assert (down.delay, down.loss, down.rate) == (0.075, 0.0, 80_000)  # 10 KB/s = 80 kbit/s


def test_default_queue_is_200ms_of_the_rate_with_a_floor():
    assert network(rate="1mbit").direction("up").queue_bytes() == 25_000
    assert network(rate="8kbit").direction("up").queue_bytes() == 3000
    assert network(rate="1mbit", queue="64KB").direction("up").queue_bytes() == 64_000


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"rate": "100kbps"}, "network.rate: 'kbps' is ambiguous"),
        ({"rate": 100}, "network.rate: must be a rate such as 100kbit"),
        ({"loss": "120%"}, "network.loss: must be from 0% to 100%"),
        ({"delay": "fast"}, "network.delay: must be a duration"),
        ({"delay": "1ms", "jitter": "5ms"}, "jitter (5ms) must not exceed delay (1ms)"),
        ({"queue": "10KB"}, "queue only applies together with a rate"),
        ({"method": "tbf", "loss": "1%"}, "method tbf can only limit the rate"),
        ({"dleay": "1ms"}, "network.dleay: unknown key (did you mean 'delay'?)"),
        ({"up": {"dealy": "1ms"}}, "network.up.dealy: unknown key"),
    ],
)
def test_bad_values_are_reported_with_their_field(spec, expected):
    assert expected in problems(spec)


def test_the_section_round_trips_through_yaml(tmp_path):
    scenario = validate_scenario({"network": {"delay": "75ms", "loss": "2%", "rate": "1mbit", "up": {"rate": "10KB/s"}}})
    path = tmp_path / "s.yaml"
    path.write_text(scenario_to_yaml(scenario))
    again = load_scenario(path)
    assert again.network == scenario.network


CAPS = dict(net_admin=True, ip=True, tc=True, tun=True, tbf=True, nft=False, tshark=False)


def test_method_is_netem_when_the_kernel_has_it_and_the_emulator_otherwise():
    with_netem, without = Capabilities(netem=True, **CAPS), Capabilities(netem=False, **CAPS)
    assert choose_method(network(delay="10ms"), with_netem) == "netem"
    assert choose_method(network(delay="10ms"), without) == "emulator"
    assert choose_method(network(rate="1mbit"), without) == "tbf"
    # netem reorders under jitter; keeping order takes the emulator.
    assert choose_method(network(delay="10ms", jitter="2ms"), with_netem) == "emulator"
    assert choose_method(network(delay="10ms", jitter="2ms", reorder=True), with_netem) == "netem"
    with pytest.raises(NetemError, match="no netem"):
        choose_method(network(delay="10ms", method="netem"), without)


def test_tbf_burst_holds_at_least_two_frames():
    args = tbf_args(network(rate="8kbit").direction("up"))
    assert args[:3] == ["tbf", "rate", "8000bit"] and int(args[args.index("burst") + 1]) >= 3028


def _sizes(topic: str, payload: int, qos: int) -> dict[str, int]:
    scenario = validate_scenario({"publishers": {"count": 1, "topic": topic, "qos": qos, "payload": payload, "measure": "topic-sequence"}})
    return packet_sizes(plan_of(scenario))


def test_mqtt_sizes_per_qos_exchange_match_the_seed_tables():
    # Seed 002: ack packets are 4 bytes, QoS 2 costs 3 of them per leg. Its "46 bytes" for a
    # 42-byte topic leave out the 2-byte topic length: header 1 + length 1 + 2 + 42 + id 2 + 1.
    topic = "t" * 42
    assert _sizes(topic, 1, 1)["publish"] == 49 and _sizes(topic, 1, 0)["publish"] == 47
    assert _sizes("t" * 10, 200, 0)["publish"] == 1 + 2 + 2 + 10 + 200  # remaining length 212 needs 2 bytes
    qos2 = exchange_table(_sizes("bench/0", 64, 2), 2)
    assert [r["packet"] for r in qos2].count("PUBREL") == 2
    assert sum(r["bytes"] for r in qos2 if r["packet"] != "PUBLISH") == 2 * 12


def test_a_seed_profile_fills_in_what_the_section_leaves_out():
    wan = network(profile="wan-148ms")
    # Seed 004: 147.68 ms mean round trip; the clients' access link 100 Mb/s up, 200 Mb/s down.
    assert wan.direction("up").delay + wan.direction("down").delay == pytest.approx(0.14768)
    assert (wan.direction("up").rate, wan.direction("down").rate) == (100e6, 200e6)
    lossy = network(profile="wan-148ms", loss="1%", down={"rate": "50mbit"})
    assert lossy.direction("up").loss == 0.01 and lossy.direction("down").rate == 50e6
    assert lossy.direction("up").rate == 100e6  # kept from the profile: up/down merge key by key
    assert network(profile="ethernet-100").direction("up").rate == 94.5e6  # seed 001's iperf figure
    assert "profile" in problems({"profile": "lte"})
