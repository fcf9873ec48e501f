#!/usr/bin/env bash
# Installs what the browser test needs, idempotently: Debian's chromium
# (the browser under test; playwright downloads none) and the pinned
# playwright-core from package-lock.json into ./node_modules.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

need=()
[ -x /usr/bin/chromium ] || need+=(chromium fonts-liberation)
command -v node >/dev/null && command -v npm >/dev/null || need+=(nodejs npm)
if [ "${#need[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -d "$here/node_modules/playwright-core" ]; then
    cd "$here"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent
fi

/usr/bin/chromium --version
node -e "console.log('playwright-core', require('$here/node_modules/playwright-core/package.json').version)"
