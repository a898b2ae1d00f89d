// Checks that the rendered overlays set every field issues 32 and 50 name, against
// the figures they rest on in the repository (docs/OPERATING.md, docs/CAPACITY.md,
// docker-compose.yml, config/, deploy/kubernetes/examples/credentials-secret.yaml,
// docs/KUBERNETES.md). Removing any of them fails this.
//   node check-fields.mjs DIR           DIR holds <overlay>.yaml, each overlay rendered
//   node check-fields.mjs --rule-spec   stdin: a rendered overlay; prints its
//                                       PrometheusRule's spec (for promtool), or nothing
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, stringify } from "yaml";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const text = (p) => readFileSync(join(ROOT, p), "utf8");
const load = (s) => parseAllDocuments(s).map((d) => d.toJS()).filter((o) => o);

if (process.argv[2] === "--rule-spec") {
  const rule = load(readFileSync(0, "utf8")).find((o) => o.kind === "PrometheusRule");
  if (rule) process.stdout.write(stringify(rule.spec));
  process.exit(0);
}

const dir = process.argv[2];
const overlays = {};
for (const f of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
  overlays[f.replace(/\.yaml$/, "")] = load(readFileSync(join(dir, f), "utf8"));
}
let failures = 0;
function check(ok, what) {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    console.error(`FAIL ${what}`);
    failures++;
  }
}
const find = (objs, kind, name) => objs.find((o) => o.kind === kind && o.metadata.name === name);
const quantity = (q) => {  // "512Mi" -> bytes, "500m" -> cores
  const m = String(q).match(/^([0-9.]+)(m|Ki|Mi|Gi)?$/);
  if (!m) return NaN;
  const f = { m: 1e-3, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2]] ?? 1;
  return Number(m[1]) * f;
};
const labelsMatch = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

// Figures of the repository the fields rest on.
const stopBound = Number(text("docs/OPERATING.md").match(/TimeoutStopSec=(\d+)s/)[1]);
const capacity = text("docs/CAPACITY.md").replace(/\s+/g, " ");
const rssPeakMB = Number(capacity.match(/peak RSS of (\d+)–(\d+) MB/)[2]);
const drainLow = Number(capacity.match(/\*\*([\d,]+)–[\d,]+ events\/s\*\* over runs/)[1].replace(/,/g, ""));
const cpuPerMillion = Number(capacity.match(/\*\*([\d.]+)–([\d.]+) CPU s per million events\*\*/)[2]);
const composePartitions = Number(text("docker-compose.yml").match(/- --partitions\s*\n\s*- "(\d+)"/)[1]);
const freshnessTarget = Number(text("config/exposure-filter.yaml").match(/freshness_target: (\d+)s/)[1]);
// The Secret the manifests read: the example's keys, and the doc's create command.
const CREDENTIALS = "exposure-filter-credentials";
const exampleSecret = load(text("deploy/kubernetes/examples/credentials-secret.yaml"))[0];
const secretKeys = new Set(Object.keys(exampleSecret.stringData ?? {}));
const kubernetesDoc = text("docs/KUBERNETES.md");
check(exampleSecret.kind === "Secret" && exampleSecret.metadata.name === CREDENTIALS,
      `examples/credentials-secret.yaml is the Secret ${CREDENTIALS}`);
// Applied as it is (issue 50): the doc's command takes no flag.
check(/^kubectl apply -k deploy\/kubernetes\/overlays\/plain$/m.test(kubernetesDoc) &&
      !/load-restrictor/.test(kubernetesDoc),
      "docs/KUBERNETES.md applies with `kubectl apply -k deploy/kubernetes/overlays/plain`, no flag");
