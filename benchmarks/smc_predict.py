"""Benchmark: one `smc predict` data point of the paper's size.

Chernoff epsilon = 0.05, delta = 0.01 (n = 1060 replications), 150 clients, sequences of 10,
profile UP1, three thresholds. The paper needed 3-5 minutes per point (its Table 2); the target
here is <= 2 s. Prints the median of several runs for the paper's delay function (Listing 1.1's
coefficients) and for a log-normal model.

    PYTHONPATH=python .venv/bin/python benchmarks/smc_predict.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from mqttlab.smc.models import LogNormalModel, NormalModel
from mqttlab.smc.predict import PredictionSettings, predict
from mqttlab.smc.profiles import UP1

# The paper's Listing 1.1, converted from ms to µs.
PAPER_OLS = NormalModel(
    coef=[-8009.7, 8084.7, 9066.7, 8771.2, 9294.9, 1358.8, 2.503, 294.27],
    stderr=[110.6, 123.4, 139.5, 142.0, 129.5, 3.343, 0.2084, 30.77],
    sigma=5000.0,
).paper_delay()
# Roughly the same medians at moderate load, with a multiplicative log-normal spread.
LOGNORMAL = LogNormalModel(coef=[7.6, 0.05, 0.1, 0.05, 0.1, 0.04, 0.0002, 0.02], stderr=[0.0] * 8, sigma=0.5)


def time_point(model, runs: int) -> tuple[float, list[float], float]:
    settings = PredictionSettings(length=10, epsilon=0.05, delta=0.01)
    times, result = [], None
    for run in range(runs):
        start = time.perf_counter()
        result = predict(model, UP1, [150], [30.0, 50.0, 70.0], PredictionSettings(seed=run))
        times.append(time.perf_counter() - start)
    assert result is not None and int(result.table["samples"].iloc[0]) == settings.n == 1060
    return statistics.median(times), times, float(result.table["p"].iloc[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("one predict point: n = 1060 replications x 150 clients x 10 messages (1.59 M simulated messages)")
    for name, model in (("paper delay (Listing 1.1)", PAPER_OLS), ("log-normal", LOGNORMAL)):
        median, times, p50 = time_point(model, args.runs)
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:28s} median {median:.2f} s over {args.runs} runs ({runs}); P(all < 50 ms) = {p50:.3f}")


if __name__ == "__main__":
    main()
