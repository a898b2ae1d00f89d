#!/usr/bin/env bash
# Checks the operations files without building anything (registered with ctest as
# "unit: alerts and dashboard (promtool)"):
#   1. promtool check rules config/alerts.yml
#   2. promtool test rules tests/promtool/alerts_test.yml   (the alerts' unit tests)
#   3. python3 -m json.tool config/grafana-dashboard.json   (valid JSON)
#   4. every exposure_filter_* name in the alerts, their tests, the dashboard,
#      docs/OPERATING.md and docs/RUNBOOKS.md is one the daemon registers
#      (src/metrics/*.cc, src/serve/*.cc), and every
#      PromQL expression of the dashboard parses (promtool, Grafana variables
#      replaced by plain values);
#   5. docs/OPERATING.md's "it lists N rules" is promtool's count.
# Needs promtool (Debian package prometheus) and python3. Exit 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/.."

fail=0
step() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    echo "   ok"
  else
    echo "check-ops-files: FAILED: $name" >&2
    fail=1
  fi
}

if ! command -v promtool >/dev/null; then
  echo "check-ops-files: promtool not found (apt-get install prometheus, or scripts/install-deps.sh)" >&2
  exit 1
fi

step "promtool check rules config/alerts.yml" \
  promtool check rules config/alerts.yml
step "promtool test rules tests/promtool/alerts_test.yml" \
  promtool test rules tests/promtool/alerts_test.yml
step "python3 -m json.tool config/grafana-dashboard.json" \
  sh -c 'python3 -m json.tool config/grafana-dashboard.json >/dev/null'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

names_and_exprs() {
  python3 - "$tmp/dashboard-rules.yml" <<'PY'
import json, re, sys, glob

# The metric names the daemon and serve register, from their source.
known = set()
for path in glob.glob("src/metrics/*.cc") + glob.glob("src/serve/*.cc"):
    known |= set(re.findall(r'"(exposure_filter_[a-z0-9_]+)"', open(path, encoding="utf-8").read()))
if not known:
    sys.exit("no exposure_filter_* names found in src/metrics/*.cc, src/serve/*.cc")

def base(name):
    m = re.fullmatch(r"(.+)_(bucket|sum|count)", name)
    return m.group(1) if m and m.group(1) in known else name

bad = []
for path in ["config/alerts.yml", "tests/promtool/alerts_test.yml",
             "config/grafana-dashboard.json", "docs/OPERATING.md", "docs/RUNBOOKS.md"]:
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        bad.append(f"{path}: missing")
        continue
    for name in sorted(set(re.findall(r"exposure_filter_[a-z0-9_]*[a-z0-9]", text))):
        if base(name) not in known:
            bad.append(f"{path}: unknown metric {name}")

# Every PromQL expression of the dashboard, as recording rules promtool can parse.
try:
    dash = json.load(open("config/grafana-dashboard.json", encoding="utf-8"))
except ValueError as e:
    print(f"   config/grafana-dashboard.json: {e}")
    sys.exit(1)
exprs = []
def walk(panels):
    for p in panels:
        for t in p.get("targets", []):
            if t.get("expr"):
                exprs.append((f"panel_{p.get('id')}_{t.get('refId')}", t["expr"]))
        walk(p.get("panels", []))
walk(dash.get("panels", []))
for v in dash.get("templating", {}).get("list", []):
    if v.get("type") == "query":
        q = v.get("definition") or v["query"]
        q = q.get("query", "") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", q, re.S)
        exprs.append((f"variable_{v['name']}", m.group(1) if m else q))
for a in dash.get("annotations", {}).get("list", []):
    if a.get("expr"):
        exprs.append((f"annotation_{len(exprs)}", a["expr"]))
if not exprs:
    bad.append("config/grafana-dashboard.json: no PromQL expressions found")

subst = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
with open(sys.argv[1], "w") as f:
    f.write("groups:\n  - name: dashboard\n    rules:\n")
    for where, e in exprs:
        for k, v in subst.items():
            e = e.replace(k, v)
        e = re.sub(r"\$\{?(\w+)\}?", ".*", e)  # $topic, ${partition}: regex matchers
        where = re.sub(r"[^A-Za-z0-9_]", "_", where)
        f.write(f"      - record: dashboard:{where}\n        expr: {json.dumps(e)}\n")
for b in bad:
    print("   " + b)
print(f"   {len(exprs)} dashboard expressions; metric names checked against {len(known)} registered")
sys.exit(1 if bad else 0)
PY
}
step "metric names known to the daemon" names_and_exprs
step "dashboard PromQL parses (promtool check rules)" \
  sh -c "promtool check rules '$tmp/dashboard-rules.yml' >'$tmp/out' 2>&1 || { cat '$tmp/out'; exit 1; }"

# docs/OPERATING.md says how many rules Prometheus lists: promtool's count.
rule_count() {
  local n
  n=$(promtool check rules config/alerts.yml 2>&1 | sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p')
  [ -n "$n" ] && grep -q "it lists $n rules" docs/OPERATING.md && echo "   $n rules" ||
    { echo "   docs/OPERATING.md does not say \"it lists ${n:-?} rules\""; return 1; }
}
step "docs/OPERATING.md names the rule count" rule_count

if [ "$fail" = 0 ]; then echo "check-ops-files: OK"; else echo "check-ops-files: FAILED" >&2; fi
exit "$fail"
