"""Discrete-event simulation of N concurrent client automata in virtual time.

Each client is the stochastic timed automaton of the paper's Fig. 4: wait a uniform time from
the usage profile, pick a message the client model allows (weights from the profile), send it,
and stay busy for a latency drawn from the latency model given the message type and the load at
that instant; then wait again. Clients are synchronous, so each has at most one open exchange,
and the load a message sees (ActiveMsgs, itself included) is the number of busy clients.

Replications are independent copies of the whole system. They are advanced together: every step
handles the next send of *every* replication, so the Python loop runs N·L times whatever the
number of replications, and each step is a handful of numpy operations over all of them. Sends
are processed in exact time order within a replication, which is what makes the load seen by
each message exact rather than approximated by rounds.

Subscriptions change when a (un)subscribe is sent, and a disconnect drops the client's
subscriptions (a clean session).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mqttlab.smc.log import MESSAGE_TYPES
from mqttlab.smc.models import LatencyModel
from mqttlab.smc.profiles import UsageProfile

CONNECT, DISCONNECT, PUBLISH, SUBSCRIBE, UNSUBSCRIBE = (MESSAGE_TYPES.index(m) for m in MESSAGE_TYPES)


@dataclass(frozen=True)
class Simulation:
    latency_us: np.ndarray  # (replications, clients, length)
    msg: np.ndarray  # message type codes, same shape
    active: np.ndarray  # ActiveMsgs seen by each message, same shape
    topic: np.ndarray  # topic index of (un)subscribe and publish, same shape (0 for others)
    sent_us: np.ndarray  # virtual send time, same shape

    @property
    def max_latency_us(self) -> np.ndarray:
        """Worst latency of each client's sequence: (replications, clients)."""
        return self.latency_us.max(axis=2)


def nth_set_bit_table(topics: int) -> np.ndarray:
    """``table[m, j]`` is the index of the j-th set bit of the topic mask m (0 where none).

    Choosing a topic uniformly among those a mask allows is then one lookup per replication:
    ``table[m, floor(u * popcount(m))]``.
    """
    masks = np.arange(1 << topics, dtype=np.int64)[:, None]
    bits = (masks >> np.arange(topics)) & 1
    rank = np.cumsum(bits, axis=1) - 1
    rows, cols = np.nonzero(bits)
    table = np.zeros((1 << topics, topics), dtype=np.int64)
    table[rows, rank[rows, cols]] = cols
    return table


