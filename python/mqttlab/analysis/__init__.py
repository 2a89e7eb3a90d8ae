"""Analysis of results directories: statistics over repetitions and comparisons of brokers."""

from mqttlab.analysis.compare import BrokerGroup, Comparison, ScenarioComparison, compare_directories, compare_runs
from mqttlab.analysis.runs import METRICS, ComparisonError, Metric, RunFigures, find_result_directories, read_run, read_runs
from mqttlab.analysis.stats import Difference, Estimate, mean_interval, welch_difference

__all__ = [
    "METRICS",
    "BrokerGroup",
    "Comparison",
    "ComparisonError",
    "Difference",
    "Estimate",
    "Metric",
    "RunFigures",
    "ScenarioComparison",
    "compare_directories",
    "compare_runs",
    "find_result_directories",
    "mean_interval",
    "read_run",
    "read_runs",
    "welch_difference",
]
