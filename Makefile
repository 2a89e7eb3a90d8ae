# The two commands of the README's quick start.
.PHONY: run test setup bench

# Sets up what is missing, builds, and runs the default scenario against the embedded broker.
run: setup
	.venv/bin/mqttlab run scenarios/default.yaml

# Sets up what is missing (test brokers included) and runs every test: Rust, then Python.
test: setup
	bash scripts/install-brokers.sh
	bash scripts/install-test-tools.sh
	cargo test --workspace --quiet
	.venv/bin/pytest -q -rs

setup:
	bash scripts/setup.sh

bench: setup
	.venv/bin/python benchmarks/engine_bench.py
