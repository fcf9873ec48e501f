#!/usr/bin/env bash
# Installs what the Python tests need, idempotently: a venv in ./.venv with
# the pinned packages of requirements.txt (`websockets` for the WebSocket
# tests; `http-ece`, the reference RFC 8188/8291 decryption, and
# `cryptography` for the Web Push tests' local push service).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
# Tests run in parallel call this at once on a fresh clone: one at a time.
if command -v flock >/dev/null; then
    exec 9>"$here/.install.lock"
    flock 9
fi

if ! command -v python3 >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends python3 python3-venv >/dev/null
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
want="$(grep -E '^[A-Za-z0-9_.-]+==' "$here/requirements.txt" | tr '[:upper:]_' '[:lower:]-' | sort)"
frozen="$("$venv/bin/python" -m pip freeze 2>/dev/null | tr '[:upper:]_' '[:lower:]-' || true)"
have="$(printf '%s\n' "$frozen" | grep -Fx -f <(printf '%s\n' "$want") | sort || true)"
if [ "$want" != "$have" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
"$venv/bin/python" -c 'import websockets, http_ece, cryptography; print("websockets", websockets.__version__, "cryptography", cryptography.__version__, "http_ece ok")'
