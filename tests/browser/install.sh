#!/usr/bin/env bash
# Installs what the browser test needs, idempotently: Debian's chromium
# (the browser under test; playwright downloads none) and the pinned
# playwright-core from package-lock.json into ./node_modules.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Two tests may call this at once, and other installs may hold dpkg's
# lock: one caller at a time, each waiting for dpkg rather than failing.
exec 9>"${TMPDIR:-/tmp}/dtp-browser-install.lock"
flock 9

need=()
[ -x /usr/bin/chromium ] || need+=(chromium fonts-liberation)
command -v node >/dev/null && command -v npm >/dev/null || need+=(nodejs npm)
if [ "${#need[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -d "$here/node_modules/playwright-core" ]; then
    cd "$here"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent
fi

/usr/bin/chromium --version
node -e "console.log('playwright-core', require('$here/node_modules/playwright-core/package.json').version)"
