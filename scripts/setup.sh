#!/usr/bin/env bash
# Installs what mqttlab needs and builds it: Debian packages, a Rust toolchain check, the Python
# virtualenv with the package (engine in release mode) and its test extras. Idempotent: a second
# run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

need_apt=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_apt+=(mosquitto)
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v ss >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)  # ip (emulated networks), ss (faults)
if [ ${#need_apt[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# Debian starts a system-wide Mosquitto on port 1883; mqttlab runs its own brokers on free ports.

if ! command -v cargo >/dev/null 2>&1; then
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "error: Rust (cargo) is needed: install it with rustup" >&2; exit 1; }
# The test command's lint step needs rustfmt and clippy; rustup adds them when they are missing.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null 2>&1 || { echo "error: cargo fmt and cargo clippy are needed (rustup component add rustfmt clippy)" >&2; exit 1; }
  say "adding rustfmt and clippy"
  rustup component add rustfmt clippy >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  say "creating the virtualenv .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q "maturin>=1.5,<2"

# Rebuild the engine only when a Rust source or manifest is newer than the installed module.
stamp=.venv/.mqttlab-engine-built
if [ ! -f "$stamp" ] || [ -n "$(find crates Cargo.toml pyproject.toml -newer "$stamp" \( -name '*.rs' -o -name 'Cargo.toml' -o -name 'pyproject.toml' \) -print -quit)" ] \
   || ! .venv/bin/python -c 'import mqttlab._engine' >/dev/null 2>&1; then
  say "building the engine (release) and installing mqttlab into .venv"
  .venv/bin/maturin develop --release -E test -q
  touch "$stamp"
fi
