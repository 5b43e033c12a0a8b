// Applications: filter by namespace and labels (server-side, so the API sends only what is
// asked) and by state; a virtualised table renders only the rows in view.

import { ago, badge, fill, h, num, pageHead } from "../dom.js";
import { fleet, follow, LiveList } from "../live.js";
import { VirtualTable } from "../table.js";
import { degradedBadge, degradedOf } from "./parts.js";

const STATES = ["PENDING", "CREATING", "RUNNING", "RECONCILING", "MIGRATING", "DELETING", "DEGRADED", "FAILED", "COMPLETED"];
const filters = { namespace: "", selector: "", state: "" };  // kept while the tab is open

const COLUMNS = [
  { title: "Application", width: "minmax(180px, 2fr)", cell: (a) => [h("b", {}, a.metadata.name), h("span", { class: "muted" }, `  ${a.metadata.namespace}`)] },
  { title: "State", width: "140px", cell: (a) => [badge(a.status.state, a.status.reason ? a.status.reason.message : undefined), " ", degradedBadge(a.status)] },
  { title: "Cluster", width: "minmax(120px, 1fr)", cell: (a) => (a.status.placements || []).length > 1 ? a.status.placements.map((p) => `${p.cluster.name} (${p.ready_replicas ?? 0}/${p.replicas ?? "all"})`).join(", ") : a.status.scheduled_to ? a.status.scheduled_to.name : h("span", { class: "muted" }, "—") },
  { title: "Score", width: "90px", cell: (a) => h("span", { class: "mono" }, a.status.scheduling && a.status.scheduling.score != null ? num(a.status.scheduling.score) : "—") },
  { title: "Labels", width: "minmax(140px, 1.5fr)", cell: (a) => Object.entries(a.metadata.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ") },
  { title: "Why", width: "minmax(160px, 2fr)", cell: (a) => h("span", { class: "muted" }, a.status.reason ? a.status.reason.message : degradedOf(a.status) ? `Degraded: ${degradedOf(a.status).message}` : (a.status.scheduling || {}).summary || "") },
  { title: "Placed", width: "80px", cell: (a) => h("span", { class: "muted" }, a.status.scheduled ? ago(a.status.scheduled) : "—") },
];

export function render(root) {
  const table = new VirtualTable(COLUMNS, {
    onOpen: (a) => { location.hash = `#/applications/${encodeURIComponent(a.metadata.namespace)}/${encodeURIComponent(a.metadata.name)}`; },
    empty: "No application matches.",
  });
  const count = h("span", { class: "muted", id: "apps-count" });
  const namespace = h("select", { id: "filter-namespace", "aria-label": "Namespace" });
  const selector = h("input", { id: "filter-selector", placeholder: "label selector, e.g. tier=web,env!=dev", size: 34, value: filters.selector, "aria-label": "Label selector" });
  const state = h("select", { id: "filter-state", "aria-label": "State" }, h("option", { value: "" }, "every state"), STATES.map((s) => h("option", { value: s, selected: s === filters.state }, s)));
  root.append(
    pageHead("Applications", { sub: "Filter by namespace and labels (asked of the API) or by state." }),
    h("div", { class: "toolbar" }, namespace, selector, state, h("div", { class: "spacer" }), count),
    table.el);

  let source = null, own = null, off = () => {};
  const draw = () => {
    const apps = source.values().filter((a) => !filters.state || a.status.state === filters.state);
    apps.sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace) || a.metadata.name.localeCompare(b.metadata.name));
    table.setRows(apps);
    const error = source.error ? ` · ${source.error.message}` : "";
    count.textContent = `${apps.length.toLocaleString()} of ${source.items.size.toLocaleString()}${source.loaded ? "" : " (loading…)"}${error}`;
    const namespaces = new Set([...fleet.clusters.values(), ...fleet.applications.values()].map((o) => o.metadata.namespace));
    if (filters.namespace) namespaces.add(filters.namespace);
    const options = ["", ...[...namespaces].sort()];
    if (namespace.options.length !== options.length) {
      fill(namespace, options.map((ns) => h("option", { value: ns, selected: ns === filters.namespace }, ns || "every namespace")));
    }
  };
  const connect = () => {
    off();
    if (own) own.release();
    own = null;
    if (filters.namespace || filters.selector) {
      const path = filters.namespace ? `/kubernetes/namespaces/${encodeURIComponent(filters.namespace)}/applications` : "/kubernetes/applications";
      source = own = new LiveList(path, { selector: filters.selector }).acquire();
    } else {
      source = fleet.applications;
    }
    off = follow([source, fleet.clusters], draw);
  };
  namespace.addEventListener("change", () => { filters.namespace = namespace.value; connect(); });
  state.addEventListener("change", () => { filters.state = state.value; draw(); });
  selector.addEventListener("change", () => { filters.selector = selector.value.trim(); connect(); });
  connect();
  return () => { off(); if (own) own.release(); };
}

