"""What limited the broker at its knee, read from the probes on either side of it: the last rate
sustained and the first that broke the objectives.

- CPU: the broker's mean CPU share at the failing rate reached 90 % of the cores it may use (its
  `launch.limits.cpus` quota, else its cpuset, else the host's cores), or its quota held it off
  for 5 % of its running time (a mean share below the quota does not clear a broker: it runs out
  of quota in bursts, and every message arriving then waits out the rest of the period);
- queueing: every owed message was delivered (delivered = offered) but latency climbed: the
  broker keeps up on average yet messages wait in its queues;
- loss: owed deliveries never arrived;
- back-pressure: the broker left the load's bytes unread (a full socket) for 1 % or more of the
  publishers' connection time: it read slower than the load came (the engine's
  generator.back_pressure_share; the broker's knee, never the generator's);
- dropped sends: the QoS window stayed full, because acknowledgements came too slowly;
- memory: the broker reached its memory limit (`launch.limits.memory`): its cgroup counted the
  limit hit or an OOM kill, or the broker was lost with it (the state searches' usual knee:
  offline messages or retained messages past what the limit holds).

Several can hold together (a saturated CPU is usually why messages queue); each is named with
its figures."""

from __future__ import annotations

import os
from statistics import mean
from typing import Any, Optional, Sequence

from mqttlab.brokers.limits import CFS_PERIOD_US

SATURATED = 0.9  # of the cores the broker may use
# Of the cgroup's running time (its periods × the CFS period): five times the 1 % of messages a
# p99 objective can leave late, so throttling alone breaks it; sustained probes stay near 0.
THROTTLED = 0.05
DELIVERED_ALL = 0.999  # of the owed deliveries
CLIMB = 2.0  # p99 at the failing rate over p99 at the sustained one
BACK_PRESSURE = 0.01  # of the publishers' connection time with their bytes unread


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
    memory = _memory_limit(broken)
    if memory is not None:
        found.append(memory)
    cores = broker_cores(broken[0].manifest)
    cpu = [share for share in (broker_cpu(p.summary) for p in broken) if share is not None]
    throttled = [_throttled_share(p.manifest) for p in broken]
    throttled_known = [share for share in throttled if share is not None]
    if cpu and (mean(cpu) >= SATURATED * cores or (throttled_known and mean(throttled_known) >= THROTTLED)):
        detail = f"the broker used {mean(cpu):.2f} of the {cores:g} cores it may use"
        if throttled_known:
            detail += f"; its CPU quota held it off for {mean(throttled_known):.0%} of its running time"
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
    pressure = [float((p.summary.get("generator") or {}).get("back_pressure_share") or 0.0) for p in broken]
    if pressure and mean(pressure) >= BACK_PRESSURE:
        found.append({"limit": "back_pressure", "detail": f"the broker left the load's bytes unread {mean(pressure):.0%} of the publishers' "
                      "connection time: it read slower than the load came", "share": mean(pressure)})
    if dropped:
        found.append({"limit": "dropped_sends", "detail": f"{dropped} of {scheduled} scheduled sends dropped: the QoS window stayed full, acknowledgements came too slowly",
                      "dropped": dropped, "scheduled": scheduled})
    return found


def _memory_limit(broken: Sequence[Any]) -> Optional[dict[str, Any]]:
    """The memory limit, when a probe that broke the objectives found it: OOM kills or times the
    limit was hit, as the broker's cgroup counted them."""
    outcomes = [(p.manifest.get("broker") or {}).get("limits") or {} for p in broken]
    limited = [o for o in outcomes if o.get("memory_bytes") and (o.get("oom_kills") or o.get("memory_limit_hits"))]
    if not limited:
        return None
    kills = sum(int(o.get("oom_kills") or 0) for o in limited)
    hits = sum(int(o.get("memory_limit_hits") or 0) for o in limited)
    lost = sum(1 for p in broken if p.summary.get("status") == "broker_lost")
    detail = (f"the broker reached its memory limit of {limited[0]['memory_bytes'] / 2**20:g} MiB in {len(limited)} of {len(broken)} probes "
              f"(OOM kills {kills}, limit hit {hits} times" + (f"; broker lost in {lost}" if lost else "") + ")")
    peaks = [int(o["memory_peak_bytes"]) for o in limited if o.get("memory_peak_bytes")]
    return {"limit": "memory", "detail": detail, "oom_kills": kills, "limit_hits": hits, "memory_bytes": limited[0]["memory_bytes"],
            "peak_bytes": max(peaks) if peaks else None}


def _mean_p99(probes: Sequence[Any]) -> Optional[float]:
    found = [((p.summary.get("latency") or {}).get("e2e") or {}).get("p99_us") for p in probes]
    values = [float(v) for v in found if v is not None]
    return mean(values) if values else None


def _throttled_share(manifest: dict[str, Any]) -> Optional[float]:
    """The share of the broker's running time its CPU quota held it off."""
    limits = (manifest.get("broker") or {}).get("limits") or {}
    periods, seconds = limits.get("periods"), limits.get("throttled_seconds")
    return seconds / (periods * CFS_PERIOD_US / 1e6) if periods and seconds is not None else None
