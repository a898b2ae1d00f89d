#!/usr/bin/env bash
# Installs every Debian 12 package exposure-filter needs to build, test and run.
# Idempotent: packages already present are skipped; apt-get update runs only when
# something is missing. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ca-certificates
  librdkafka-dev libhiredis-dev libmurmurhash-dev libyaml-cpp-dev libspdlog-dev
  libfmt-dev catch2 libsimdjson-dev prometheus-cpp-dev libcli11-dev
  libcpp-httplib-dev nlohmann-json3-dev libbenchmark-dev libssl-dev zlib1g-dev
  redis-server redis-tools kcat curl procps python3
  prometheus  # for promtool: tests check /metrics with the real parser
  clang libclang-rt-14-dev llvm  # scripts/fuzz.sh: clang 14, libFuzzer + sanitizers, llvm-symbolizer
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
# Debian's redis-server package starts a system service on 6379; we never use it
# (scripts and tests start their own on free ports), so leave it as the system has it.
echo "install-deps: done"
