// Fleet pods (pods placed onto nodes across clusters by the agents): pods by phase, and the
// use of each cluster's nodes: pods and requested CPU and memory against what is allocatable.

import { badge, bytes, card, COLOURS, countBy, fill, h, link, num, pageHead, stateStack } from "../dom.js";
import { fleet, follow } from "../live.js";
import { nodesOf } from "./clusters.js";

const SUFFIX = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };

/** A Kubernetes quantity ("100m", "128Mi", "2") as a number. */
export function quantity(text) {
  const found = /^([0-9.]+)([a-zA-Z]*)$/.exec(String(text ?? "").trim());
  if (!found) return 0;
  return Number(found[1]) * (SUFFIX[found[2]] ?? 1);
}

/** What a pod requests: the sum over its containers. */
function requests(pod) {
  let cpu = 0, memory = 0;
  for (const c of pod.spec.containers || []) {
    const r = (c.resources || {}).requests || {};
    cpu += quantity(r.cpu);
    memory += quantity(r.memory);
  }
  return { cpu, memory };
}

function meter(used, total, label) {
  const share = total ? Math.min(1, used / total) : 0;
  const tone = share > 0.9 ? COLOURS.bad : share > 0.7 ? COLOURS.warn : COLOURS.ok;
  return h("div", { class: "small", title: `${Math.round(100 * share)}%`, style: { display: "flex", gap: "8px", alignItems: "center" } },
    h("span", { class: "meter", style: { width: "110px" } }, h("span", { style: { width: `${100 * share}%`, background: tone } })),
    label);
}

/** Per cluster: its pods, the requests summed per node, and the nodes' allocatable. */
function use(pods) {
  const out = new Map();
  for (const pod of pods) {
    const s = pod.status || {};
    if (s.phase !== "Scheduled" || !s.cluster) continue;
    const key = `${pod.metadata.namespace}/${s.cluster}`;
    if (!out.has(key)) out.set(key, { pods: 0, cpu: 0, memory: 0, nodes: new Map() });
    const c = out.get(key), r = requests(pod);
    c.pods++; c.cpu += r.cpu; c.memory += r.memory;
    const n = c.nodes.get(s.node) || { pods: 0, cpu: 0, memory: 0 };
    n.pods++; n.cpu += r.cpu; n.memory += r.memory;
    c.nodes.set(s.node, n);
  }
  return out;
}

export function render(root) {
  const stats = h("div", { class: "grid cols-3" }), clusters = h("div", { class: "grid cols-2", id: "pod-clusters" }), waiting = h("div");
  root.append(
    pageHead("Fleet pods", { sub: "Pods placed onto nodes of many clusters by the cluster agents (fleet mode), and how full each cluster's nodes are." }),
    stats, h("div", { style: { marginTop: "16px" } }, clusters),
    h("div", { style: { marginTop: "16px" }, id: "pods-waiting" }, card("Not placed", waiting)));

  const draw = () => {
    const pods = fleet.pods.values();
    const phases = countBy(pods, (p) => (p.status || {}).phase || "Pending");
    fill(stats,
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Pods"), h("div", { class: "value", id: "stat-pods" }, pods.length), stateStack(phases)),
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Scheduled"), h("div", { class: "value" }, phases.Scheduled || 0)),
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Pending or failed"), h("div", { class: "value" }, (phases.Pending || 0) + (phases.Failed || 0))));
    const used = use(pods);
    const agents = fleet.clusters.values().filter((c) => used.has(`${c.metadata.namespace}/${c.metadata.name}`) || c.status.agent)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    fill(clusters, agents.length ? agents.map((c) => {
      const u = used.get(`${c.metadata.namespace}/${c.metadata.name}`) || { pods: 0, cpu: 0, memory: 0, nodes: new Map() };
      const { summary, entries } = nodesOf(c);
      const cap = summary ? summary.allocatable || summary.capacity || {} : {};
      const byName = new Map(entries.map((n) => [n.name, n]));
      const rows = [...u.nodes.entries()].sort((a, b) => b[1].cpu - a[1].cpu).slice(0, 12);
      return h("section", { class: "card", dataset: { cluster: c.metadata.name } },
        h("h2", {}, link(c.metadata.name, "clusters", c.metadata.namespace, c.metadata.name), " ", badge(c.status.state)),
        h("div", { class: "kv" },
          h("dt", {}, "Pods"), h("dd", { class: "pods" }, `${u.pods} on ${u.nodes.size} of ${summary ? summary.count : "?"} nodes`),
          h("dt", {}, "CPU"), h("dd", {}, meter(u.cpu, quantity(cap.cpu), `${num(u.cpu, 2)} of ${num(quantity(cap.cpu), 1)} requested`)),
          h("dt", {}, "Memory"), h("dd", {}, meter(u.memory, quantity(cap.memory), `${bytes(u.memory)} of ${bytes(quantity(cap.memory))}`))),
        rows.length ? h("table", { class: "plain", style: { marginTop: "10px" } },
          h("tr", {}, ["Node", "Pods", "CPU requested", "Memory requested"].map((t) => h("th", {}, t))),
          rows.map(([name, n]) => {
            const alloc = (byName.get(name) || {}).allocatable || {};
            return h("tr", {}, h("td", { class: "mono" }, name), h("td", { class: "num" }, n.pods),
              h("td", {}, meter(n.cpu, quantity(alloc.cpu), `${num(n.cpu, 2)}${alloc.cpu ? ` / ${alloc.cpu}` : ""}`)),
              h("td", {}, meter(n.memory, quantity(alloc.memory), bytes(n.memory))));
          })) : h("div", { class: "empty" }, "No fleet pod on this cluster."),
        u.nodes.size > rows.length ? h("div", { class: "muted small" }, `the ${rows.length} nodes with most CPU requested of ${u.nodes.size}`) : null);
    }) : h("div", { class: "empty" }, fleet.pods.loaded ? "No fleet pod placed yet (agents: shoal agent --cluster NAME, or shoal up)." : "Loading…"));
    const stuck = pods.filter((p) => (p.status || {}).phase !== "Scheduled").slice(0, 100);
    fill(waiting, stuck.length ? h("table", { class: "plain" },
      h("tr", {}, ["Pod", "Phase", "Attempts", "Reason"].map((t) => h("th", {}, t))),
      stuck.map((p) => h("tr", {}, h("td", { class: "mono" }, `${p.metadata.namespace}/${p.metadata.name}`), h("td", {}, badge((p.status || {}).phase || "Pending")),
        h("td", { class: "num" }, (p.status || {}).attempts || 0), h("td", { class: "muted" }, (p.status || {}).reason || ""))))
      : h("div", { class: "empty" }, "Every fleet pod is placed."));
  };
  return follow([fleet.pods, fleet.clusters], draw);
}
