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
  return h("ul", { class: "timeline" }, entries.map((e) => h("li", { class: e.type === "Warning" ? "warn" : /migrat/i.test(e.reason) ? "move" : "" },
    h("div", {}, h("b", {}, e.reason), " ", e.message),
    h("div", { class: "muted small" }, `${clock(e.time)} · ${ago(e.time)} ago${e.component ? ` · ${e.component}` : ""}`))));
}

/** status.scheduling (or a dry run): summary, ranked score bars, rejections by reason. */
export function explanation(data, current) {
  if (!data) return h("div", { class: "empty" }, "No scheduling attempt recorded yet.");
  const rejected = data.rejected || [];
  return h("div", {},
    h("div", { class: "kv", style: { marginBottom: "14px" } },
      h("dt", {}, "Decision"), h("dd", {}, data.chosen ? h("b", {}, data.chosen) : badge("no cluster"), data.score != null ? ` · score ${num(data.score)}` : "", data.forced ? " · forced pass" : ""),
      h("dt", {}, "Summary"), h("dd", {}, data.summary),
      data.time ? [h("dt", {}, "Decided"), h("dd", {}, `${clock(data.time)} (${ago(data.time)} ago)`)] : null),
    (data.ranking || []).length ? scoreBars(data.ranking, { chosen: data.chosen, current }) : null,
    (data.ranking || []).some((r) => !r.metrics) ? h("div", { class: "muted small", style: { marginTop: "6px" } },
      "Grey bars: score terms are kept for the chosen and the current cluster only; “Explain now” ranks every cluster with every term.") : null,
    rejected.length ? h("div", { style: { marginTop: "16px" } },
      h("h2", {}, "Rejected"),
      h("table", { class: "plain" }, h("tr", {}, h("th", {}, "Reason"), h("th", { class: "num" }, "Clusters"), h("th", {}, "Which")),
        rejected.map((r) => h("tr", {}, h("td", {}, r.reason), h("td", { class: "num" }, r.count), h("td", { class: "muted" }, (r.clusters || []).join(", ") + (r.count > (r.clusters || []).length ? " …" : "")))))) : null);
}

// A placement that runs short of what it asked for (fewer clusters, replicas missing):
// the scheduler's Degraded condition, shown beside the state wherever the state is.
export const degradedOf = (status) => ((status && status.conditions) || []).find((c) => c.type === "Degraded" && c.status !== "False") || null;
export const degradedBadge = (status) => {
  const c = degradedOf(status);
  return c ? h("span", { class: "badge s-warn degraded", title: c.message }, "Degraded") : null;
};
