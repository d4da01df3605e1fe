#!/usr/bin/env bash
# Copies the Debian headers and libraries the build needs into shared/deps/usr, for the
# GPU machine, which has torch, cmake and ninja but no package registry. Run here (after
# scripts/setup.sh), then pass shared/deps with the working tree (`carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$PWD/shared/deps"
rm -rf "$dest" && mkdir -p "$dest"
for pkg in libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev \
           libgtest-dev googletest libboost-graph-dev libboost1.74-dev libbenchmark-dev; do
  dpkg -L "$pkg" 2>/dev/null | while read -r f; do
    if [ -f "$f" ] || [ -L "$f" ]; then mkdir -p "$dest$(dirname "$f")" && cp -a "$f" "$dest$f"; fi
  done
done
du -sh "$dest"
