// Overview: the fleet at a glance: clusters and applications by state, where applications
// run (one tile per cluster, sized by its applications), and what just happened.

import { activity, eventsPartial, onActivity, serverEvents } from "../activity.js";
import { colour, countBy, fill, h, pageHead, stateStack, tone } from "../dom.js";
import { fleet, follow } from "../live.js";
import { treemap } from "../charts.js";
import { feed } from "./parts.js";

const DOTS = 60;  // one square per application up to this many on a cluster, else counts per state
// every cluster an application is placed on (several with spec.placement)
const refs = (app) => (app.status.placements || []).length ? app.status.placements.map((p) => p.cluster) : app.status.scheduled_to ? [app.status.scheduled_to] : [];
const placedOn = (app) => refs(app).map((ref) => `${ref.namespace || app.metadata.namespace}/${ref.name}`);

export function render(root) {
  const stats = h("div", { class: "grid cols-4" });
  const map = h("div");
  const events = h("div");
  const title = h("h2", {}, "Live events");
  root.append(
    pageHead("Fleet overview", { sub: "Clusters, applications and placements, live from the API's watch streams." }),
    stats,
    h("div", { class: "grid cols-3", style: { marginTop: "16px" } },
      h("section", { class: "card span-2" }, h("h2", {}, "Placement map"), map),
      h("section", { class: "card" }, title, events)),
  );

  let mapKey = "";
  const draw = () => {
    const clusters = fleet.clusters.values();
    const apps = fleet.applications.values();
    const appStates = countBy(apps, (a) => a.status.state);
    const clusterStates = countBy(clusters, (c) => c.status.state);
    const running = appStates.RUNNING || 0;
    fill(stats,
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Clusters"), h("div", { class: "value", id: "stat-clusters" }, clusters.length), stateStack(clusterStates)),
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Applications"), h("div", { class: "value", id: "stat-apps" }, apps.length), stateStack(appStates)),
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Running"), h("div", { class: "value" }, running),
        h("div", { class: "muted small" }, apps.length ? `${Math.round((100 * running) / apps.length)}% of applications` : "no applications yet")),
      h("section", { class: "card stat" }, h("div", { class: "label" }, "Waiting for a cluster"), h("div", { class: "value" }, apps.filter((a) => !a.status.scheduled_to).length),
        h("div", { class: "muted small" }, "not placed (pending, retrying or failed)")),
    );
    const perCluster = {};
    for (const app of apps) for (const on of placedOn(app)) (perCluster[on] ||= []).push(app);
    const floor = Math.max(0.35, (0.25 * apps.length) / Math.max(1, clusters.length));  // empty clusters stay visible
    const tiles = clusters.map((c) => {
      const key = `${c.metadata.namespace}/${c.metadata.name}`;
      const here = perCluster[key] || [];
      const n = here.length;
      return {
        label: c.metadata.name, sub: `${n} app${n === 1 ? "" : "s"} · ${c.status.state}${c.spec.unschedulable ? " · cordoned" : ""}`, value: Math.max(n, floor),
        tone: c.spec.unschedulable && tone(c.status.state) === "ok" ? "warn" : tone(c.status.state), href: `#/clusters/${encodeURIComponent(c.metadata.namespace)}/${encodeURIComponent(c.metadata.name)}`,
        title: `${key}: ${n} applications, ${c.status.state}`,
        states: countBy(here, (a) => a.status.state),
        body: () => n > DOTS ? stateStack(countBy(here, (a) => a.status.state))
          : h("div", { class: "t-dots" }, here.map((a) => h("i", { title: `${a.metadata.name}: ${a.status.state}`, style: { background: colour(a.status.state) } }))),
      };
    });
    const nextKey = JSON.stringify(tiles.map((t) => [t.label, t.sub, t.tone, t.states, t.value]));
    if (nextKey !== mapKey) {
      mapKey = nextKey;
      fill(map, clusters.length ? treemap(tiles, 320) : h("div", { class: "empty" }, "No clusters registered yet."));
    }
  };
  const drawEvents = () => {
    title.textContent = serverEvents() ? "Live events" : "Live changes";
    fill(events, feed(activity({}, 60), "Changes appear here as they happen."),
      eventsPartial() ? h("div", { class: "muted small", style: { marginTop: "8px" } },
        "Too many stored events to list them all: these are the newest. Each application and cluster page lists its own.") : null);
  };
  const offs = [follow([fleet.clusters, fleet.applications], draw), onActivity(drawEvents)];
  return () => offs.forEach((off) => off());
}
