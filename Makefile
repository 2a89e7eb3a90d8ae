# The two commands of the README's quick start.
.PHONY: run test lint setup bench

# Sets up what is missing, builds, and runs the default scenario against the embedded broker.
run: setup
	.venv/bin/mqttlab run scenarios/default.yaml

# Sets up what is missing (test brokers included) and runs every test: Rust, then Python, the
# Python tests four files at a time (each file's brokers stay in one process; most of a test's
# time is a load's fixed duration, so four share the 2 cores: 44% less wall time than two in a
# trial here), then alone the ones marked `serial` (they judge timing or CPU shares, which a
# neighbour on the cores would skew).
test: setup
	bash scripts/install-brokers.sh
	bash scripts/install-test-tools.sh
	cargo test --workspace --quiet
	.venv/bin/pytest -q -rs -n 4 --dist loadfile -m "not serial"; parallel=$$?; \
	.venv/bin/pytest -q -rs -m serial; serial=$$?; \
	test $$parallel -eq 0 && test $$serial -eq 0

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
