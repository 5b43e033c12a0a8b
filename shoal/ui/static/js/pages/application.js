// One application: where it runs and why (the decision as ranked score terms and the
// rejections), its events, its migrations, and the actions on it.

import { request } from "../api.js";
import { activity, migrations, onActivity, serverEvents } from "../activity.js";
import { ago, badge, card, clock, fill, h, link, pageHead, toast } from "../dom.js";
import { fleet, follow } from "../live.js";
import { degradedBadge, degradedOf, explanation, timeline } from "./parts.js";

// How a move of an application on several clusters is named in its history.
const MOVED = { ShareMoved: "share moved", Rebalanced: "rebalanced" };

const base = (ns, name) => `/kubernetes/namespaces/${encodeURIComponent(ns)}/applications/${encodeURIComponent(name)}`;

/** The namespace's clusters as they are now, by name: what the last decision saw may have
 * changed since (a cluster back ONLINE), and the decision panel says so. */
function clustersOf(namespace) {
  if (!fleet.clusters.loaded) return null;
  return new Map(fleet.clusters.values().filter((c) => (c.metadata.namespace || "default") === namespace).map((c) => [c.metadata.name, c]));
}

async function act(button, label, fn) {
  button.disabled = true;
  try { await fn(); toast(label); } catch (error) { toast(`${label} failed: ${error.message}`, true); } finally { button.disabled = false; }
}

