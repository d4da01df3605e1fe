#!/usr/bin/env bash
# Copies the Debian headers and libraries the build needs into shared/deps/usr, for the
# GPU machine, which has torch, cmake and ninja but no package registry. Run here (after
# scripts/setup.sh and a build), then pass shared/deps with the working tree (`carry`),
# which may hold 64 MiB in all:
# * of Boost (162 MB of headers) only the headers this repository's builds include, read
#   from ninja's dependency logs of the build folders here (every header when none is);
# * beside each library, the shared libraries it loads that are not glibc's or GCC's, so
#   that a machine of another distribution links and runs it (libcurl's TLS and HTTP/2).
#   scripts/pack_gpu_deps.sh [--wheels]
# --wheels also downloads transformers, peft and their dependencies as wheels (for a
# machine whose Python lacks them; the H200 image has both).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$PWD/shared/deps"
rm -rf "$dest" && mkdir -p "$dest"

boost_used=$(mktemp)
trap 'rm -f "$boost_used"' EXIT
for dir in build build-cpu build-gpu; do
  [ -f "$dir/build.ninja" ] && ninja -C "$dir" -t deps 2>/dev/null
done | grep -o '/usr/include/boost/[^ ]*' | sort -u >"$boost_used" || true

# Links are copied as files: the device tool carries a tree's links only as links.
copy() { mkdir -p "$dest$(dirname "$1")" && cp -L --preserve=mode "$1" "$dest$1"; }
for pkg in libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev \
           libgtest-dev googletest libboost-graph-dev libboost1.74-dev libbenchmark-dev \
           libcurl4-openssl-dev libcurl4; do
  dpkg -L "$pkg" 2>/dev/null | while read -r f; do
    { [ -f "$f" ] || [ -L "$f" ]; } || continue
    case "$f" in
      /usr/include/boost/*) [ ! -s "$boost_used" ] || grep -qxF "$f" "$boost_used" || continue ;;
      /usr/share/doc/* | /usr/share/man/* | /usr/src/*) continue ;;
      # The static libcurl would need every TLS and Kerberos library at link time.
      */libcurl.a | */pkgconfig/libcurl.pc) continue ;;
    esac
    copy "$f"
  done
done
# The libraries the copied ones load, less the C and C++ runtimes every machine has.
for lib in "$dest"/usr/lib/x86_64-linux-gnu/*.so.*; do
  ldd "$lib" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
  while read -r so; do
    libdir="$dest/usr/lib/x86_64-linux-gnu" real=$(readlink -f "$so")
    [ -e "$libdir/$(basename "$real")" ] || cp "$real" "$libdir/"
    [ -e "$libdir/$(basename "$so")" ] || cp "$real" "$libdir/$(basename "$so")"
  done
echo "deps: $(du -sh "$dest" | cut -f1) ($(wc -l <"$boost_used") Boost headers)"

[ "${1:-}" = "--wheels" ] || exit 0
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
