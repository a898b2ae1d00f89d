// Validates every object of the Kubernetes YAML read on stdin against its schema
// (kubernetes-models and @kubernetes-models/*, pinned in package-lock.json).
//   node validate.mjs < rendered.yaml     exit 0 when every object is valid
//   node validate.mjs --self-test         exit 0 when deliberately broken objects
//                                         are rejected (the validator can fail)
// Registered with ctest through scripts/check-kubernetes.sh (label stack).
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// apiVersion -> module holding its kinds.
const MODULES = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "policy/v1": "kubernetes-models/policy/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "keda.sh/v1alpha1": "@kubernetes-models/keda/keda.sh/v1alpha1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

async function validate(obj) {
  const where = `${obj?.kind}/${obj?.metadata?.name} (${obj?.apiVersion})`;
  const module = MODULES[obj?.apiVersion];
  if (!module) return `${where}: no schema known for apiVersion ${obj?.apiVersion}`;
  const models = await import(module);
  const Model = models[obj.kind];
  if (!Model) return `${where}: no schema for kind ${obj.kind} in ${module}`;
  try {
    new Model(obj).validate();
    return null;
  } catch (e) {
    return `${where}: ${e.message}`;
  }
}

async function main() {
  if (process.argv[2] === "--self-test") {
    const broken = [
      // a number where the schema wants an integer
      { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "x" },
        spec: { replicas: "two", selector: {}, template: {} } },
      // a container without its required name
      { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "x" },
        spec: { selector: {}, template: { spec: { containers: [{ image: "i" }] } } } },
      { apiVersion: "policy/v1", kind: "PodDisruptionBudget", metadata: { name: "x" },
        spec: { maxUnavailable: { a: 1 } } },
      { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", metadata: { name: "x" },
        spec: { maxReplicas: "ten", scaleTargetRef: { kind: "Deployment", name: "x" } } },
      { apiVersion: "keda.sh/v1alpha1", kind: "ScaledObject", metadata: { name: "x" },
        spec: { scaleTargetRef: { name: "x" }, maxReplicaCount: "six", triggers: [] } },
      { apiVersion: "monitoring.coreos.com/v1", kind: "PrometheusRule", metadata: { name: "x" },
        spec: { groups: [{ name: "g", rules: [{ alert: "A" }], interval: 5 }] } },
      { apiVersion: "monitoring.coreos.com/v1", kind: "ServiceMonitor", metadata: { name: "x" },
        spec: { endpoints: "metrics", selector: {} } },
      { apiVersion: "v1", kind: "Service", metadata: { name: "x" },
        spec: { ports: [{ port: "http" }] } },
    ];
    let fail = 0;
    for (const obj of broken) {
      const error = await validate(obj);
      if (error) {
        console.log(`rejected as it must: ${error.split("\n")[0]}`);
      } else {
        console.error(`NOT rejected: ${JSON.stringify(obj)}`);
        fail = 1;
      }
    }
    process.exit(fail);
  }
  const docs = parseAllDocuments(readFileSync(0, "utf8"));
  let fail = 0, count = 0;
  for (const doc of docs) {
    if (doc.errors.length) {
      console.error(`YAML error: ${doc.errors[0].message}`);
      fail = 1;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    count++;
    const error = await validate(obj);
    if (error) {
      console.error(error);
      fail = 1;
    }
  }
  if (count === 0) {
    console.error("no objects on stdin");
    fail = 1;
  }
  console.log(`${count} objects, ${fail ? "INVALID" : "all valid"}`);
  process.exit(fail);
}

main();
