# The two commands of the README's quick start.
.PHONY: run test lint setup bench

# Sets up what is missing, builds, and runs the default scenario against the embedded broker.
run: setup
	.venv/bin/mqttlab run scenarios/default.yaml

# Sets up what is missing (test brokers included) and runs every test: Rust, then Python.
test: setup
	bash scripts/install-brokers.sh
	bash scripts/install-test-tools.sh
	cargo test --workspace --quiet
	.venv/bin/pytest -q -rs

# Fails on any finding: formatting, clippy, ruff, mypy, and an import cycle in the engine or in the
# Python package (scripts/check_module_cycles.py). CI runs it before the tests (.ci/run).
lint: setup
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	.venv/bin/ruff check python tests benchmarks scripts
	.venv/bin/mypy
	python3 scripts/check_module_cycles.py

setup:
	bash scripts/setup.sh

bench: setup
	.venv/bin/python benchmarks/engine_bench.py
