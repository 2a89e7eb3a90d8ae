#!/usr/bin/env bash
# Installs the brokers the tests launch, idempotently: Mosquitto, RabbitMQ, ejabberd and ActiveMQ
# (Debian packages, their services never started), Aedes (npm), amqtt (PyPI, own virtualenv),
# Moquette and HiveMQ CE (Maven Central), Mochi MQTT (Go module proxy, built with go). rumqttd
# needs nothing: it is built into mqttlab's engine. RMQTT (the rmqtt library from crates.io with
# mqttlab's runner) is a build of minutes and only installed when asked:
#
#   scripts/install-brokers.sh                # the test brokers
#   scripts/install-brokers.sh --with-rmqtt   # ... and RMQTT (cargo build, minutes on small machines)
#   MQTTLAB_INSTALL_RMQTT=1 scripts/install-brokers.sh
#
# NanoMQ, RSMB and the Paho MQTT-SN gateway are built from their pinned upstream sources
# ($MQTTLAB_SOURCES, default ../shared/sources; else GitHub) with make/cmake, apt's libmbedtls-dev.
# Expects Debian 12 with Python, Node/npm, Java/Maven (and Rust for RMQTT); the Debian packages
# need root. Go is taken from PATH or /usr/local/go, else Debian's golang-go is installed.
# Non-system brokers go to ${XDG_DATA_HOME:-~/.local/share}/mqttlab/brokers.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
brokers=(mosquitto rabbitmq ejabberd activemq aedes amqtt moquette hivemq mochi nanomq rsmb paho-mqtt-sn-gateway)

for arg in "$@"; do
  case "$arg" in
    --with-rmqtt) MQTTLAB_INSTALL_RMQTT=1 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "install-brokers.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

if [[ "${MQTTLAB_INSTALL_RMQTT:-0}" == "1" ]]; then
  brokers+=(rmqtt)
fi

# The launchers' own install steps do the work, so the script and `mqttlab brokers install`
# never disagree. The source tree is used even when mqttlab is not installed yet.
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python="python3"; fi
fi
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"

"$python" -m mqttlab brokers install "${brokers[@]}"
"$python" -m mqttlab brokers list
