"""The seeds' own statistics beside ours: the mean latency with a standard deviation (seeds 001 and
004 drew mean ± SD bars), emqtt-bench's average latency (seed 003) and the broker's mean memory
(seed 003) next to its peak.

Which standard deviation, and why: seed 001 timed 1000 messages in one run and gave the SD of those
samples (write, read); its diffusion test sent one message to N subscribers, took the mean over the
subscribers, repeated that 20 times and gave the SD of the 20 means. So a group whose runs each
send one message per publisher gets the SD over its runs' means; any other group gets the SD of
its samples, all repetitions pooled. Both are in the table, the figure uses the one that matches."""

from __future__ import annotations

from typing import Any, Optional

from mqttlab.analysis import BrokerGroup, Comparison

Table = list[dict[str, Any]]
RUN_MEANS = "SD of the per-run means over the repetitions (as seed 001's diffusion)"
SAMPLES = "SD of the samples, repetitions pooled (as seed 001's write/read)"


def one_message_per_run(group: BrokerGroup) -> bool:
    return all((run.results.scenario.get("publishers") or {}).get("messages") == 1 for run in group.runs)


def paper_sd(group: BrokerGroup) -> tuple[Optional[float], str]:
    """(the seed-001 standard deviation in ms, which one it is)."""
    if one_message_per_run(group):
        return group.estimates["latency_mean"].stdev, "run means"
    stdev = (group.pooled_latency or {}).get("stdev_us")
    return (stdev / 1000.0 if stdev is not None else None), "samples"


def paper_statistics_table(comparison: Comparison) -> Table:
    """Per scenario and broker: the mean latency with both standard deviations, and the seed-003
    figures (mean latency, mean and peak broker memory, throughput)."""
    rows = []
    for scenario in comparison.scenarios:
        for broker, group in scenario.groups.items():
            pooled = group.pooled_latency or {}
            sd, kind = paper_sd(group)
            estimates = group.estimates
            rows.append({
                "scenario": scenario.scenario, "broker": broker, "runs": len(group.runs), "measure": group.latency_measure,
                "latency_mean_ms": estimates["latency_mean"].mean,
                "latency_sd_of_run_means_ms": estimates["latency_mean"].stdev,
                "latency_sd_of_samples_ms": pooled["stdev_us"] / 1000.0 if pooled.get("stdev_us") is not None else None,
                "paper_sd": kind,
                "latency_p50_ms": estimates["latency_p50"].mean,
                "latency_p99_ms": estimates["latency_p99"].mean,
                "throughput_mean": estimates["throughput"].mean,
                "throughput_best": estimates["throughput"].best,
                "broker_rss_mean_mb": estimates["broker_rss_mean"].mean,
                "broker_rss_peak_mb": estimates["broker_rss_peak"].mean,
                "broker_cpu_mean": estimates["broker_cpu"].mean,
            })  # fmt: skip
    return rows
