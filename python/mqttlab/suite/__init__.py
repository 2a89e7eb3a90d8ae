"""Suites: scenarios × variants × brokers × repetitions (docs/suites.md), expanded into runs and
run with a fresh broker each time, resumable."""

from mqttlab.suite.expand import PlannedRun, expand_suite
from mqttlab.suite.model import Suite, SuiteError, builtin_suites, load_suite, validate_suite
from mqttlab.suite.runner import RunRecord, SuiteConflict, SuiteInterrupted, finished_status, prepare_directory, run_suite

__all__ = [
    "PlannedRun",
    "RunRecord",
    "Suite",
    "SuiteConflict",
    "SuiteError",
    "SuiteInterrupted",
    "builtin_suites",
    "expand_suite",
    "finished_status",
    "load_suite",
    "prepare_directory",
    "run_suite",
    "validate_suite",
]
