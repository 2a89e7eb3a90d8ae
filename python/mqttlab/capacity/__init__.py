"""How much a broker can take: the highest offered rate that meets stated objectives (SLOs),
with its interval, found by a search of real probe runs (docs/capacity.md).

    slo.py     the objectives: 'p99<10ms', 'loss==0', 'delivered>=0.999', ...
    probe.py   one probe: a run at one rate, kept as a results directory, judged
    search.py  the ladder, the bisection and the repeats; what the interval means
    knee.py    what limited the broker at its knee (CPU, queueing, loss, dropped sends)
    curve.py   latency, delivered rate, CPU and memory against offered rate: CSV and PNG
    runner.py  one broker's search, resumable, to capacity.json
    report.py  brokers side by side, with which differences are significant
"""

from mqttlab.capacity.probe import Probe, ProbeSpec
from mqttlab.capacity.report import differences, write_comparison
from mqttlab.capacity.runner import CapacityReport, SearchConflict, search_capacity
from mqttlab.capacity.search import Outcome, Settings
from mqttlab.capacity.slo import Objective, SloError, parse_objectives

__all__ = [
    "CapacityReport",
    "Objective",
    "Outcome",
    "Probe",
    "ProbeSpec",
    "SearchConflict",
    "Settings",
    "SloError",
    "differences",
    "parse_objectives",
    "search_capacity",
    "write_comparison",
]
