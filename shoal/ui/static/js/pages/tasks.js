// Reschedule tasks: progress of each, its targets' results, and a form to create one.

import { request } from "../api.js";
import { ago, badge, card, COLOURS, fill, h, pageHead, toast } from "../dom.js";
import { fleet, follow } from "../live.js";

function progress(s) {
  const total = s.total || 0;
  const part = (n, c) => h("span", { style: { width: `${total ? (100 * n) / total : 0}%`, background: c } });
  return h("div", {},
    h("div", { class: "progress" }, part(s.successful || 0, COLOURS.ok), part(s.failed || 0, COLOURS.bad)),
    h("div", { class: "muted small" }, `${(s.successful || 0) + (s.failed || 0)}/${total} done · ${s.successful || 0} moved · ${s.failed || 0} failed`));
}

function selectors(spec) {
  const parts = [];
  for (const r of spec.target_ref_resource || []) parts.push(`${r.namespace}/${r.name}`);
  for (const p of spec.target_ref_policy || []) parts.push(`${p.namespace}: ${p.label_selector || "every application"}`);
  for (const c of spec.target_clusters || []) parts.push(`on ${c}`);
  return parts.join(", ");
}

function form() {
  const namespace = h("input", { placeholder: "namespace", value: "default", size: 10, "aria-label": "Namespace" });
  const selector = h("input", { placeholder: "label selector (empty: all)", size: 22, "aria-label": "Label selector" });
  const cluster = h("input", { placeholder: "or: apps on cluster", size: 18, "aria-label": "Cluster" });
  const submit = h("button", { type: "submit" }, "Create task");
  return h("form", { class: "toolbar", id: "task-form", onsubmit: async (event) => {
    event.preventDefault();
    const spec = cluster.value.trim()
      ? { target_clusters: [cluster.value.trim()] }
      : { target_ref_policy: [{ namespace: namespace.value.trim() || "default", label_selector: selector.value.trim() }] };
    submit.disabled = true;
    try {
      await request("POST", "/scheduling/rescheduletasks", { api: "scheduling", kind: "RescheduleTask", metadata: { name: `ui-${Date.now().toString(36)}` }, spec });
      toast("Reschedule task created");
    } catch (error) { toast(`Not created: ${error.message}`, true); } finally { submit.disabled = false; }
  } }, namespace, selector, cluster, submit);
}

export function render(root) {
  const body = h("div");
  root.append(pageHead("Reschedule tasks", { sub: "Place chosen applications again as if new (stickiness off, constraints kept)." }),
    card("New task", form()), h("div", { style: { marginTop: "16px" } }, h("section", { class: "card flush" }, body)));
  const draw = () => {
    const tasks = fleet.tasks.values().sort((a, b) => (a.metadata.created < b.metadata.created ? 1 : -1));
    if (!tasks.length) { fill(body, h("div", { class: "empty", style: { padding: "16px" } }, fleet.tasks.loaded ? "No reschedule tasks." : "Loading…")); return; }
    fill(body, h("table", { class: "plain", id: "tasks-table" },
      h("tr", {}, ["Task", "Phase", "Targets", "Progress", "Created"].map((t) => h("th", {}, t))),
      tasks.map((t) => {
        const s = t.status || {};
        const failed = (s.targets || []).filter((x) => x.result === "Failed");
        return h("tr", { dataset: { task: t.metadata.name } },
          h("td", {}, h("b", {}, t.metadata.name), failed.length ? h("details", {}, h("summary", {}, `${failed.length} failed`),
            failed.slice(0, 20).map((x) => h("div", { class: "small" }, `${x.namespace}/${x.name}: ${x.reason}${x.message ? ` (${x.message})` : ""}`))) : null),
          h("td", {}, badge(s.phase || "Pending")),
          h("td", { class: "small" }, selectors(t.spec)),
          h("td", {}, progress(s)),
          h("td", { class: "muted" }, `${ago(t.metadata.created)} ago`));
      })));
  };
  return follow([fleet.tasks], draw);
}
