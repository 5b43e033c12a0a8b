// Current metric values per cluster, and their history while the tab is open.
//
// A value comes from the provider's spec when it is a static provider (visible at once
// through the watch), otherwise from a dry run of an empty application, which ranks every
// cluster of a namespace with every score term. Dry runs follow the watch streams: they run
// again when a provider's status (a fetch), a metric or a cluster changes, never on a timer.

import { request } from "./api.js";
import { fleet, follow, peek } from "./live.js";

const HISTORY = 90;
const probed = new Map();  // "ns/cluster" → {metric: {value, normalised, weight}}
const history = new Map();  // "ns/cluster/metric" → [{t, v}]
const listeners = new Set();
let started = false;
let timer = null;

/** The metric object a cluster's reference names (namespaced or global). */
export function metricOf(ref, namespace) {
  const list = ref.namespaced ? fleet.metrics : fleet.globalMetrics;
  return list.items.get(`${ref.namespaced ? namespace : ""}/${ref.name}`) || null;
}

export function providerOf(metric) {
  if (!metric) return null;
  const ns = metric.metadata.namespace;
  const list = ns ? fleet.providers : fleet.globalProviders;
  return list.items.get(`${ns || ""}/${metric.spec.provider.name}`) || null;
}

export const normalise = (metric, value) =>
  metric && metric.spec.max > metric.spec.min ? (value - metric.spec.min) / (metric.spec.max - metric.spec.min) : null;

/** {value, normalised, weight, source} of one metric reference of a cluster, or null. */
export function valueOf(cluster, ref) {
  const ns = cluster.metadata.namespace;
  const metric = metricOf(ref, ns);
  const provider = providerOf(metric);
  const known = provider && provider.spec.type === "static" && provider.spec.static ? provider.spec.static.metrics : null;
  const key = metric ? metric.spec.provider.metric : ref.name;
  if (known && key in known) return { value: known[key], normalised: normalise(metric, known[key]), weight: ref.weight, source: "static" };
  const term = (probed.get(`${ns}/${cluster.metadata.name}`) || {})[ref.name];
  return term ? { ...term, weight: ref.weight, source: "dry run" } : null;
}

export const historyOf = (cluster, name) => history.get(`${cluster.metadata.namespace}/${cluster.metadata.name}/${name}`) || [];

const clusters = () => peek("/kubernetes/clusters").values();

function sample() {
  const t = Date.now();
  for (const cluster of clusters()) {
    for (const ref of cluster.spec.metrics || []) {
      const current = valueOf(cluster, ref);
      if (!current) continue;
      const key = `${cluster.metadata.namespace}/${cluster.metadata.name}/${ref.name}`;
      const points = history.get(key) || [];
      const last = points[points.length - 1];
      if (!last || last.v !== current.value || t - last.t > 5000) points.push({ t, v: current.value });
      if (points.length > HISTORY) points.shift();
      history.set(key, points);
    }
  }
  listeners.forEach((fn) => fn());
}

async function probe() {
  timer = null;
  const namespaces = new Set(clusters().map((c) => c.metadata.namespace));
  await Promise.all([...namespaces].map(async (ns) => {
    const body = { api: "kubernetes", kind: "Application", metadata: { name: "shoal-ui-probe", namespace: ns }, spec: { manifest: [] } };
    try {
      const result = await request("POST", `/scheduling/namespaces/${encodeURIComponent(ns)}/dryrun`, body);
      for (const entry of result.ranking || []) {
        probed.set(`${ns}/${entry.cluster}`, Object.fromEntries((entry.metrics || []).map((m) => [m.name, m])));
      }
    } catch { /* no dry run for a reader without the right: static values still show */ }
  }));
  sample();
}

/** Follow metric values (once); `fn()` after each new sample. */
export function onValues(fn) {
  listeners.add(fn);
  fleet.clusters, fleet.globalMetrics, fleet.globalProviders;  // followed while the page is
  if (!started) {
    started = true;
    const kinds = ["/kubernetes/clusters", "/core/globalmetrics", "/core/metrics", "/core/globalmetricsproviders", "/core/metricsproviders"];
    follow(kinds.map(peek), () => {
      sample();
      if (!timer) timer = setTimeout(probe, 300);
    });
  }
  return () => listeners.delete(fn);
}
