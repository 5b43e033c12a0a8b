// Building DOM without a framework: h(), formatting, and the one colour per state.

/** h("div", {class: "x", onclick}, child, [children], "text") */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "style" && typeof value === "object") Object.assign(el.style, value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace the children of `el`. */
export function fill(el, ...children) { el.replaceChildren(); append(el, children); return el; }

const TONES = {
  ok: ["RUNNING", "ONLINE", "COMPLETED", "Finished", "Successful", "READY_FOR_ACTION", "Ready", "Scheduled"],
  info: ["PENDING", "CREATING", "RECONCILING", "CONNECTING", "Pending", "Running", "WAITING_FOR_CLEANING"],
  move: ["MIGRATING"],
  warn: ["DEGRADED", "UNHEALTHY", "NOTREADY", "FAILING_METRICS", "CORDONED"],
  bad: ["FAILED", "OFFLINE", "Failed"],
  idle: ["DELETING", "DELETED"],
};
const TONE_OF = Object.fromEntries(Object.entries(TONES).flatMap(([tone, states]) => states.map((s) => [s, tone])));
export const COLOURS = { ok: "#16a34a", info: "#2563eb", move: "#9333ea", warn: "#d97706", bad: "#dc2626", idle: "#64748b" };
export const tone = (state) => TONE_OF[state] || "idle";
export const colour = (state) => COLOURS[tone(state)];
export const badge = (state, title) => h("span", { class: `badge s-${tone(state)}`, title }, state || "—");

export function chips(labels) {
  return Object.entries(labels || {}).map(([k, v]) => h("span", { class: "chip" }, h("b", {}, k), "=", v));
}

export function ago(time) {
  if (!time) return "—";
  const seconds = Math.max(0, (Date.now() - new Date(time).getTime()) / 1000);
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

export const clock = (time) => time ? new Date(time).toLocaleTimeString([], { hour12: false }) : "";
export function num(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  const text = Number(value).toFixed(digits);
  return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
}

export function bytes(quantity) {
  const n = Number(quantity);
  if (!Number.isFinite(n)) return String(quantity ?? "—");
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 && i ? 1 : 0)} ${units[i]}`;
}

export function toast(message, error = false) {
  const el = h("div", { class: `toast${error ? " error" : ""}`, role: "status" }, message);
  document.body.append(el);
  setTimeout(() => el.remove(), 4000);
}

export function card(title, ...body) { return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...body); }

export function pageHead(title, { crumbs, sub, actions } = {}) {
  return h("div", { class: "page-head" },
    h("div", { class: "grow" }, crumbs ? h("div", { class: "crumbs" }, crumbs) : null, h("h1", {}, title), sub ? h("div", { class: "muted" }, sub) : null),
    actions || null);
}

/** A `#/route/...` link. */
export const link = (text, ...parts) => h("a", { href: "#/" + parts.map(encodeURIComponent).join("/") }, text);

/** Counts per state, as a stacked bar with its legend. */
export function stateStack(counts) {
  const total = Object.values(counts).reduce((a, b) => a + b, 0) || 1;
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  return [
    h("div", { class: "stack" }, entries.map(([s, n]) => h("span", { title: `${s}: ${n}`, style: { width: `${(100 * n) / total}%`, background: colour(s) } }))),
    h("div", { class: "legend" }, entries.map(([s, n]) => h("span", {}, h("i", { style: { background: colour(s) } }), `${s} ${n}`))),
  ];
}

export function countBy(items, fn) {
  const out = {};
  for (const item of items) { const key = fn(item); out[key] = (out[key] || 0) + 1; }
  return out;
}