export function render(root, namespace, name) {
  const key = `${namespace}/${name}`;
  const head = h("div"), decision = h("div"), moves = h("div"), events = h("div"), details = h("div");
  let dryRun = null;  // the last dry run's answer, shown instead of status.scheduling
  const decisionTitle = h("h2", {}, "Scheduling decision");
  root.append(head,
    h("div", { class: "grid cols-3" },
      h("section", { class: "card span-2", id: "decision" }, decisionTitle, decision),
      h("section", { class: "card", id: "migrations" }, h("h2", {}, "Migration history"), moves)),
    h("div", { class: "grid cols-3", style: { marginTop: "16px" } },
      h("section", { class: "card span-2", id: "events" }, h("h2", {}, "Events"), events),
      card("Details", details)));

  let app = fleet.applications.items.get(key) || null;
  request("GET", base(namespace, name)).then((found) => { if (!app || found.metadata.resource_version > app.metadata.resource_version) { app = found; draw(); } }).catch(() => {});

  const reschedule = h("button", { id: "reschedule", title: "Place it again now as if new: stickiness off, constraints kept" }, "Reschedule now");
  reschedule.addEventListener("click", () => act(reschedule, "Reschedule requested", () =>
    request("PUT", `${base(namespace, name)}/reschedule`, { requested: new Date().toISOString() })));
  const retry = h("button", { id: "retry", title: "A FAILED application is scheduled again with its retries reset" }, "Retry");
  retry.addEventListener("click", () => act(retry, "Retry requested", () => request("PUT", `${base(namespace, name)}/retry`)));
  const task = h("button", { class: "secondary", id: "create-task", title: "A RescheduleTask for this application, shown on the tasks page" }, "Create reschedule task");
  task.addEventListener("click", () => act(task, "Reschedule task created", () => request("POST", "/scheduling/rescheduletasks", {
    api: "scheduling", kind: "RescheduleTask",
    metadata: { name: `ui-${name}`.slice(0, 48).replace(/-+$/, "") + `-${Date.now().toString(36)}` },
    spec: { target_ref_resource: [{ api: "kubernetes", kind: "Application", namespace, name }] },
  })));
  const explain = h("button", { class: "secondary", id: "dry-run", title: "Rank every cluster now with every score term (binds nothing)" }, "Explain now");
  explain.addEventListener("click", () => act(explain, "Dry run done", async () => {
    dryRun = await request("POST", `/scheduling/namespaces/${encodeURIComponent(namespace)}/dryrun`, { ...app, status: undefined });
    draw();
  }));

  const draw = () => {
    app = fleet.applications.items.get(key) || app;
    if (!app) { fill(head, pageHead(name, { crumbs: link("Applications", "applications"), sub: fleet.applications.loaded ? "No such application." : "Loading…" })); return; }
    const s = app.status;
    const on = s.scheduled_to ? s.scheduled_to.name : null;
    fill(head, pageHead(name, {
      crumbs: [link("Applications", "applications"), " / ", namespace],
      sub: [badge(s.state), " ", degradedBadge(s), degradedOf(s) ? " " : "", (s.placements || []).length > 1
        ? ["on ", s.placements.flatMap((p, i) => [i ? ", " : "", link(p.cluster.name, "clusters", p.cluster.namespace || namespace, p.cluster.name)])]
        : on ? ["on ", link(on, "clusters", s.scheduled_to.namespace || namespace, on)] : "not placed", s.reason ? h("span", { class: "muted" }, ` · ${s.reason.message || s.reason.code}`) : ""],
      actions: h("div", { class: "actions" }, explain, task, s.state === "FAILED" ? retry : reschedule),
    }));
    decisionTitle.textContent = dryRun ? "Dry run: where it would go now" : "Scheduling decision";
    fill(decision, explanation(dryRun || s.scheduling, on, dryRun ? null : clustersOf(namespace)),
      dryRun ? h("div", { style: { marginTop: "12px" } }, h("button", { class: "secondary", onclick: () => { dryRun = null; draw(); } }, "Back to the last decision")) : null);
    const c = app.spec.constraints || {};
    const cc = c.cluster || {};
    const health = s.container_health || {};
    fill(details, h("dl", { class: "kv" },
      h("dt", {}, "Label constraints"), h("dd", { class: "mono" }, (cc.labels || []).join("; ") || "—"),
      h("dt", {}, "Metric constraints"), h("dd", { class: "mono" }, (cc.metrics || []).join("; ") || "—"),
      h("dt", {}, "Migration"), h("dd", {}, c.migration === false ? "pinned" : "allowed"),
      h("dt", {}, "Pods"), h("dd", {}, `${health.running_pods || 0}/${health.desired_pods || 0} running`),
      degradedOf(s) ? [h("dt", {}, "Degraded"), h("dd", { id: "degraded" }, degradedOf(s).message,
        degradedOf(s).since ? h("span", { class: "muted" }, ` · since ${clock(degradedOf(s).since)} (${ago(degradedOf(s).since)} ago)`) : "")] : null,
      (s.placements || []).length ? [h("dt", {}, "Placements"), h("dd", { id: "placements" }, h("ul", { class: "plain" }, s.placements.map((p) =>
        h("li", {}, link(p.cluster.name, "clusters", p.cluster.namespace || namespace, p.cluster.name),
          ` ${p.ready_replicas ?? 0}/${p.replicas ?? "all"} ready `, badge(p.state || "PENDING"),
          p.reason ? h("span", { class: "muted" }, ` · ${p.reason.message || p.reason.code}`) : "")))),
      ] : null,
      h("dt", {}, "Placed"), h("dd", {}, s.scheduled ? `${clock(s.scheduled)} (${ago(s.scheduled)} ago)` : "—"),
      h("dt", {}, "Last pass"), h("dd", {}, s.last_scheduled ? `${ago(s.last_scheduled)} ago` : "—"),
      h("dt", {}, "Failed attempts"), h("dd", {}, s.scheduler_attempts ?? 0, s.next_retry ? h("span", { class: "muted" }, ` · next try ${clock(s.next_retry)}`) : ""),
      h("dt", {}, "Labels"), h("dd", {}, Object.entries(app.metadata.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ") || "—")));
    drawActivity();
  };
  const drawActivity = () => {
    // its own events: those of its uid, not of an application deleted before under its name
    const about = { kind: "Application", namespace, name, uid: app ? app.metadata.uid : undefined };
    const moved = migrations(about);
    fill(moves, moved.length
      ? h("ul", { class: "timeline" }, moved.map((m) => h("li", { class: "move", title: m.message },
          h("div", {}, m.from && m.to ? [h("b", {}, m.from), " → ", h("b", {}, m.to)] : m.message,
            MOVED[m.reason] ? h("span", { class: "muted small" }, ` · ${MOVED[m.reason]}`) : null,
            m.count > 1 ? h("span", { class: "muted small" }, ` ×${m.count}`) : null),
          m.from && m.component ? h("div", { class: "small" }, m.message.replace(/^Migrated /, "")) : null,
          h("div", { class: "muted small" }, `${clock(m.time)} · ${ago(m.time)} ago`))))
      : h("div", { class: "empty" }, app && app.status.scheduled_to ? `On ${app.status.scheduled_to.name} since ${ago(app.status.scheduled)} ago; ${serverEvents(about) ? "no migration in its events (kept an hour)" : "no migration seen since this page was opened"}.` : "Not placed yet."));
    fill(events, timeline(activity(about, 100), serverEvents(about) ? "No events (they are kept an hour)." : "Nothing happened to this application since this page was opened."));
  };
  const offs = [follow([fleet.applications, fleet.clusters], draw), onActivity(drawActivity, { kind: "Application", namespace, name })];
  return () => offs.forEach((off) => off());
}
