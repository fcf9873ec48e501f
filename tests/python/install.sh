#!/usr/bin/env bash
# Installs what the Python WebSocket test needs, idempotently: a venv in
# ./.venv with the pinned `websockets` of requirements.txt.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"

if ! command -v python3 >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends python3 python3-venv >/dev/null
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
want="$(grep -E '^websockets==' "$here/requirements.txt")"
have="$("$venv/bin/python" -m pip freeze 2>/dev/null | grep -E '^websockets==' || true)"
if [ "$want" != "$have" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
"$venv/bin/python" -c 'import websockets; print("websockets", websockets.__version__)'
