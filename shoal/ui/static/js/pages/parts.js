// Pieces several pages show: the event feed and timeline, the explanation of a decision.

import { ago, badge, clock, h, link, num } from "../dom.js";
import { scoreBars } from "../charts.js";

// Where an event's object has a page: its own, or (reschedule tasks) the list; else its name.
function about(e) {
  const { kind, namespace, name } = e.involved || {};
  if (!name) return null;
  if (kind === "Application") return link(name, "applications", namespace || "", name);
  if (kind === "Cluster") return link(name, "clusters", namespace || "", name);
  if (kind === "RescheduleTask") return link(name, "tasks");
  return h("span", { title: kind }, name);
}

/** A compact newest-first list of events: time, object, reason, message. */
export function feed(entries, empty) {
  if (!entries.length) return h("div", { class: "empty" }, empty);
  return h("ul", { class: "feed" }, entries.map((e) => h("li", {},
    h("time", { datetime: e.time, title: e.time }, clock(e.time)),
    h("div", {}, about(e), " ", h("b", { class: e.type === "Warning" ? "warn" : "" }, e.reason), " ",
      h("span", { class: "muted" }, e.message), e.count > 1 ? h("span", { class: "muted small" }, ` ×${e.count}`) : null))));
}

/** The events of one object as a timeline. */
export function timeline(entries, empty) {
  if (!entries.length) return h("div", { class: "empty" }, empty);
  return h("ul", { class: "timeline" }, entries.map((e) => h("li", { class: e.type === "Warning" ? "warn" : /^(Migrated|ShareMoved|Rebalanced)$/.test(e.reason) ? "move" : "" },
    h("div", {}, h("b", {}, e.reason), " ", e.message),
    h("div", { class: "muted small" }, `${clock(e.time)} · ${ago(e.time)} ago${e.component ? ` · ${e.component}` : ""}`))));
}

// The parts of a decision's record of each cluster (shoal.model.application_status.inputs_of):
// revision|labels|state|custom resources|metrics|flags (cordoned, being deleted).
const STATE = 2, FLAGS = 5;

/** What changed since the decision among the clusters it looked at, by name: what the
 * dashboard can tell from the record (state, cordon, deletion), "deleted" for one gone. */
export function changedSince(data, clusters) {
  const changed = new Map();
  if (!clusters || !data || !data.clusters) return changed;
  for (const [name, recorded] of Object.entries(data.clusters)) {
    const parts = String(recorded).split("|"), now = clusters.get(name);
    if (!now) { changed.set(name, "deleted"); continue; }
    const state = now.status.state, flags = `${now.spec.unschedulable ? 1 : 0}${now.metadata.deleted ? 1 : 0}`;
    if (parts[STATE] !== undefined && parts[STATE] !== state) changed.set(name, state === "ONLINE" ? "ONLINE again" : `${state} now`);
    else if (parts[FLAGS] !== undefined && parts[FLAGS] !== flags) changed.set(name, now.spec.unschedulable ? "cordoned now" : "uncordoned now");
  }
  return changed;
}

/** status.scheduling (or a dry run): summary, ranked score bars, rejections by reason.
 * `clusters` (the namespace's now, by name): what changed since is said beside it. */
export function explanation(data, current, clusters = null) {
  if (!data) return h("div", { class: "empty" }, "No scheduling attempt recorded yet.");
  const rejected = data.rejected || [];
  const changed = changedSince(data, clusters);
  const chosen = (data.chosen_clusters || []).length > 1 ? data.chosen_clusters : data.chosen ? [data.chosen] : [];
  const since = [...changed].map(([name, what]) => `${name}: ${what}`);
  const named = (name) => changed.has(name) ? h("span", { class: "changed" }, `${name} (${changed.get(name)})`) : name;
  return h("div", {},
    h("div", { class: "kv", style: { marginBottom: "14px" } },
      h("dt", {}, "Decision"), h("dd", { id: "chosen" }, chosen.length ? chosen.flatMap((n, i) => [i ? ", " : "", h("b", {}, n)]) : badge("no cluster"), data.score != null && chosen.length === 1 ? ` · score ${num(data.score)}` : "", data.forced ? " · forced pass" : ""),
      h("dt", {}, "Summary"), h("dd", {}, data.summary),
      data.time ? [h("dt", {}, "Decided"), h("dd", {}, `${clock(data.time)} (${ago(data.time)} ago)`)] : null,
      since.length ? [h("dt", {}, "Since then"), h("dd", { id: "since", class: "changed" }, since.join("; "))] : null),
    (data.ranking || []).length ? scoreBars(data.ranking, { chosen: data.chosen, current }) : null,
    (data.ranking || []).some((r) => !r.metrics) ? h("div", { class: "muted small", style: { marginTop: "6px" } },
      "Grey bars: score terms are kept for the chosen and the current cluster only; “Explain now” ranks every cluster with every term.") : null,
    rejected.length ? h("div", { style: { marginTop: "16px" } },
      h("h2", {}, "Rejected"),
      h("table", { class: "plain" }, h("tr", {}, h("th", {}, "Reason"), h("th", { class: "num" }, "Clusters"), h("th", {}, "Which")),
        rejected.map((r) => {
          const names = r.clusters || [];
          // every cluster it names has changed since: the rejection no longer holds as told
          const outdated = names.length > 0 && names.length === r.count && names.every((n) => changed.has(n));
          return h("tr", { class: outdated ? "outdated" : "", title: outdated ? "Changed since this decision" : "" },
            h("td", {}, r.reason), h("td", { class: "num" }, r.count),
            h("td", { class: "muted" }, names.flatMap((n, i) => [i ? ", " : "", named(n)]), r.count > names.length ? " …" : ""));
        }))) : null);
}

// A placement that runs short of what it asked for (fewer clusters, replicas missing):
// the scheduler's Degraded condition, shown beside the state wherever the state is.
export const degradedOf = (status) => ((status && status.conditions) || []).find((c) => c.type === "Degraded" && c.status !== "False") || null;
export const degradedBadge = (status) => {
  const c = degradedOf(status);
  return c ? h("span", { class: "badge s-warn degraded", title: c.message }, "Degraded") : null;
};