for (const key of secretKeys) {
  check(kubernetesDoc.includes(`--from-literal=${key}=`),
        `docs/KUBERNETES.md's kubectl create secret sets ${key}, a key of the example Secret`);
}
// The variables each component reads from the Secret (docs/CONFIG.md#environment).
const KAFKA_SECRET_VARS = {
  EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL: "kafka-security-protocol",
  EXPOSURE_FILTER_KAFKA_SASL_MECHANISM: "kafka-sasl-mechanism",
  EXPOSURE_FILTER_KAFKA_SASL_USERNAME: "kafka-sasl-username",
  EXPOSURE_FILTER_KAFKA_SASL_PASSWORD: "kafka-sasl-password",
};
const REDIS_SECRET_VARS = {
  EXPOSURE_FILTER_REDIS_USERNAME: "redis-username",
  EXPOSURE_FILTER_REDIS_PASSWORD: "redis-password",
};
const configVars = new Set([...text("docs/CONFIG.md").matchAll(/^\| `(EXPOSURE_FILTER_[A-Z_]+)` \|/gm)].map((m) => m[1]));
for (const v of [...Object.keys(KAFKA_SECRET_VARS), ...Object.keys(REDIS_SECRET_VARS)]) {
  check(configVars.has(v), `${v} is a variable of docs/CONFIG.md#environment`);
}

