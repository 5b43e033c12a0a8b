// Small SVG/HTML charts, no library: a squarified treemap, score bars, sparklines.

import { h, num } from "./dom.js";

/** Squarified treemap layout of items [{value}] in a w×h box: [{item, x, y, w, h}]. */
export function squarify(items, width, height) {
  const total = items.reduce((s, i) => s + i.value, 0);
  if (!total) return [];
  const scale = (width * height) / total;
  const queue = items.map((item) => ({ item, area: item.value * scale })).sort((a, b) => b.area - a.area);
  const out = [];
  let x = 0, y = 0, w = width, hgt = height;
  const worst = (row, side) => {
    const sum = row.reduce((s, r) => s + r.area, 0);
    const max = Math.max(...row.map((r) => r.area)), min = Math.min(...row.map((r) => r.area));
    return Math.max((side * side * max) / (sum * sum), (sum * sum) / (side * side * min));
  };
  while (queue.length) {
    const side = Math.min(w, hgt);
    const row = [queue.shift()];
    while (queue.length && worst([...row, queue[0]], side) <= worst(row, side)) row.push(queue.shift());
    const sum = row.reduce((s, r) => s + r.area, 0);
    const thick = sum / side;
    let offset = 0;
    for (const r of row) {
      const len = r.area / thick;
      out.push(w >= hgt ? { item: r.item, x, y: y + offset, w: thick, h: len } : { item: r.item, x: x + offset, y, w: len, h: thick });
      offset += len;
    }
    if (w >= hgt) { x += thick; w -= thick; } else { y += thick; hgt -= thick; }
  }
  return out;
}

/** Tiles [{label, sub, value, tone, body() → nodes, href, title}] filling the parent's width. */
export function treemap(tiles, height = 300) {
  const box = h("div", { class: "treemap", style: { height: `${height}px` } });
  const draw = () => {
    const width = box.clientWidth || 800;
    box.replaceChildren(...squarify(tiles, width, height).map((t) => h("a", {
      class: `tile s-${t.item.tone}`, href: t.item.href, title: t.item.title,
      style: { left: `${t.x}px`, top: `${t.y}px`, width: `${t.w}px`, height: `${t.h}px` },
    }, h("div", { class: "t-name" }, t.item.label), h("div", { class: "t-sub" }, t.item.sub), t.item.body ? t.item.body() : null)));
  };
  new ResizeObserver(draw).observe(box);
  return box;
}

export const PALETTE = ["#4f46e5", "#0ea5e9", "#14b8a6", "#f59e0b", "#ec4899", "#84cc16", "#8b5cf6", "#f97316"];

/**
 * Ranked score bars: one row per cluster; each score term (metric, stickiness) is a segment
 * of the score worth value·weight / Σweights, so the segments add up to the score.
 */
export function scoreBars(ranking, { chosen, current } = {}) {
  const names = [...new Set(ranking.flatMap((r) => (r.metrics || []).map((m) => m.name)))];
  const colourOf = (name) => name === "stickiness" ? "#94a3b8" : PALETTE[names.indexOf(name) % PALETTE.length];
  const rows = ranking.map((entry) => {
    const terms = (entry.metrics || []).map((m) => ({ name: m.name, value: m.normalised, weight: m.weight, raw: m.value }));
    if (entry.stickiness) terms.push({ name: "stickiness", value: entry.stickiness.value, weight: entry.stickiness.weight });
    const den = terms.reduce((s, t) => s + t.weight, 0);
    const segments = den
      ? terms.map((t) => h("span", { title: `${t.name}: ${num(t.value)} × weight ${num(t.weight)}${t.raw !== undefined ? ` (value ${num(t.raw)})` : ""}`, style: { width: `${(100 * t.value * t.weight) / den}%`, background: colourOf(t.name) } }))
      : [h("span", { title: "no score terms kept for this cluster", style: { width: `${100 * Math.max(0, entry.score)}%`, background: "#cbd5e1" } })];
    const tags = [entry.cluster === chosen ? " ✓" : "", entry.cluster === current ? " (current)" : ""].join("");
    return [
      h("div", { class: entry.cluster === chosen ? "winner" : "" }, entry.cluster, h("span", { class: "muted small" }, tags)),
      h("div", { class: "bar", dataset: { cluster: entry.cluster } }, segments),
      h("div", { class: "score mono" }, num(entry.score)),
    ];
  });
  const legend = [...names, ...(ranking.some((r) => r.stickiness) ? ["stickiness"] : [])];
  return h("div", {},
    h("div", { class: "bars" }, rows),
    legend.length ? h("div", { class: "legend", style: { marginTop: "10px" } }, legend.map((n) => h("span", {}, h("i", { style: { background: colourOf(n) } }), n))) : null);
}

/** A sparkline of [{t, v}] points. */
export function sparkline(points, { width = 120, height = 28, min, max, colour = "#4f46e5" } = {}) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  if (points.length === 1) points = [{ t: points[0].t - 1, v: points[0].v }, points[0]];
  if (points.length) {
    const lo = min ?? Math.min(...points.map((p) => p.v)), hi = max ?? Math.max(...points.map((p) => p.v));
    const t0 = points[0].t, t1 = points[points.length - 1].t;
    const x = (t) => (t1 > t0 ? ((t - t0) / (t1 - t0)) * (width - 4) + 2 : width - 2);
    const y = (v) => height - 3 - (hi > lo ? ((v - lo) / (hi - lo)) * (height - 6) : (height - 6) / 2);
    const path = document.createElementNS(ns, "polyline");
    path.setAttribute("points", points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" "));
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", colour);
    path.setAttribute("stroke-width", "1.6");
    svg.append(path);
    const last = points[points.length - 1];
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", x(last.t)); dot.setAttribute("cy", y(last.v)); dot.setAttribute("r", "2.5"); dot.setAttribute("fill", colour);
    svg.append(dot);
  }
  return svg;
}
