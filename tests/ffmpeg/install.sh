#!/usr/bin/env bash
# Installs what the RTSP interoperability tests need, idempotently: ffprobe
# and ffmpeg (Debian's ffmpeg package), RTSP clients we did not write.
set -euo pipefail
if ! command -v ffprobe >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends ffmpeg >/dev/null
fi
# sed reads to the end: with pipefail, head could make ffprobe die of SIGPIPE.
ffprobe -version | sed -n 1p