def simulate(
    model: LatencyModel,
    profile: UsageProfile,
    clients: int,
    length: int,
    replications: int,
    rng: np.random.Generator,
) -> Simulation:
    """Run ``replications`` independent systems of ``clients`` clients sending ``length`` messages each."""
    if clients < 1 or length < 1 or replications < 1:
        raise ValueError("clients, length and replications must all be at least 1")
    R, N, L, T = replications, clients, length, profile.topics
    steps = N * L
    # Randomness is drawn per step (one row of R values each), not per (client, message): every
    # send consumes fresh i.i.d. draws either way, and row slices are far cheaper than gathers.
    first_wait = rng.uniform(profile.min_wait_ms * 1e3, profile.max_wait_ms * 1e3, (R, N))
    next_wait = rng.uniform(profile.min_wait_ms * 1e3, profile.max_wait_ms * 1e3, (steps, R))
    choice_u = rng.random((steps, R))
    topic_u = rng.random((steps, R))
    noise = model.noise(rng, (steps, R))

    _, w_disconnect, w_publish, w_subscribe, w_unsubscribe = profile.weight_vector()
    disconnect_end, publish_end = w_disconnect, w_disconnect + w_publish
    reps = np.arange(R)
    topic_index = np.arange(T, dtype=np.int64)
    all_topics = (1 << T) - 1
    nth_set_bit = nth_set_bit_table(T)
    next_send = first_wait  # (R, N): argmin along rows is fast in this layout
    busy_until = np.zeros((N, R))  # (N, R): counting along columns is fast in this layout
    sent = np.zeros((R, N), dtype=np.int64)
    connected = np.zeros((R, N), dtype=bool)
    sub_bits = np.zeros((R, N), dtype=np.int64)  # bit t set: the client holds a subscription to topic t
    topic_subs = np.zeros((R, T), dtype=np.int64)
    total_subs = np.zeros(R, dtype=np.int64)

    step_who = np.empty((steps, R), dtype=np.int64)
    step_k = np.empty((steps, R), dtype=np.int64)
    step_latency = np.empty((steps, R))
    step_msg = np.empty((steps, R), dtype=np.int8)
    step_active = np.empty((steps, R), dtype=np.int32)
    step_topic = np.empty((steps, R), dtype=np.int8)
    step_now = np.empty((steps, R))

    for step in range(steps):
        who = np.argmin(next_send, axis=1)
        now = next_send[reps, who]
        k = sent[reps, who]
        # Busy clients are those whose last exchange is still open; the sender itself is idle.
        active = 1 + np.add.reduce(busy_until > now, axis=0, dtype=np.int32)

        bits = sub_bits[reps, who]
        held = np.bitwise_count(bits)
        is_connected = connected[reps, who]
        # Weighted choice among the enabled messages, in code order: the draw r falls into the
        # disconnect, publish, subscribe or unsubscribe slice of the enabled weights.
        subscribe_end = publish_end + w_subscribe * (held < T)
        r = choice_u[step] * (subscribe_end + w_unsubscribe * (held > 0))
        msg = np.where(
            is_connected, DISCONNECT + (r >= disconnect_end) + (r >= publish_end) + (r >= subscribe_end), CONNECT
        )

        is_sub, is_unsub, is_pub = msg == SUBSCRIBE, msg == UNSUBSCRIBE, msg == PUBLISH
        # Subscribe picks among topics not held, unsubscribe among held ones, publish among all.
        candidates = np.where(is_unsub, bits, np.where(is_pub, all_topics, all_topics & ~bits))
        pick = (topic_u[step] * np.bitwise_count(candidates)).astype(np.int64)
        topic = nth_set_bit[candidates, np.minimum(pick, T - 1)]
        subs = np.where(is_pub, topic_subs[reps, topic], 0)

        latency = model.latency_us(noise[step], msg, active, total_subs.astype(float), subs)

        # State changes take effect at the send, as the broker sees them first.
        connected[reps, who] = (is_connected | (msg == CONNECT)) & (msg != DISCONNECT)
        change = is_sub.astype(np.int64) - is_unsub
        topic_subs[reps, topic] += change
        total_subs += change
        leaving = msg == DISCONNECT
        if leaving.any():
            topic_subs[leaving] -= (bits[leaving, None] >> topic_index) & 1
        total_subs -= np.where(leaving, held, 0)
        flipped = bits ^ ((is_sub | is_unsub).astype(np.int64) << topic)
        sub_bits[reps, who] = np.where(leaving, 0, flipped)

        done = now + latency
        busy_until[who, reps] = done
        sent[reps, who] = k + 1
        next_send[reps, who] = np.where(k + 1 < L, done + next_wait[step], np.inf)
        step_who[step], step_k[step], step_latency[step] = who, k, latency
        step_msg[step], step_active[step], step_topic[step], step_now[step] = msg, active, topic, now

    where = (reps[None, :], step_who, step_k)

    def by_client(values: np.ndarray) -> np.ndarray:
        out = np.empty((R, N, L), dtype=values.dtype)
        out[where] = values
        return out

    return Simulation(
        latency_us=by_client(step_latency),
        msg=by_client(step_msg),
        active=by_client(step_active),
        topic=by_client(np.where(step_msg > DISCONNECT, step_topic, 0).astype(np.int8)),
        sent_us=by_client(step_now),
    )