for (const [name, objs] of Object.entries(overlays)) {
  const run = find(objs, "Deployment", "exposure-filter");
  const serve = find(objs, "Deployment", "exposure-filter-serve");
  const content = find(objs, "Deployment", "exposure-filter-content");
  const deployments = [["run", run], ["serve", serve]];
  if (content) deployments.push(["content", content]);
  for (const [who, d] of deployments) {
    check(d, `${name}: ${who} Deployment`);
    if (!d) continue;
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    const probePath = (p) => p?.httpGet?.path;
    check(probePath(c.livenessProbe) === "/healthz",
          `${name}: ${who} liveness on /healthz (depends on nothing outside the process)`);
    check(probePath(c.readinessProbe) === "/readyz", `${name}: ${who} readiness on /readyz`);
    check(c.startupProbe && probePath(c.startupProbe), `${name}: ${who} startupProbe`);
    check(pod.securityContext?.runAsNonRoot === true && c.securityContext?.runAsNonRoot === true,
          `${name}: ${who} runAsNonRoot`);
    check(c.securityContext?.readOnlyRootFilesystem === true, `${name}: ${who} readOnlyRootFilesystem`);
    check(c.securityContext?.allowPrivilegeEscalation === false, `${name}: ${who} no privilege escalation`);
    check(JSON.stringify(c.securityContext?.capabilities?.drop) === '["ALL"]', `${name}: ${who} drops ALL capabilities`);
    check(pod.securityContext?.seccompProfile?.type === "RuntimeDefault" &&
          c.securityContext?.seccompProfile?.type === "RuntimeDefault", `${name}: ${who} seccomp RuntimeDefault`);
    check((pod.topologySpreadConstraints ?? []).some((t) => labelsMatch(t.labelSelector.matchLabels, d.spec.template.metadata.labels)),
          `${name}: ${who} topology spread over its own pods`);
    check(c.resources?.requests?.cpu && c.resources?.requests?.memory && c.resources?.limits?.memory,
          `${name}: ${who} resources (cpu and memory requests, memory limit)`);
    const secretVars = (c.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name);
    check(secretVars.includes("EXPOSURE_FILTER_REDIS_PASSWORD"), `${name}: ${who} Redis password from a Secret`);
    // Kafka SASL (issue 50): the consumers get protocol, mechanism, username and
    // password; everyone the Redis credentials; all optional, all from the one Secret.
    const wanted = who === "serve" ? REDIS_SECRET_VARS : { ...REDIS_SECRET_VARS, ...KAFKA_SECRET_VARS };
    for (const [v, key] of Object.entries(wanted)) {
      const ref = (c.env ?? []).find((e) => e.name === v)?.valueFrom?.secretKeyRef;
      check(ref?.name === CREDENTIALS && ref.key === key && ref.optional === true,
            `${name}: ${who} ${v} from Secret ${CREDENTIALS} key ${key}, optional`);
    }
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref) continue;
      check(ref.name === CREDENTIALS && secretKeys.has(ref.key),
            `${name}: ${who} ${e.name}'s Secret key ${ref.key} is in examples/credentials-secret.yaml`);
    }
    // The image is set by the base's `images:` (a registry placeholder).
    check(/^[a-z0-9.-]+\.[a-z]+(:[0-9]+)?\/.+:.+$/.test(c.image ?? ""),
          `${name}: ${who} image ${c.image} names a registry (base/kustomization.yaml images:)`);
    // Kafka TLS: an ssl.ca.location names a file of a mounted Secret.
    const caArg = (c.args ?? []).find((a) => a.startsWith("kafka.properties.ssl.ca.location="));
    if (caArg) {
      const path = caArg.split("=")[1];
      const mount = (c.volumeMounts ?? []).find((m) => path.startsWith(m.mountPath + "/"));
      const vol = pod.volumes?.find((v) => v.name === mount?.name);
      check(vol?.secret?.items?.some((i) => i.path === path.slice(mount.mountPath.length + 1)),
            `${name}: ${who} ssl.ca.location ${path} is a file of a mounted Secret`);
    }    const cm = pod.volumes?.find((v) => v.configMap)?.configMap?.name;
    const configMap = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === cm);
    check(configMap?.data?.["exposure-filter.yaml"] === text("config/exposure-filter.yaml"),
          `${name}: ${who} mounts the ConfigMap generated from config/exposure-filter.yaml`);
  }
  if (!run || !serve) continue;
  const pod = run.spec.template.spec;
  const c = pod.containers[0];
  check(pod.terminationGracePeriodSeconds > stopBound,
        `${name}: run terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} > documented stop bound ${stopBound} s`);
  const startupBudget = c.startupProbe.periodSeconds * c.startupProbe.failureThreshold;
  check(startupBudget >= 45 + 3,
        `${name}: run startupProbe covers the first group join (${startupBudget} s >= session timeout 45 s + join 3 s)`);
  check(quantity(c.resources.requests.memory) >= rssPeakMB * 1e6 &&
        quantity(c.resources.limits.memory) > quantity(c.resources.requests.memory),
        `${name}: run memory request >= measured peak RSS ${rssPeakMB} MB, limit above it`);
  const cores = (drainLow * cpuPerMillion) / 1e6;
  check(quantity(c.resources.requests.cpu) >= cores - 0.05,
        `${name}: run cpu request ${c.resources.requests.cpu} >= ${cores.toFixed(2)} cores (${drainLow} events/s x ${cpuPerMillion} CPU s per million)`);
  check((c.env ?? []).some((e) => e.name === "EXPOSURE_FILTER_KAFKA_SASL_PASSWORD" && e.valueFrom?.secretKeyRef),
        `${name}: run Kafka SASL password from a Secret`);
  const pdbOver = (d) => objs.find((o) => o.kind === "PodDisruptionBudget" &&
                                    labelsMatch(o.spec.selector.matchLabels, d.spec.template.metadata.labels));
  const pdb = pdbOver(run);
  check(pdb && pdb.spec.maxUnavailable === 1, `${name}: PodDisruptionBudget over the daemons, maxUnavailable 1`);
  // A not-ready daemon (idle standby, STALL while Redis is down) must not block a drain.
  check(pdb?.spec.unhealthyPodEvictionPolicy === "AlwaysAllow",
        `${name}: daemons' PodDisruptionBudget unhealthyPodEvictionPolicy AlwaysAllow`);
  const servePdb = pdbOver(serve);
  check(servePdb && servePdb !== pdb && servePdb.spec.maxUnavailable === 1 &&
        servePdb.spec.unhealthyPodEvictionPolicy === "AlwaysAllow",
        `${name}: serve PodDisruptionBudget, maxUnavailable 1, unhealthyPodEvictionPolicy AlwaysAllow`);
  const metricsPort = c.ports.find((p) => p.name === "metrics");
  const svc = find(objs, "Service", "exposure-filter");
  check(svc && labelsMatch(svc.spec.selector, run.spec.template.metadata.labels) &&
        svc.spec.ports.some((p) => p.targetPort === "metrics") && metricsPort,
        `${name}: metrics Service "exposure-filter" (the alerts' job) over the daemons' metrics port`);
  const serveSvc = find(objs, "Service", "exposure-filter-serve");
  check(serveSvc && labelsMatch(serveSvc.spec.selector, serve.spec.template.metadata.labels),
        `${name}: serve Service over the serve pods`);
  const hpa = objs.find((o) => o.kind === "HorizontalPodAutoscaler");
  check(hpa && hpa.spec.scaleTargetRef.name === "exposure-filter-serve" &&
        hpa.spec.metrics.some((m) => m.resource?.name === "cpu"), `${name}: serve HPA on CPU`);

  const so = objs.find((o) => o.kind === "ScaledObject");
  if (so) {
    const t = so.spec.triggers.find((t) => t.type === "kafka");
    const m = t?.metadata ?? {};
    check(so.spec.scaleTargetRef.name === "exposure-filter", `${name}: ScaledObject scales the daemons`);
    check(m.bootstrapServers && m.consumerGroup && m.topic && m.lagThreshold,
          `${name}: kafka trigger with bootstrapServers, consumerGroup, topic, lagThreshold`);
    const derived = Math.floor(drainLow * 0.5 * freshnessTarget);
    check(Number(m.lagThreshold) > 0 && Number(m.lagThreshold) <= derived && Number(m.lagThreshold) >= derived * 0.9,
          `${name}: lagThreshold ${m.lagThreshold} within 10% below ${drainLow} x 0.5 x ${freshnessTarget} s = ${derived}`);
    const partitions = Number(so.metadata.annotations?.["exposure-filter/topic-partitions"]);
    check(partitions > 0 && partitions <= composePartitions,
          `${name}: ScaledObject's topic partitions ${partitions} <= docker-compose.yml's ${composePartitions}`);
    check(so.spec.maxReplicaCount <= partitions,
          `${name}: maxReplicaCount ${so.spec.maxReplicaCount} <= partitions ${partitions}`);
    check(m.allowIdleConsumers !== "true", `${name}: KEDA never scales past the partitions`);
    // One daemon left nothing consuming for minutes after a node loss (issue 50).
    check(so.spec.minReplicaCount >= 2, `${name}: minReplicaCount ${so.spec.minReplicaCount} >= 2`);
    check(so.spec.minReplicaCount <= so.spec.maxReplicaCount, `${name}: minReplicaCount <= maxReplicaCount`);
    const ta = find(objs, "TriggerAuthentication", t?.authenticationRef?.name);
    check(ta, `${name}: TriggerAuthentication ${t?.authenticationRef?.name} exists`);
    // KEDA authenticates from the daemon's Secret: the same username and password keys.
    const param = (p) => ta?.spec.secretTargetRef.find((r) => r.parameter === p);
    for (const [p, key] of [["username", "kafka-sasl-username"], ["password", "kafka-sasl-password"],
                            ["sasl", "keda-sasl"], ["tls", "keda-tls"]]) {
      check(param(p)?.name === CREDENTIALS && param(p)?.key === key,
            `${name}: TriggerAuthentication ${p} from Secret ${CREDENTIALS} key ${key}`);
    }
    for (const r of ta?.spec.secretTargetRef ?? []) {
      if (r.name === CREDENTIALS) {
        check(secretKeys.has(r.key), `${name}: TriggerAuthentication's key ${r.key} is in examples/credentials-secret.yaml`);
      }
    }
    const runCa = c.args.find((a) => a.startsWith("kafka.properties.ssl.ca.location="));
    if (runCa) {
      const mount = c.volumeMounts.find((vm) => runCa.split("=")[1].startsWith(vm.mountPath + "/"));
      const vol = pod.volumes.find((v) => v.name === mount?.name);
      const file = runCa.split("=")[1].slice(mount.mountPath.length + 1);
      const key = vol?.secret?.items?.find((i) => i.path === file)?.key;
      check(param("ca")?.name === vol?.secret?.secretName && param("ca")?.key === key,
            `${name}: TriggerAuthentication ca is the daemons' ssl.ca.location (Secret ${vol?.secret?.secretName} key ${key})`);
    }
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
    check(m.bootstrapServers === env.EXPOSURE_FILTER_KAFKA_BOOTSTRAP_SERVERS,
          `${name}: trigger's bootstrapServers are the daemon's`);
  }
  const sm = objs.find((o) => o.kind === "ServiceMonitor");
  const rule = objs.find((o) => o.kind === "PrometheusRule");
  if (sm || rule) {
    check(sm && rule, `${name}: ServiceMonitor and PrometheusRule together`);
    // kube-prometheus-stack selects them by a label (release: ...): both carry the same.
    check(Object.keys(sm?.metadata.labels ?? {}).length > 0 &&
          JSON.stringify(sm?.metadata.labels) === JSON.stringify(rule?.metadata.labels),
          `${name}: ServiceMonitor and PrometheusRule carry the same labels (${JSON.stringify(sm?.metadata.labels)})`);
    const scraped = [svc, serveSvc];
    if (content) scraped.push(find(objs, "Service", "exposure-filter-content"));
    for (const s of scraped) {
      check(sm && labelsMatch(sm.spec.selector.matchLabels, s.metadata.labels) &&
            sm.spec.endpoints.some((e) => s.spec.ports.some((p) => p.name === e.port)),
            `${name}: ServiceMonitor scrapes Service ${s.metadata.name}`);
    }
    check(rule?.spec.groups.some((g) => g.name === "exposure-filter-serve"), `${name}: PrometheusRule has the serve alerts`);
  }
  const args = c.args.join(" ");
  if (/redis\.cluster=true/.test(args)) {
    const address = c.env.find((e) => e.name === "EXPOSURE_FILTER_REDIS_ADDRESS")?.value ?? "";
    check(address.split(",").length >= 2, `${name}: Redis Cluster seeds (${address.split(",").length})`);
    check(/redis\.wait_replicas=[1-9]/.test(args), `${name}: Redis Cluster with wait_replicas >= 1`);
  }
  if (content) {
    // docs/CONTENT.md "Items topic": one member per items topic, never two at once.
    const cc = content.spec.template.spec.containers[0];
    check(content.spec.replicas === 1, `${name}: content runs 1 replica (one member per items topic)`);
    check(content.spec.strategy?.type === "Recreate", `${name}: content updates by Recreate (never two members)`);
    check(cc.args[0] === "content", `${name}: content runs \`exposure-filter content\``);
    const contentSvc = find(objs, "Service", "exposure-filter-content");
    check(contentSvc && labelsMatch(contentSvc.spec.selector, content.spec.template.metadata.labels) &&
          contentSvc.spec.ports.some((p) => p.targetPort === "metrics") && cc.ports.some((p) => p.name === "metrics"),
          `${name}: metrics Service "exposure-filter-content" over content's metrics port`);
    check(cc.livenessProbe?.httpGet?.port === "metrics" && cc.readinessProbe?.httpGet?.port === "metrics",
          `${name}: content's probes on its metrics port`);
    for (const [who, d] of [["run", run], ["serve", serve]]) {
      check(d.spec.template.spec.containers[0].args.join(" ").includes("filter.near_duplicates=true"),
            `${name}: ${who} sets filter.near_duplicates=true (content fills what it reads)`);
    }
    // Same Redis as the daemon (components/redis-cluster patches content too).
    const redisOf = (x) => x.env.find((e) => e.name === "EXPOSURE_FILTER_REDIS_ADDRESS")?.value;
    check(redisOf(cc) === redisOf(c), `${name}: content writes to the daemons' Redis (${redisOf(cc)})`);
    check(/redis\.cluster=true/.test(cc.args.join(" ")) === /redis\.cluster=true/.test(args),
          `${name}: content and the daemons agree on redis.cluster`);
    const kafkaOf = (x) => x.env.find((e) => e.name === "EXPOSURE_FILTER_KAFKA_BOOTSTRAP_SERVERS")?.value;
    check(kafkaOf(cc) === kafkaOf(c), `${name}: content reads the daemons' Kafka`);
  }
  if (name === "content" || name === "full") {
    check(content, `${name}: the content component adds content's Deployment`);
  }
  if (name === "module" || name === "full") {
    check(/redis\.write_mode=module/.test(args), `${name}: the module component sets write_mode module`);
  }
  if (name === "plain") {
    check(!/redis\.write_mode=/.test(args), `${name}: the base keeps write_mode auto (falls back to bitop)`);
  }
}
check(Object.keys(overlays).length >= 6, `${Object.keys(overlays).length} overlays checked`);
console.log(failures ? `${failures} checks FAILED` : "every field set");
process.exit(failures ? 1 : 0);
