#!/usr/bin/env bash
# Checks deploy/kubernetes/ offline (ctest label stack, one ctest per step):
#   scripts/check-kubernetes.sh render    kubectl kustomize renders every overlay with
#                                         its default settings (as `kubectl apply -k`), and
#                                         the base's config file is config/exposure-filter.yaml
#   scripts/check-kubernetes.sh schema    every rendered object validates against its
#                                         schema (deploy/kubernetes/validate/validate.mjs)
#   scripts/check-kubernetes.sh negative  the validator rejects broken objects, and the
#                                         fields step a keda overlay with what issue 50 removed
#   scripts/check-kubernetes.sh rules     prometheusrule.yaml is generate.sh's output of
#                                         config/alerts.yml, and promtool check rules
#                                         accepts the rendered PrometheusRule's spec
#   scripts/check-kubernetes.sh fields    every field issues 32 and 50 name is set
#                                         (deploy/kubernetes/validate/check-fields.mjs)
# The config keys, variables, image tag and version are checked against the binary
# by tests/integration/stack_files_test.cc ("kubernetes: ...").
# Needs kubectl (v1.32, with Kustomize v5), node + npm (scripts/install-deps.sh runs
# npm ci in deploy/kubernetes/validate) and promtool.
set -euo pipefail
cd "$(dirname "$0")/.."
K=deploy/kubernetes
V=$K/validate
step=${1:?usage: check-kubernetes.sh render|schema|negative|rules|fields}

need() {
  command -v "$1" >/dev/null || { echo "check-kubernetes: $1 not found: $2" >&2; exit 1; }
}
need kubectl "preinstalled on this machine kind (not a Debian 12 package); scripts/install-deps.sh says so"
render() {  # render OVERLAY, with Kustomize's default settings
  kubectl kustomize "$K/overlays/$1"
}
overlays() { (cd "$K/overlays" && ls -d -- */ | tr -d /); }
node_ready() {
  need node "scripts/install-deps.sh installs nodejs and npm"
  [ -d "$V/node_modules/kubernetes-models" ] ||
    { echo "check-kubernetes: $V/node_modules missing: scripts/install-deps.sh runs npm ci there" >&2; exit 1; }
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0
case "$step" in
  render)
    # The base is self-contained: its ConfigMap is generated from a copy of the
    # shipped config file, which must stay byte-identical.
    if cmp config/exposure-filter.yaml "$K/base/exposure-filter.yaml"; then
      echo "base/exposure-filter.yaml is config/exposure-filter.yaml"
    else
      echo "check-kubernetes: $K/base/exposure-filter.yaml differs from config/exposure-filter.yaml;" \
        "refresh it: cp config/exposure-filter.yaml $K/base/exposure-filter.yaml" >&2
      fail=1
    fi
    for o in $(overlays); do
      if render "$o" >"$tmp/$o.yaml"; then
        echo "$o: $(grep -c '^kind:' "$tmp/$o.yaml") objects"
      else
        echo "check-kubernetes: overlay $o does not render" >&2
        fail=1
      fi
    done
    # docs/KUBERNETES.md "The image": an overlay of your own naming your registry
    # changes every container's image, the components' too.
    mine=$(mktemp -d "$K/.image-check.XXXXXX")
    trap 'rm -rf "$tmp" "$mine"' EXIT
    printf '%s\n' "resources: [../overlays/full]" "images:" \
      "  - name: registry.example.com/exposure-filter" \
      "    newName: registry.internal/team/exposure-filter" >"$mine/kustomization.yaml"
    images=$(kubectl kustomize "$mine" | grep 'image:' | sort | uniq -c)
    if [ "$(printf '%s\n' "$images" | wc -l)" = 1 ] &&
       printf '%s\n' "$images" | grep -q 'image: registry.internal/team/exposure-filter:'; then
      echo "an overlay's images: sets every container's image:$images"
    else
      echo "check-kubernetes: an overlay's images: did not set every image:" >&2
      printf '%s\n' "$images" >&2
      fail=1
    fi
    ;;
  schema)
    node_ready
    for o in $(overlays); do
      render "$o" >"$tmp/$o.yaml"
      echo -n "$o: "
      node "$V/validate.mjs" <"$tmp/$o.yaml" || fail=1
    done
    ;;
  negative)
    node_ready
    node "$V/validate.mjs" --self-test || fail=1
    # A rendered overlay with one field of a wrong type must be refused as a whole.
    render plain | sed 's/^  replicas: 2$/  replicas: "two"/' >"$tmp/broken.yaml"
    grep -q 'replicas: "two"' "$tmp/broken.yaml" || { echo "check-kubernetes: broke nothing" >&2; fail=1; }
    if node "$V/validate.mjs" <"$tmp/broken.yaml" >"$tmp/broken.out" 2>&1; then
      echo "check-kubernetes: a Deployment with replicas: \"two\" passed validation" >&2
      fail=1
    else
      echo "broken overlay refused: $(grep -m1 replicas "$tmp/broken.out")"
    fi
    # The fields step refuses what issue 50 removed: one KEDA daemon, PodDisruption-
    # Budgets that a not-ready pod blocks, a daemon without the SASL mechanism.
    mkdir "$tmp/neg"
    render keda | sed -e 's/^  minReplicaCount: 2$/  minReplicaCount: 1/' \
      -e '/unhealthyPodEvictionPolicy/d' \
      -e '/name: EXPOSURE_FILTER_KAFKA_SASL_MECHANISM/,+2d' >"$tmp/neg/keda.yaml"
    node "$V/check-fields.mjs" "$tmp/neg" >"$tmp/neg.out" 2>&1 || true
    for what in "minReplicaCount 1 >= 2" "daemons' PodDisruptionBudget unhealthyPodEvictionPolicy AlwaysAllow" \
                "serve PodDisruptionBudget" "run EXPOSURE_FILTER_KAFKA_SASL_MECHANISM from Secret"; do
      if grep -q "^FAIL keda: .*$what" "$tmp/neg.out"; then
        echo "fields refuses: $what"
      else
        echo "check-kubernetes: the fields step accepted a broken keda overlay ($what)" >&2
        fail=1
      fi
    done
    ;;
  rules)
    rendered=0
    need promtool "scripts/install-deps.sh installs prometheus"
    node_ready
    "$K/components/prometheus-operator/generate.sh" --check || fail=1
    for o in $(overlays); do
      render "$o" >"$tmp/$o.yaml"
      node "$V/check-fields.mjs" --rule-spec <"$tmp/$o.yaml" >"$tmp/$o-rules.yml"
      [ -s "$tmp/$o-rules.yml" ] || continue
      echo "$o: promtool check rules on the PrometheusRule's spec"
      promtool check rules "$tmp/$o-rules.yml" || fail=1
      # The serve alerts are in it.
      grep -q 'name: exposure-filter-serve' "$tmp/$o-rules.yml" ||
        { echo "check-kubernetes: $o: no exposure-filter-serve group" >&2; fail=1; }
      rendered=$((rendered + 1))
    done
    [ "$rendered" -gt 0 ] || { echo "check-kubernetes: no overlay renders a PrometheusRule" >&2; fail=1; }
    ;;
  fields)
    node_ready
    for o in $(overlays); do render "$o" >"$tmp/$o.yaml"; done
    node "$V/check-fields.mjs" "$tmp" || fail=1
    ;;
  *)
    echo "check-kubernetes: unknown step $step" >&2
    exit 2
    ;;
esac
[ "$fail" = 0 ] && echo "check-kubernetes $step: ok"
exit "$fail"
