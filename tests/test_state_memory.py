"""The broker's memory per message of state it holds (mqttlab.state_memory, docs/state.md): on a real
Mosquitto, the RSS rise while offline sessions hold their queues, and while retained values wait
for a read, per message held, with the rule and what the sampling bounds in the summary."""

from __future__ import annotations

import mqttlab
from mqttlab import state_memory
from mqttlab.summary_view import print_summary
from rich.console import Console

QUEUED = {
    "broker": "mosquitto", "mqtt.clean_start": False, "publishers.count": 5, "subscribers.count": 5,
    "publishers.topic": "mem/%i", "subscribers.filters": ["mem/%i"], "publishers.qos": 1, "publishers.rate": 300,
    "publishers.payload": 1024, "publishers.inflight": 1000, "subscribers.offline": {"at": "1s", "duration": "2s"},
    "load.duration": "4s", "load.warmup": "0s", "load.grace": "2s",
}  # fmt: skip


def _shown(result) -> str:
    console = Console(width=400, record=True)
    print_summary(console, result.summary)
    return console.export_text()


def test_memory_per_queued_message_is_the_rss_rise_over_the_messages_the_sessions_held(tmp_path):
    result = mqttlab.run(None, set=QUEUED, out=tmp_path / "run")
    assert result.status == "completed", result.summary.get("error")
    offline, entry = result.summary["offline"], result.summary["state_memory"]["queued"]
    # About 3,000 messages of 1 KiB held while the five sessions were away, all delivered on return.
    assert entry["held"] == offline["delivered"] + offline["earlier"] > 2500
    assert entry["rss_peak_bytes"] - entry["rss_before_bytes"] == entry["rise_bytes"] > 0
    assert entry["bytes_per_message"] == entry["rise_bytes"] / entry["held"]
    # At least the payload, at most a few times it: the payload and the broker's bookkeeping.
    assert 1024 < entry["bytes_per_message"] < 4 * 1024
    # Read before the first DISCONNECT, peaked while away; sampled every 0.1 s, so the last
    # reading before the return left at most that much of the 2 s away unseen.
    assert entry["before_at_s"] <= entry["from_s"] < entry["peak_at_s"] <= entry["until_s"]
    assert entry["sampled_every_s"] == state_memory.STATE_SAMPLE_INTERVAL_S and entry["unsampled_share"] <= 0.1
    shown = _shown(result)
    assert f"memory: {entry['bytes_per_message']:,.0f} B per queued message" in shown and state_memory.QUEUED_RULE in shown


def test_memory_per_retained_message_is_the_rss_rise_over_the_topics_set_before_the_read(tmp_path):
    scenario = {"broker": "mosquitto", "publishers.count": 500, "publishers.topic": "memr/%i", "publishers.retain": True,
                "publishers.messages": 1, "publishers.rate": 2, "publishers.qos": 1, "publishers.payload": 4096,
                "subscribers.count": 2, "subscribers.filters": ["memr/#"], "subscribers.retained": {"at": "1.5s"},
                "load.duration": "3s", "load.warmup": "0s", "load.grace": "2s", "load.connect_rate": 2000}
    result = mqttlab.run(None, set=scenario, out=tmp_path / "run")
    assert result.status == "completed", result.summary.get("error")
    assert result.summary["retained"]["delivered"] == 1000
    entry = result.summary["state_memory"]["retained"]
    assert entry["held"] == 500 and entry["payload_bytes"] == 4096
    assert 4096 < entry["bytes_per_message"] < 4 * 4096
    assert "B per retained message" in _shown(result)


def test_a_broker_that_held_nothing_gets_no_figure_but_says_why():
    from mqttlab.environment.resources import ResourceSample

    plan = {"publishers": {"count": 1, "payload": {"dist": "fixed", "size": 64}}, "subscribers": {}}
    result = {"start_mono_ns": 10**9, "offline": [{"left_s": 1.0, "offline_s": 2.0, "returned": True, "session_present": True,
                                                    "owed": 200, "delivered": 0, "earlier": 0}]}
    samples = [ResourceSample(int((1 + t / 10) * 1e9), 0.0, 8_000_000, 1) for t in range(0, 40)]
    (entry,) = state_memory.state_memory(plan, result, samples, 0.1).values()
    assert entry["held"] == 0 and entry["bytes_per_message"] is None and "held none" in entry["note"]
