#!/usr/bin/env bash
# Installs what the `webpush-peer` feature of dtp-bench needs to build,
# idempotently: OpenSSL's headers and pkg-config (Debian's libssl-dev and
# pkg-config), for the `ece` crate under the `web-push` crate peer.
set -euo pipefail
if ! dpkg -s libssl-dev pkg-config >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends libssl-dev pkg-config >/dev/null
fi
pkg-config --modversion openssl
