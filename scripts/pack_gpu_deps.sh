#!/usr/bin/env bash
# Copies the Debian headers and libraries the build needs into shared/deps/usr, for the
# GPU machine, which has torch, cmake and ninja but no package registry. Run here (after
# scripts/setup.sh), then pass shared/deps with the working tree (`carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$PWD/shared/deps"
rm -rf "$dest" && mkdir -p "$dest"
for pkg in libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev \
           libgtest-dev googletest libboost-graph-dev libboost1.74-dev libbenchmark-dev \
           libcurl4-openssl-dev libcurl4; do
  dpkg -L "$pkg" 2>/dev/null | while read -r f; do
    if [ -f "$f" ] || [ -L "$f" ]; then mkdir -p "$dest$(dirname "$f")" && cp -a "$f" "$dest$f"; fi
  done
done
du -sh "$dest"

# The Python side of the reference suite: transformers and peft at the versions
# scripts/setup.sh pins, with every dependency of theirs installed here except torch
# (which the GPU machine has), as wheels for `pip install --no-index`.
wheels="$PWD/shared/wheels"
rm -rf "$wheels" && mkdir -p "$wheels"
python3 - <<'PY' | while read -r req; do
import importlib.metadata as md, re
seen, todo = {}, ["transformers", "peft"]
while todo:
    name = todo.pop()
    key = name.lower().replace("_", "-")
    if key in seen or key == "torch":
        continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    seen[key] = dist.version
    for r in dist.requires or []:
        if "extra ==" not in r:
            todo.append(re.split(r"[ ;<>=!~\[(]", r)[0])
for key, version in sorted(seen.items()):
    print(f"{key}=={version}")
PY
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "$req"
done
du -sh "$wheels"
