// Metrics: the health of every provider, and each metric's value per cluster with a short
// history kept while the page is open.

import { sparkline } from "../charts.js";
import { ago, badge, fill, h, link, num, pageHead } from "../dom.js";
import { fleet, follow } from "../live.js";
import { historyOf, metricOf, onValues, valueOf } from "../values.js";

function providerCard(p) {
  const s = p.status || {};
  const healthy = !s.reason && !s.errors;
  const where = p.spec.type === "static" ? `${Object.keys((p.spec.static || {}).metrics || {}).length} static values` : ((p.spec[p.spec.type] || {}).url || "");
  return h("section", { class: "card", dataset: { provider: p.metadata.name } },
    h("div", { style: { display: "flex", justifyContent: "space-between", alignItems: "center", gap: "8px" } },
      h("h2", { style: { margin: 0 } }, p.metadata.name),
      s.last_fetch ? badge(healthy ? "ONLINE" : "FAILED", s.reason ? s.reason.message : undefined) : badge("PENDING", "not fetched by the scheduler yet")),
    h("div", { class: "muted small", style: { margin: "4px 0 10px" } }, `${p.spec.type}${p.metadata.namespace ? ` · namespace ${p.metadata.namespace}` : " · global"} · ${where}`),
    h("dl", { class: "kv" },
      h("dt", {}, "Last fetch"), h("dd", {}, s.last_fetch ? `${ago(s.last_fetch)} ago` : "—"),
      h("dt", {}, "Latency"), h("dd", {}, s.fetch_latency_seconds != null ? `${num(s.fetch_latency_seconds * 1000, 1)} ms` : "—"),
      h("dt", {}, "Failed fetches in a row"), h("dd", {}, s.errors || 0),
      s.reason ? [h("dt", {}, "Error"), h("dd", { class: "small" }, s.reason.message)] : null));
}

export function render(root) {
  const providers = h("div", { class: "grid cols-3" });
  const values = h("div");
  root.append(
    pageHead("Metrics", { sub: "Provider health from the scheduler's metric cache; values per cluster, normalised to [0, 1] by each metric's min and max." }),
    h("h2", {}, "Providers"), providers,
    h("h2", { style: { marginTop: "22px" } }, "Values per cluster"), h("section", { class: "card flush" }, values));

  const draw = () => {
    const all = [...fleet.globalProviders.values(), ...fleet.providers.values()];
    fill(providers, all.length ? all.map(providerCard) : h("div", { class: "empty" }, "No metrics providers."));
    const rows = [];
    for (const c of fleet.clusters.values().sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
      for (const ref of c.spec.metrics || []) {
        const metric = metricOf(ref, c.metadata.namespace), v = valueOf(c, ref);
        const failing = (c.status.metrics_reasons || {})[ref.name];
        rows.push(h("tr", { dataset: { cluster: c.metadata.name, metric: ref.name } },
          h("td", {}, ref.name), h("td", {}, link(c.metadata.name, "clusters", c.metadata.namespace, c.metadata.name)),
          h("td", { class: "num mono value" }, failing ? badge(failing.code, failing.message) : v ? num(v.value) : "—"),
          h("td", {}, v && !failing ? h("div", { style: { display: "flex", alignItems: "center", gap: "8px" } },
            h("div", { class: "meter", style: { width: "90px" } }, h("span", { style: { width: `${100 * Math.min(1, Math.max(0, v.normalised))}%` } })), h("span", { class: "mono small" }, num(v.normalised, 2))) : "—"),
          h("td", { class: "num" }, num(ref.weight)),
          h("td", { class: "muted" }, metric ? `${num(metric.spec.min)} … ${num(metric.spec.max)}` : "unknown metric"),
          h("td", {}, sparkline(historyOf(c, ref.name), { width: 160, ...(metric ? { min: metric.spec.min, max: metric.spec.max } : {}) }))));
      }
    }
    fill(values, rows.length ? h("table", { class: "plain", id: "metric-values" },
      h("tr", {}, ["Metric", "Cluster", "Value", "Normalised", "Weight", "Range", "History (this visit)"].map((t) => h("th", {}, t))), rows)
      : h("div", { class: "empty", style: { padding: "16px" } }, "No cluster refers to a metric."));
  };
  const lists = [fleet.globalProviders, fleet.providers, fleet.clusters, fleet.globalMetrics, fleet.metrics];
  const offs = [follow(lists, draw), onValues(draw)];
  return () => offs.forEach((off) => off());
}
