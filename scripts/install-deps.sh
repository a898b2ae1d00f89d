#!/usr/bin/env bash
# Installs the Debian 12 packages exposure-filter needs. Idempotent: packages
# already present are skipped; apt-get update runs only when something is missing.
# Needs root (or sudo).
#   scripts/install-deps.sh              everything: build, tests, tools (default;
#                                        scripts/test.sh)
#   scripts/install-deps.sh --build      what compiling the binary needs (Dockerfile build stage)
#   scripts/install-deps.sh --demo       --build plus the tools scripts/quickstart.sh runs
#   scripts/install-deps.sh --runtime    the shared libraries the binary loads (Dockerfile
#                                        runtime stage); ctest checks them against the binary
#   scripts/install-deps.sh --list MODE  print MODE's packages (all|build|demo|runtime),
#                                        install nothing
set -euo pipefail

# Compiling the daemon, the client library and the Redis module.
BUILD=(
  build-essential cmake pkg-config git ca-certificates
  librdkafka-dev libhiredis-dev libmurmurhash-dev libyaml-cpp-dev libspdlog-dev
  libfmt-dev libsimdjson-dev prometheus-cpp-dev libcli11-dev
  libcpp-httplib-dev nlohmann-json3-dev libssl-dev zlib1g-dev
  libxxhash-dev libicu-dev
)
# The shared libraries of the binary (readelf -d build/exposure-filter | grep NEEDED),
# for an image that only runs it (libc6, libgcc-s1 and libstdc++6 come with any
# Debian; listed so the list is complete).
RUNTIME=(
  librdkafka1 libhiredis0.14 libmurmurhash2 libcpp-httplib0.11 libsimdjson14
  libyaml-cpp0.7 libspdlog1.10 libfmt9 libprometheus-cpp-core1.0 libxxhash0 libicu72 libssl3
  libstdc++6 libgcc-s1 libc6 ca-certificates
)
# What scripts/quickstart.sh runs besides the binary, on top of BUILD (bash,
# coreutils and mawk come with any Debian).
DEMO=(redis-server redis-tools kcat curl python3)
# Tests, benchmarks and tools on top of BUILD.
TEST=(
  catch2 libbenchmark-dev
  redis-server redis-tools kcat curl procps python3
  prometheus  # for promtool: tests check /metrics, the alerts and config/prometheus.yml
  clang libclang-rt-14-dev llvm  # scripts/fuzz.sh: clang 14, libFuzzer + sanitizers, llvm-symbolizer
  systemd            # systemd-analyze: tests verify config/*.service
  docker-compose     # `docker-compose config` (no engine needed): tests check docker-compose.yml
  binutils dpkg      # readelf, dpkg -S: tests check the Dockerfile's runtime libraries
  fortunes fortunes-zh  # real English and Chinese texts: the content fingerprint tests
  nodejs             # deploy/kubernetes/validate: schema checks of the manifests (npm ci below)
  pmccabe            # scripts/check-complexity.py: per-function complexity and length
)

mode=all
list=0
case "${1:-}" in
  "") ;;
  --build) mode=build ;;
  --demo) mode=demo ;;
  --runtime) mode=runtime ;;
  --list)
    list=1
    mode=${2:-all}
    ;;
  -h | --help)
    sed -n '2,12p' "$0"
    exit 0
    ;;
  *)
    echo "install-deps: unknown option '$1' (try --help)" >&2
    exit 2
    ;;
esac

case "$mode" in
  all) PACKAGES=("${BUILD[@]}" "${TEST[@]}") ;;
  build) PACKAGES=("${BUILD[@]}") ;;
  demo) PACKAGES=("${BUILD[@]}" "${DEMO[@]}") ;;
  runtime) PACKAGES=("${RUNTIME[@]}") ;;
  *)
    echo "install-deps: unknown mode '$mode' (all, build, demo or runtime)" >&2
    exit 2
    ;;
esac

if [ "$list" = 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# After the packages (mode all): the npm models the Kubernetes manifests are
# validated with, pinned by deploy/kubernetes/validate/package-lock.json, and a
# word about kubectl, which no Debian 12 package provides.
after_packages() {
  [ "$mode" = all ] || return 0
  local v
  if ! command -v npm >/dev/null; then
    # Debian's npm (a nodejs that bundles npm, e.g. NodeSource's, conflicts with it).
    echo "install-deps: installing npm"
    ${SUDO:-} apt-get install -y -q --no-install-recommends npm ||
      { ${SUDO:-} apt-get update -q && ${SUDO:-} apt-get install -y -q --no-install-recommends npm; }
  fi
  v="$(cd "$(dirname "$0")/.." && pwd)/deploy/kubernetes/validate"
  if [ ! -f "$v/node_modules/.package-lock.json" ] ||
    [ "$v/package-lock.json" -nt "$v/node_modules/.package-lock.json" ]; then
    echo "install-deps: npm ci in deploy/kubernetes/validate"
    (cd "$v" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  command -v kubectl >/dev/null ||
    echo "install-deps: kubectl (v1.32, Kustomize v5) not found: it is not a Debian 12 package; install it by hand (the ctest label stack needs it)" >&2
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present ($mode)"
  after_packages
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
after_packages
echo "install-deps: done"
