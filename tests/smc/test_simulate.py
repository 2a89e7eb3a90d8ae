"""The simulator and predict on cases with a known answer."""

import heapq

import numpy as np
import pytest

from mqttlab.smc.log import MESSAGE_TYPES
from mqttlab.smc.models import GammaModel, NormalModel
from mqttlab.smc.predict import PredictionSettings, predict
from mqttlab.smc.profiles import UP1, UsageProfile
from mqttlab.smc.simulate import simulate
from mqttlab.smc.stats import clopper_pearson


def _load_linear(base_us, per_active_us):
    """Latency = base + slope * ActiveMsgs exactly, whatever the message type."""
    return NormalModel(coef=[base_us, 0, 0, 0, 0, per_active_us, 0, 0], stderr=[0.0] * 8, sigma=0.0)


def _fixed_wait(wait_ms):
    return UsageProfile("fixed", wait_ms, wait_ms, dict(UP1.weights))


def _reference_active(clients, length, wait_us, base_us, per_active_us):
    """A plain event-queue simulation of the same system, one event at a time (ties: lower client first)."""
    queue = [(wait_us, c) for c in range(clients)]
    busy_until = [0.0] * clients
    sent = [0] * clients
    active = np.zeros((clients, length), dtype=int)
    while queue:
        now, c = heapq.heappop(queue)
        seen = 1 + sum(1 for other in range(clients) if busy_until[other] > now)
        active[c, sent[c]] = seen
        busy_until[c] = now + base_us + per_active_us * seen
        sent[c] += 1
        if sent[c] < length:
            heapq.heappush(queue, (busy_until[c] + wait_us, c))
    return active


def test_load_seen_by_each_message_matches_a_one_event_at_a_time_simulation():
    sim = simulate(_load_linear(300.0, 400.0), _fixed_wait(1.0), 6, 8, 3, np.random.default_rng(0))
    expected = _reference_active(6, 8, 1000.0, 300.0, 400.0)
    for replication in range(3):
        np.testing.assert_array_equal(sim.active[replication], expected)
    np.testing.assert_allclose(sim.latency_us, 300.0 + 400.0 * sim.active)
    assert sim.active.max() > 1  # the case really couples clients


def test_simultaneous_senders_see_each_other_in_index_order():
    # No wait and a constant latency: all clients send together every time, so client j always
    # finds the j clients before it busy.
    sim = simulate(_load_linear(500.0, 0.0), _fixed_wait(0.0), 5, 4, 2, np.random.default_rng(1))
    for client in range(5):
        assert (sim.active[:, client, :] == client + 1).all()


def test_message_sequences_obey_the_client_model_guards():
    profile = UsageProfile("small", 0, 10, {"connect": 1, "disconnect": 1, "publish": 1, "subscribe": 3, "unsubscribe": 1}, topics=3)
    sim = simulate(_load_linear(100.0, 10.0), profile, 7, 30, 50, np.random.default_rng(2))
    names = np.asarray(MESSAGE_TYPES)[sim.msg]
    for sequence in names.reshape(-1, 30):
        connected, held = False, 0
        for msg in sequence:
            assert (msg == "connect") == (not connected), sequence
            if msg == "connect":
                connected = True
            elif msg == "disconnect":
                connected, held = False, 0
            elif msg == "subscribe":
                assert held < 3
                held += 1
            elif msg == "unsubscribe":
                assert held > 0
                held -= 1


def test_constant_latency_is_under_a_threshold_above_it_and_never_below():
    model = _load_linear(20_000.0, 0.0)
    result = predict(model, UP1, [5], [19.0, 21.0], PredictionSettings(samples=200))
    assert result.table["p"].tolist() == [0.0, 1.0]


@pytest.mark.parametrize("threshold_ms", [2.0, 4.0, 8.0])
def test_exponential_latency_of_one_client_matches_the_closed_form(threshold_ms):
    # Gamma with shape 1 is exponential; mean 2 ms (rate 0.5 per ms). One client sees no load, so
    # P(all 10 < t) = (1 - exp(-t/2))^10: t=2 -> 0.0101, t=4 -> 0.2325, t=8 -> 0.8314.
    model = GammaModel(coef=[np.log(2000.0), 0, 0, 0, 0, 0, 0, 0], stderr=[0.0] * 8, shape=1.0)
    exact = (1.0 - np.exp(-threshold_ms / 2.0)) ** 10
    result = predict(model, UP1, [1], [threshold_ms], PredictionSettings(seed=4))
    row = result.table.iloc[0]
    assert row["samples"] == 1060
    assert row["cp_low"] <= exact <= row["cp_high"]
    # The single client is also the whole system.
    assert row["p_all_clients"] == row["p"]


def test_dkw_band_holds_the_whole_exact_curve():
    model = GammaModel(coef=[np.log(2000.0), 0, 0, 0, 0, 0, 0, 0], stderr=[0.0] * 8, shape=1.0)
    curves = predict(model, UP1, [1], [5.0], PredictionSettings(seed=8)).curves
    exact = (1.0 - np.exp(-curves["threshold_ms"] / 2.0)) ** 10
    assert ((curves["dkw_low"] <= exact + 1e-12) & (exact <= curves["dkw_high"] + 1e-12)).all()


