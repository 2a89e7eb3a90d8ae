#!/usr/bin/env bash
# Installs what only the tests need, idempotently:
# - Debian's headless-capable Chromium, which tests/test_report_browser.py uses to open the HTML
#   report and check that its plots render without console errors;
# - tshark, which `mqttlab run --capture` uses for message bundling (tests/test_capture.py);
# - podman with runc, which runs brokers from container images (tests/test_brokers_container.py):
#   runc because crun refuses hosts with cgroup v1 or hybrid hierarchies.
# They are large, so they are installed here and not by setup.sh.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # tshark's package asks whether non-root users may capture; noninteractive takes the default (no).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
chromium --version 2>/dev/null | head -n 1
tshark --version 2>/dev/null | head -n 1
podman --version 2>/dev/null | head -n 1
