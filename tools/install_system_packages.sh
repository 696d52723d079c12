#!/usr/bin/env bash
# Install the Debian packages the book's PDFs and the test suite need, and only those that are missing:
#   chromium        the browser that prints the PDFs and that the browser tests drive with Playwright (never a
#                   downloaded one)
#   bubblewrap      the sandbox of the autograder (bwrap)
#   fonts-noto-cjk  a Chinese font for Chromium, so the Chinese edition's pages render (and are tested) as readers see them
#   unzip           the guide's way (teaching.md) to try a Gradescope autograder zip before uploading it
# As root it installs with apt-get; as a user with sudo rights, with `sudo apt-get` (sudo may ask for your password).
# Safe to run again: with everything present it does nothing.
# When nothing can install them: in CI (CI set) it exits 1; elsewhere it says what will be skipped and exits 0,
# so the book still builds and the rest of the suite still runs.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
font_status=$(dpkg-query -W -f='${Status}' fonts-noto-cjk 2>/dev/null || true)
[[ "$font_status" == *"ok installed"* ]] || missing+=(fonts-noto-cjk)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)

if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: chromium, bubblewrap, fonts-noto-cjk and unzip are installed"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo DEBIAN_FRONTEND=noninteractive)  # sudo resets the environment; pass the variable through
  else
    echo "system packages: missing ${missing[*]}, and this user is not root and has no sudo." >&2
    case "${CI:-}" in
      ""|0|false|no)
        echo "system packages: what needs them is skipped (the book's PDFs, and the tests pytest names); ask an" \
             "administrator to run: apt-get install ${missing[*]}" >&2
        exit 0 ;;
      *)
        echo "system packages: CI skips no test, so this is an error: run the tests as root or with sudo" >&2
        exit 1 ;;
    esac
  fi
fi
echo "system packages: installing ${missing[*]}${as_root:+ with sudo}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
