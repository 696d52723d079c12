#!/usr/bin/env bash
# Install the Debian packages the test suite needs, and only those that are missing:
#   chromium    the browser that tests/test_browser.py drives with Playwright (never a downloaded one)
#   bubblewrap  the sandbox of the autograder (bwrap)
#   fonts-noto-cjk  a Chinese font for Chromium, so the Chinese edition's pages render (and are tested) as readers see them
# Run as root; it never asks a question. Safe to run again: with everything present it does nothing.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
font_status=$(dpkg-query -W -f='${Status}' fonts-noto-cjk 2>/dev/null || true)
[[ "$font_status" == *"ok installed"* ]] || missing+=(fonts-noto-cjk)

if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: chromium, bubblewrap and fonts-noto-cjk are installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system packages: missing ${missing[*]}; run $0 as root to install them" >&2
  exit 1
fi
echo "system packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
