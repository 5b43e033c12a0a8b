// One cluster: its labels, metrics with values and history, nodes, applications and events.

import { activity, onActivity } from "../activity.js";
import { sparkline } from "../charts.js";
import { ago, badge, bytes, card, chips, fill, h, link, num, pageHead } from "../dom.js";
import { fleet, follow } from "../live.js";
import { historyOf, metricOf, onValues, providerOf, valueOf } from "../values.js";
import { capacity, nodesOf } from "./clusters.js";
import { timeline } from "./parts.js";

const NOT_YET = "The API has no cordon or drain yet: this action arrives with it.";

export function render(root, namespace, name) {
  const key = `${namespace}/${name}`;
  const head = h("div"), info = h("div"), metrics = h("div"), nodes = h("div"), apps = h("div"), events = h("div");
  root.append(head,
    h("div", { class: "grid cols-2" }, card("Cluster", info), card("Metrics", metrics), card("Nodes", nodes), card("Applications here", apps)),
    h("div", { style: { marginTop: "16px" } }, card("Events", events)));

  const draw = () => {
    const c = fleet.clusters.items.get(key);
    if (!c) { fill(head, pageHead(name, { crumbs: link("Clusters", "clusters"), sub: fleet.clusters.loaded ? "No such cluster." : "Loading…" })); return; }
    fill(head, pageHead(name, {
      crumbs: [link("Clusters", "clusters"), " / ", namespace],
      sub: [badge(c.status.state), " ", c.status.reason ? c.status.reason.message : ""],
      actions: h("div", { class: "actions" },
        h("button", { class: "secondary", disabled: true, title: NOT_YET }, "Cordon"),
        h("button", { class: "secondary", disabled: true, title: NOT_YET }, "Drain")),
    }));
    fill(info, h("dl", { class: "kv" },
      h("dt", {}, "Labels"), h("dd", {}, chips(c.metadata.labels).length ? chips(c.metadata.labels) : h("span", { class: "muted" }, "none")),
      h("dt", {}, "Capacity"), h("dd", {}, capacity(c)),
      h("dt", {}, "Custom resources"), h("dd", {}, [...new Set([...(c.spec.custom_resources || []), ...(c.status.custom_resources || [])])].join(", ") || h("span", { class: "muted" }, "none")),
      h("dt", {}, "Registered"), h("dd", {}, `${ago(c.metadata.created)} ago`)));
    const refs = c.spec.metrics || [];
    fill(metrics, refs.length ? h("table", { class: "plain" },
      h("tr", {}, ["Metric", "Weight", "Value", "Normalised", "Range", "Provider", "History"].map((t) => h("th", {}, t))),
      refs.map((ref) => {
        const metric = metricOf(ref, namespace), provider = providerOf(metric), v = valueOf(c, ref);
        const failing = (c.status.metrics_reasons || {})[ref.name];
        return h("tr", {},
          h("td", {}, ref.name, ref.namespaced ? h("span", { class: "muted small" }, " (namespaced)") : null),
          h("td", { class: "num" }, num(ref.weight)),
          h("td", { class: "num mono" }, failing ? badge(failing.code, failing.message) : v ? num(v.value) : "—"),
          h("td", { class: "num mono" }, v && !failing ? num(v.normalised) : "—"),
          h("td", { class: "muted" }, metric ? `${num(metric.spec.min)} … ${num(metric.spec.max)}` : "unknown"),
          h("td", {}, provider ? `${provider.metadata.name} (${provider.spec.type})` : h("span", { class: "muted" }, "—")),
          h("td", {}, sparkline(historyOf(c, ref.name), metric ? { min: metric.spec.min, max: metric.spec.max } : {})));
      })) : h("div", { class: "empty" }, "This cluster has no metrics: it scores by stickiness alone."));
    const { summary: total, entries: list } = nodesOf(c);
    fill(nodes, list.length ? [h("table", { class: "plain" },
      h("tr", {}, ["Node", "Ready", "CPU", "Memory", "Pods"].map((t) => h("th", {}, t))),
      list.map((n) => h("tr", {}, h("td", { class: "mono" }, n.name), h("td", {}, n.ready ? badge("Ready") : badge("NOTREADY", (n.pressure || []).join(", "))),
        h("td", { class: "num" }, (n.allocatable || {}).cpu ?? "—"), h("td", { class: "num" }, bytes((n.allocatable || {}).memory)), h("td", { class: "num" }, (n.allocatable || {}).pods ?? "—")))),
      total && total.count > list.length ? h("div", { class: "muted small" }, `${list.length} of ${total.count} nodes shown`) : null]
      : h("div", { class: "empty" }, "No nodes observed yet."));
    const here = fleet.applications.values().filter((a) => a.metadata.namespace === namespace && a.status.scheduled_to && a.status.scheduled_to.name === name);
    fill(apps, here.length ? h("table", { class: "plain" }, h("tr", {}, h("th", {}, "Application"), h("th", {}, "State")),
      here.slice(0, 200).map((a) => h("tr", {}, h("td", {}, link(a.metadata.name, "applications", a.metadata.namespace, a.metadata.name)), h("td", {}, badge(a.status.state)))))
      : h("div", { class: "empty" }, "No applications run here."));
  };
  const drawEvents = () => fill(events, timeline(activity({ kind: "Cluster", namespace, name }, 100), "Nothing happened to this cluster since this page was opened."));
  const offs = [follow([fleet.clusters, fleet.applications], draw), onValues(draw), onActivity(drawEvents)];
  return () => offs.forEach((off) => off());
}