def test_more_clients_mean_more_load_and_a_lower_probability():
    # 20 ms at no load, +10 % per open exchange: sixty clients keep several exchanges open.
    model = GammaModel(coef=[np.log(20_000.0), 0, 0, 0, 0, 0.1, 0, 0], stderr=[0.0] * 8, shape=4.0)
    table = predict(model, UP1, [2, 60], [50.0], PredictionSettings(samples=300)).table
    assert table["mean_active"].iloc[1] > table["mean_active"].iloc[0]
    low_load, high_load = table["p"]
    _, high_load_upper = clopper_pearson(int(high_load * 300), 300, 0.99)
    low_load_lower, _ = clopper_pearson(int(low_load * 300), 300, 0.99)
    assert high_load_upper < low_load_lower


def test_paper_delay_reproduces_its_worked_example():
    # Listing 1.1 (ms): subscribe with 15 active messages and no subscribers:
    # mu = -8.010 + 8.771 + 15 * 1.359 = 21.146, sigma = sqrt(0.111^2 + 0.142^2 + (15 * 0.003)^2) = 0.18577
    ols = NormalModel(
        coef=[-8.010, 8.085, 9.067, 8.771, 9.295, 1.359, 0.0025, 0.294],
        stderr=[0.111, 0.123, 0.140, 0.142, 0.129, 0.003, 0.0002, 0.031],
        sigma=5.0,
    )
    paper = ols.paper_delay()
    subscribe = np.array([MESSAGE_TYPES.index("subscribe")])
    args = (subscribe, np.array([15.0]), np.array([0.0]), np.array([0.0]))
    assert paper.latency_us(np.array([0.0]), *args)[0] == pytest.approx(21.146, abs=1e-9)
    sigma = paper.latency_us(np.array([1.0]), *args)[0] - 21.146
    assert sigma == pytest.approx(np.sqrt(0.111**2 + 0.142**2 + (15 * 0.003) ** 2), rel=1e-9)
    # The fitted model's own predictive draw uses the residual spread instead.
    assert ols.latency_us(np.array([1.0]), *args)[0] == pytest.approx(26.146)


def test_first_message_after_connect_follows_the_profile_weights():
    # Just connected and holding nothing, so unsubscribe is disabled: UP1's weights give
    # disconnect 1/9, publish 5/9, subscribe 3/9.
    sim = simulate(_load_linear(100.0, 0.0), UP1, 20, 2, 500, np.random.default_rng(6))
    assert (sim.msg[:, :, 0] == MESSAGE_TYPES.index("connect")).all()
    second = sim.msg[:, :, 1].ravel()
    shares = np.bincount(second, minlength=5) / second.size  # 10 000 draws: SE <= 0.005
    np.testing.assert_allclose(shares, [0, 1 / 9, 5 / 9, 3 / 9, 0], atol=0.02)


def test_a_profile_that_can_leave_a_connected_client_stuck_is_refused():
    with pytest.raises(ValueError, match="a connected client needs a message it can always send"):
        UsageProfile("stuck", 0, 10, {"connect": 1, "subscribe": 1})


def test_topic_pick_is_uniform_over_the_allowed_topics():
    from mqttlab.smc.simulate import nth_set_bit_table

    table = nth_set_bit_table(5)
    mask = 0b11010  # topics 1, 3 and 4 allowed
    assert table[mask, :3].tolist() == [1, 3, 4]
    # Three evenly spread draws per allowed topic pick each once: floor(u * popcount).
    picks = [table[mask, int(u * 3)] for u in (0.1, 0.5, 0.9)]
    assert picks == [1, 3, 4]
    assert table.shape == (32, 5)


def test_subscription_counts_seen_by_messages_follow_the_subscribe_history():
    # Latency = 1000 + 10 TotalSubs + 100 Subs (µs), no noise: replaying the messages in time
    # order with a plain dictionary of subscriptions must give back every latency.
    model = NormalModel(coef=[1000.0, 0, 0, 0, 0, 0, 10.0, 100.0], stderr=[0.0] * 8, sigma=0.0)
    profile = UsageProfile("subs", 1, 20, {"connect": 1, "disconnect": 1, "publish": 3, "subscribe": 3, "unsubscribe": 1}, topics=4)
    sim = simulate(model, profile, 8, 25, 4, np.random.default_rng(12))
    names = np.asarray(MESSAGE_TYPES)
    for rep in range(4):
        order = np.argsort(sim.sent_us[rep], axis=None, kind="stable")
        held = {c: set() for c in range(8)}
        for flat in order:
            client, k = divmod(int(flat), 25)
            msg, topic = names[sim.msg[rep, client, k]], int(sim.topic[rep, client, k])
            total = sum(len(t) for t in held.values())
            subs = sum(topic in t for t in held.values()) if msg == "publish" else 0
            assert sim.latency_us[rep, client, k] == pytest.approx(1000 + 10 * total + 100 * subs)
            if msg == "subscribe":
                held[client].add(topic)
            elif msg == "unsubscribe":
                held[client].remove(topic)
            elif msg == "disconnect":
                held[client].clear()
