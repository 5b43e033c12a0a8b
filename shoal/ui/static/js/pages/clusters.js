// Clusters: state, labels, metrics with their current normalised values, applications,
// nodes and capacity.

import { ago, badge, bytes, chips, countBy, fill, h, link, num, pageHead } from "../dom.js";
import { fleet, follow } from "../live.js";
import { onValues, valueOf } from "../values.js";

const PRESSURE = ["MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"];

/** One node of status.node_summary (Shoal's) or of status.nodes (Krake's shape: conditions). */
function nodeEntry(node) {
  if (!node.metadata) return node;
  const on = (type) => ((node.status || {}).conditions || []).some((c) => c.type === type && c.status === "True");
  return { name: node.metadata.name, ready: on("Ready"), pressure: PRESSURE.filter(on), capacity: {}, allocatable: {} };
}

/** {summary: {count, ready, capacity, allocatable} | null, entries: [{name, ready, ...}]} */
export function nodesOf(cluster) {
  const list = cluster.status.node_summary || cluster.status.nodes || [];
  const entries = list.filter((n) => !n.summary).map(nodeEntry);
  const summary = list.find((n) => n.summary)
    || (entries.length ? { count: entries.length, ready: entries.filter((e) => e.ready).length } : null);
  return { summary, entries };
}

export function capacity(cluster) {
  const s = nodesOf(cluster).summary;
  if (!s) return h("span", { class: "muted" }, "not observed yet");
  const cap = s.allocatable || s.capacity;
  return h("span", {}, `${s.ready}/${s.count} nodes ready`,
    cap ? h("div", { class: "muted small" }, `${num(cap.cpu, 1)} CPU · ${bytes(cap.memory)} · ${cap.pods ?? "—"} pods`) : null);
}

/** The metric references of a cluster, each with its weight and current normalised value. */
export function metricCells(cluster) {
  const refs = cluster.spec.metrics || [];
  if (!refs.length) return h("span", { class: "muted" }, "none");
  return refs.map((ref) => {
    const v = valueOf(cluster, ref);
    const failing = (cluster.status.metrics_reasons || {})[ref.name];
    return h("div", { class: "small", title: failing ? `${failing.code}: ${failing.message}` : v ? `value ${num(v.value)} (${v.source})` : "value not known yet", style: { display: "flex", gap: "8px", alignItems: "center" } },
      h("span", { style: { minWidth: "150px" } }, ref.name, h("span", { class: "muted" }, ` ×${num(ref.weight)}`)),
      failing ? badge(failing.code) : h("span", { class: "meter", style: { width: "70px" } }, h("span", { style: { width: `${100 * Math.min(1, Math.max(0, v ? v.normalised : 0))}%` } })),
      h("span", { class: "mono muted" }, v && !failing ? num(v.normalised, 2) : ""));
  });
}

export function render(root) {
  const body = h("tbody");
  root.append(
    pageHead("Clusters", { sub: "Registered Kubernetes clusters, as the cluster observer and the metric providers see them." }),
    h("section", { class: "card flush" }, h("table", { class: "plain", id: "clusters-table" },
      h("thead", {}, h("tr", {}, ["Cluster", "State", "Labels", "Metrics (weight, normalised)", "Apps", "Nodes and capacity"].map((t) => h("th", {}, t)))), body)));
  const draw = () => {
    // an application on several clusters counts on each of them
    const onEach = fleet.applications.values().flatMap((a) => (a.status.placements || []).length ? a.status.placements.map((p) => `${a.metadata.namespace}/${p.cluster.name}`) : a.status.scheduled_to ? [`${a.metadata.namespace}/${a.status.scheduled_to.name}`] : []);
    const placed = countBy(onEach, (key) => key);
    const clusters = fleet.clusters.values().sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    if (!clusters.length) { fill(body, h("tr", {}, h("td", { colspan: 6, class: "empty" }, fleet.clusters.loaded ? "No clusters registered." : "Loading…"))); return; }
    fill(body, clusters.map((c) => h("tr", { dataset: { cluster: c.metadata.name } },
      h("td", {}, link(c.metadata.name, "clusters", c.metadata.namespace, c.metadata.name), h("div", { class: "muted small" }, c.metadata.namespace,
        c.spec.mode === "pull" ? ` · pull${c.status.heartbeat ? `, heartbeat ${ago(c.status.heartbeat)} ago` : ""}` : null)),
      h("td", {}, badge(c.status.state, c.status.reason ? c.status.reason.message : undefined),
        c.spec.unschedulable ? [" ", badge("CORDONED", "no new applications are placed here")] : null),
      h("td", {}, chips(c.metadata.labels)),
      h("td", {}, metricCells(c)),
      h("td", { class: "num" }, placed[`${c.metadata.namespace}/${c.metadata.name}`] || 0),
      h("td", {}, capacity(c)))));
  };
  const offs = [follow([fleet.clusters, fleet.applications, fleet.globalMetrics, fleet.globalProviders], draw), onValues(draw)];
  return () => offs.forEach((off) => off());
}
