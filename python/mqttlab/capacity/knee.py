"""What limited the broker at its knee, read from the probes on either side of it: the last rate
sustained and the first that broke the objectives.

- CPU: the broker's mean CPU share at the failing rate reached 90 % of the cores it may use (its
  `launch.limits.cpus` quota, else its cpuset, else the host's cores), or its cgroup throttled it
  in most periods;
- queueing: every owed message was delivered (delivered = offered) but latency climbed: the
  broker keeps up on average yet messages wait in its queues;
- loss: owed deliveries never arrived;
- dropped sends: the QoS window stayed full, because acknowledgements came too slowly.

Several can hold together (a saturated CPU is usually why messages queue); each is named with
its figures."""

from __future__ import annotations

import os
from statistics import mean
from typing import Any, Optional, Sequence

SATURATED = 0.9  # of the cores the broker may use
THROTTLED = 0.5  # of the cgroup's periods
DELIVERED_ALL = 0.999  # of the owed deliveries
CLIMB = 2.0  # p99 at the failing rate over p99 at the sustained one


def broker_cores(manifest: dict[str, Any]) -> float:
    """How many cores the broker could use: its CPU quota, its cpuset, or the host's."""
    limits = (manifest.get("broker") or {}).get("limits") or {}
    if limits.get("cpus"):
        return float(limits["cpus"])
    if limits.get("cpuset"):
        return float(_cpuset_size(str(limits["cpuset"])))
    return float((manifest.get("host") or {}).get("cores") or os.cpu_count() or 1)


def _cpuset_size(cpuset: str) -> int:
    count = 0
    for part in cpuset.split(","):
        first, _, last = part.partition("-")
        count += (int(last) - int(first) + 1) if last else 1
    return count


def broker_cpu(summary: dict[str, Any]) -> Optional[float]:
    broker = (summary.get("resources") or {}).get("broker")
    return float(broker["mean_cpu_share"]) if broker else None


def limits_at_knee(sustained: Sequence[Any], broken: Sequence[Any]) -> list[dict[str, Any]]:
    """The limits named from the probes at the last sustained rate and at the first broken one
    (Probe objects: summary, manifest). Empty when there is no broken probe to read."""
    if not broken:
        return []
    found: list[dict[str, Any]] = []
    refused = [p for p in broken if p.summary.get("refused")]
    if refused:
        found.append({"limit": "refused", "detail": f"the broker refused or reset the load's connections: {refused[0].summary.get('error')}"})
        broken = [p for p in broken if not p.summary.get("refused")]
        if not broken:
            return found
    cores = broker_cores(broken[0].manifest)
    cpu = [share for share in (broker_cpu(p.summary) for p in broken) if share is not None]
    throttled = [_throttled_share(p.manifest) for p in broken]
    throttled_known = [share for share in throttled if share is not None]
    if cpu and (mean(cpu) >= SATURATED * cores or (throttled_known and mean(throttled_known) >= THROTTLED)):
        detail = f"the broker used {mean(cpu):.2f} of the {cores:g} cores it may use"
        if throttled_known:
            detail += f"; its cgroup throttled it in {mean(throttled_known):.0%} of periods"
        found.append({"limit": "cpu", "detail": detail, "cpu_cores": mean(cpu), "cores": cores})
    messages = [p.summary.get("messages") or {} for p in broken]
    expected = sum(m.get("expected", 0) for m in messages)
    delivered = sum(m.get("delivered", 0) for m in messages)
    lost = sum(m.get("lost", 0) for m in messages)
    dropped = sum(m.get("dropped", 0) for m in messages)
    scheduled = sum(m.get("sent", 0) + m.get("dropped", 0) for m in messages)
    p99_broken = _mean_p99(broken)
    p99_sustained = _mean_p99(sustained)
    if expected and delivered >= DELIVERED_ALL * expected and p99_broken is not None and p99_sustained and p99_broken >= CLIMB * p99_sustained:
        found.append({"limit": "queueing", "detail": f"every owed message was delivered but e2e p99 climbed {p99_broken / p99_sustained:.1f}x "
                      f"({p99_sustained / 1000:.3g} → {p99_broken / 1000:.3g} ms)", "p99_us": [p99_sustained, p99_broken]})
    if lost:
        found.append({"limit": "loss", "detail": f"{lost} of {expected} owed deliveries lost ({lost / expected:.2%})" if expected else f"{lost} lost",
                      "lost": lost, "expected": expected})
    if dropped:
        found.append({"limit": "dropped_sends", "detail": f"{dropped} of {scheduled} scheduled sends dropped: the QoS window stayed full, acknowledgements came too slowly",
                      "dropped": dropped, "scheduled": scheduled})
    return found


def _mean_p99(probes: Sequence[Any]) -> Optional[float]:
    found = [((p.summary.get("latency") or {}).get("e2e") or {}).get("p99_us") for p in probes]
    values = [float(v) for v in found if v is not None]
    return mean(values) if values else None


def _throttled_share(manifest: dict[str, Any]) -> Optional[float]:
    limits = (manifest.get("broker") or {}).get("limits") or {}
    periods, throttled = limits.get("periods"), limits.get("throttled_periods")
    return throttled / periods if periods and throttled is not None else None
