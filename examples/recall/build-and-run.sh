#!/usr/bin/env bash
# Installs an exposure-filter build into a scratch prefix, builds examples/recall
# against the installed package (find_package(exposure_filter)), and runs it with
# the remaining arguments. Used by tests/integration/client_test.cc.
#   examples/recall/build-and-run.sh BUILD_DIR WORK_DIR [recall args...]
set -euo pipefail
build_dir=$1
work_dir=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
cmake --install "$build_dir" --prefix "$work_dir/prefix" >"$work_dir/install.log"
cmake -S "$here" -B "$work_dir/build" -DCMAKE_PREFIX_PATH="$work_dir/prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$work_dir/configure.log"
cmake --build "$work_dir/build" >"$work_dir/build.log"
exec "$work_dir/build/recall" "$@"
