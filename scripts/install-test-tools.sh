#!/usr/bin/env bash
# Installs what only the tests need, idempotently: Debian's headless-capable Chromium, which
# tests/test_report_browser.py uses to open the HTML report and check that its plots render
# without console errors. It is large, so it is installed here and not by setup.sh.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
chromium --version 2>/dev/null | head -n 1
