// One cluster: its labels, metrics with values and history, nodes, applications and events.

import { ApiError, request } from "../api.js";
import { activity, onActivity, serverEvents } from "../activity.js";
import { sparkline } from "../charts.js";
import { ago, badge, bytes, card, chips, fill, h, link, num, pageHead, toast } from "../dom.js";
import { fleet, follow } from "../live.js";
import { historyOf, metricOf, onValues, providerOf, valueOf } from "../values.js";
import { capacity, nodesOf } from "./clusters.js";
import { timeline } from "./parts.js";

const path = (ns, name) => `/kubernetes/namespaces/${encodeURIComponent(ns)}/clusters/${encodeURIComponent(name)}`;

/** Set spec.unschedulable: read, change, write back with its resource_version (again on 409). */
async function setUnschedulable(namespace, name, value) {
  for (let attempt = 0; ; attempt++) {
    const cluster = await request("GET", path(namespace, name));
    if (Boolean(cluster.spec.unschedulable) === value) return cluster;
    cluster.spec.unschedulable = value;
    try { return await request("PUT", path(namespace, name), cluster); } catch (error) {
      if (!(error instanceof ApiError && error.status === 409) || attempt >= 5) throw error;
    }
  }
}

/** Cordon, then a RescheduleTask for every application on the cluster (as `shoal kube cluster drain`). */
async function drain(namespace, name) {
  await setUnschedulable(namespace, name, true);
  const stamp = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
  return request("POST", "/scheduling/rescheduletasks", {
    api: "scheduling", kind: "RescheduleTask",
    metadata: { name: `drain-${name}`.slice(0, 48).replace(/-+$/, "") + `-${stamp}` },
    spec: { target_clusters: [`${namespace}/${name}`] },
  });
}

async function act(button, label, fn) {
  button.disabled = true;
  try { const done = await fn(); toast(typeof label === "function" ? label(done) : label); } catch (error) { toast(`Failed: ${error.message}`, true); } finally { button.disabled = false; }
}

export function render(root, namespace, name) {
  const key = `${namespace}/${name}`;
  const cordon = h("button", { class: "secondary", id: "cordon" });
  cordon.addEventListener("click", () => {
    const value = !cordon.dataset.cordoned;
    act(cordon, value ? "Cordoned: no new applications go there" : "Uncordoned", () => setUnschedulable(namespace, name, value));
  });
  // Draining moves applications: a second click within five seconds confirms it.
  const drainButton = h("button", { class: "secondary", id: "drain", title: "Cordon, then move every application here elsewhere (a RescheduleTask)" }, "Drain");
  let armed = null;
  drainButton.addEventListener("click", () => {
    if (!armed) {
      drainButton.textContent = "Confirm drain";
      drainButton.classList.add("danger");
      armed = setTimeout(() => { armed = null; drainButton.textContent = "Drain"; drainButton.classList.remove("danger"); }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    drainButton.textContent = "Drain";
    drainButton.classList.remove("danger");
    act(drainButton, (task) => `Draining: reschedule task ${task.metadata.name}`, () => drain(namespace, name));
  });
  const head = h("div"), info = h("div"), metrics = h("div"), nodes = h("div"), apps = h("div"), events = h("div");
  root.append(head,
    h("div", { class: "grid cols-2" }, card("Cluster", info), card("Metrics", metrics), card("Nodes", nodes), card("Applications here", apps)),
    h("div", { style: { marginTop: "16px" }, id: "events" }, card("Events", events)));

  const draw = () => {
    const c = fleet.clusters.items.get(key);
    if (!c) { fill(head, pageHead(name, { crumbs: link("Clusters", "clusters"), sub: fleet.clusters.loaded ? "No such cluster." : "Loading…" })); return; }
    const cordoned = Boolean(c.spec.unschedulable);
    const here = fleet.applications.values().filter((a) => a.metadata.namespace === namespace && ((a.status.scheduled_to && a.status.scheduled_to.name === name) || (a.status.placements || []).some((p) => p.cluster.name === name)));
    const running = fleet.applications.values().filter((a) => a.metadata.namespace === namespace && a.status.running_on && a.status.running_on.name === name);
    if (cordoned) cordon.dataset.cordoned = "yes"; else delete cordon.dataset.cordoned;
    cordon.textContent = cordoned ? "Uncordon" : "Cordon";
    cordon.title = cordoned ? "Let the cluster take new applications again" : "Take no new applications here (those here stay)";
    const left = new Set([...here, ...running].map((a) => a.metadata.name)).size;
    fill(head, pageHead(name, {
      crumbs: [link("Clusters", "clusters"), " / ", namespace],
      sub: [badge(c.status.state), " ", cordoned ? [badge("CORDONED", "spec.unschedulable: no new applications are placed here"), " "] : "",
        c.status.reason ? c.status.reason.message : "",
        cordoned ? h("span", { class: "muted", id: "left" }, left ? ` ${left} application${left === 1 ? "" : "s"} still here` : " empty") : ""],
      actions: h("div", { class: "actions" }, cordon, drainButton),
    }));
    fill(info, h("dl", { class: "kv" },
      h("dt", {}, "Labels"), h("dd", {}, chips(c.metadata.labels).length ? chips(c.metadata.labels) : h("span", { class: "muted" }, "none")),
      h("dt", {}, "Capacity"), h("dd", {}, capacity(c)),
      h("dt", {}, "Custom resources"), h("dd", {}, [...new Set([...(c.spec.custom_resources || []), ...(c.status.custom_resources || [])])].join(", ") || h("span", { class: "muted" }, "none")),
      h("dt", {}, "Mode"), h("dd", {}, c.spec.mode === "pull" ? "pull (its agent dials the hub)" : "push (the hub dials it)"),
      c.spec.mode === "pull" ? [
        h("dt", {}, "Agent"), h("dd", {}, c.status.agent_version || h("span", { class: "muted" }, "not heard from yet")),
        h("dt", {}, "Last heartbeat"), h("dd", {}, c.status.heartbeat ? `${ago(c.status.heartbeat)} ago` : h("span", { class: "muted" }, "none yet"))] : null,
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
    fill(apps, here.length ? h("table", { class: "plain" }, h("tr", {}, h("th", {}, "Application"), h("th", {}, "State")),
      here.slice(0, 200).map((a) => h("tr", {}, h("td", {}, link(a.metadata.name, "applications", a.metadata.namespace, a.metadata.name)), h("td", {}, badge(a.status.state)))))
      : h("div", { class: "empty" }, "No applications run here."));
  };
  const about = { kind: "Cluster", namespace, name };
  const current = () => {  // this cluster's events: those of its uid, not a deleted namesake's
    const c = fleet.clusters.items.get(key);
    return { ...about, uid: c ? c.metadata.uid : undefined };
  };
  const drawEvents = () => fill(events, timeline(activity(current(), 100),
    serverEvents(about) ? "No events (they are kept an hour)." : "Nothing happened to this cluster since this page was opened."));
  const offs = [follow([fleet.clusters, fleet.applications], draw), onValues(draw), onActivity(drawEvents, about)];
  return () => offs.forEach((off) => off());
}
