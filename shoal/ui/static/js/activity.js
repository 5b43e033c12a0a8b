// What happened: the API's Event objects when the server has them (/core/events: the fleet's
// newest on the overview, one object's by label selector on its page), else the changes this
// tab saw on the application and cluster watch streams (placements, migrations, state
// changes), kept in memory while the dashboard is open.

import { EVENT_TAIL, fleet, live, peek } from "./live.js";
import { has, ready } from "./routes.js";

const LIMIT = 2000;
const observed = [];  // newest last
const listeners = new Set();

function record(entry) {
  observed.push(entry);
  if (observed.length > LIMIT) observed.splice(0, observed.length - LIMIT);
  listeners.forEach((fn) => fn(entry));
}

const ref = (obj) => ({ kind: obj.kind, namespace: obj.metadata.namespace, name: obj.metadata.name, uid: obj.metadata.uid });
const target = (status) => status && status.scheduled_to ? status.scheduled_to.name : null;
const shareNames = (status) => ((status && status.placements) || []).map((p) => p.cluster.name);

function watchApplications(list) {
  list.onChange((type, obj, old) => {
    const now = new Date().toISOString();
    const involved = ref(obj);
    if (type === "ADDED") { record({ time: now, type: "Normal", reason: "Created", message: "application created", involved }); return; }
    if (type === "DELETED") { record({ time: now, type: "Normal", reason: "Deleted", message: "application deleted", involved }); return; }
    if (!old) return;
    const before = shareNames(old.status), after = shareNames(obj.status);
    if (before.length > 1 || after.length > 1) {  // on several clusters: a share moved
      const lost = before.filter((n) => !after.includes(n)), gained = after.filter((n) => !before.includes(n));
      if (lost.length && after.length) {
        const to = gained.length ? gained.join(", ") : after.join(", ");
        record({ time: now, type: "Normal", reason: "ShareMoved", message: `Share of ${lost.join(", ")} moved to ${to}`, involved, from: lost.join(", "), to });
      }
    } else {
      const from = target(old.status), to = target(obj.status);
      if (from !== to && to) {
        const reason = from ? "Migrated" : "Scheduled";
        const message = from ? `${from} → ${to}` : `placed on ${to}`;
        record({ time: now, type: "Normal", reason, message, involved, from, to });
      }
    }
    if (old.status.state !== obj.status.state) {
      const bad = ["FAILED", "DEGRADED"].includes(obj.status.state);
      const why = obj.status.reason ? `: ${obj.status.reason.message || obj.status.reason.code}` : "";
      record({ time: now, type: bad ? "Warning" : "Normal", reason: obj.status.state, message: `${old.status.state} → ${obj.status.state}${why}`, involved });
    }
  });
}

function watchClusters(list) {
  list.onChange((type, obj, old) => {
    const now = new Date().toISOString();
    if (type !== "MODIFIED") {
      record({ time: now, type: "Normal", reason: type === "ADDED" ? "Registered" : "Removed", message: `cluster ${type === "ADDED" ? "registered" : "removed"}`, involved: ref(obj) });
      return;
    }
    if (old && old.status.state !== obj.status.state) {
      const bad = obj.status.state !== "ONLINE";
      record({ time: now, type: bad ? "Warning" : "Normal", reason: obj.status.state, message: `${old.status.state} → ${obj.status.state}`, involved: ref(obj) });
    }
  });
}

let started = false;

/** Start recording (once); the event stream is used when the server has one. */
export function startActivity() {
  if (started) return;
  started = true;
  for (const path of ["/kubernetes/applications", "/kubernetes/clusters"]) peek(path).onRender(() => { version++; });
  watchApplications(peek("/kubernetes/applications"));
  watchClusters(peek("/kubernetes/clusters"));
  ready.then(() => { if (has(EVENTS)) peek(EVENTS, EVENT_TAIL).onRender(() => listeners.forEach((fn) => fn(null))); });
}

const EVENTS = "/core/events";
// The labels the API's event recorder puts on each event, so that a selector finds them.
const KIND_LABEL = "involved.shoal/kind", NAME_LABEL = "involved.shoal/name";
// What moved, from each kind of move's message (shoal.events.reasons): one application's
// cluster, a lost cluster's share (an application on several), a division on request.
const MOVES = {
  Migrated: /^Migrated from (\S+) .*? to (\S+) \(/,
  ShareMoved: /^Share of (.+?) moved to (.+?); now /,
  Rebalanced: /^Rebalanced on request: (.+) → (.+)$/,
};
export const MOVE_REASONS = Object.keys(MOVES);

export function fromEvent(event) {
  const pattern = MOVES[event.reason];
  const moved = pattern ? pattern.exec(event.message || "") : null;
  return {
    time: event.last_timestamp || event.first_timestamp || event.metadata.created,
    first: event.first_timestamp,
    type: event.type || "Normal", reason: event.reason, message: event.message,
    involved: event.involved_object || {}, count: event.count, component: event.reporting_component,
    from: moved ? moved[1] : undefined, to: moved ? moved[2] : undefined,
  };
}

/** The live list of one object's events (a label selector), followed while the page shows it.
 * It holds those of every object that had the name; `activity` keeps its uid's. */
function eventsOf({ kind, namespace, name }) {
  const path = `/core/namespaces/${encodeURIComponent(namespace || "default")}/events`;
  return live(path, `${KIND_LABEL}=${kind},${NAME_LABEL}=${name}`);
}

/** The server's events (the fleet's newest, or one object's) if it has the Event kind;
 * `null` while unknown. */
export function serverEvents(involved = {}) {
  if (!has(EVENTS)) return null;
  const list = involved.name ? eventsOf(involved) : fleet.events;
  if (list.missing || !list.loaded) return null;
  return list.values().map(fromEvent);
}

/** Whether the fleet's events were too many to list: only those since the page opened show. */
export const eventsPartial = () => has(EVENTS) && fleet.events.partial;

let known = { version: -1, entries: [] };
let version = 0;  // bumped whenever the application or cluster list changes

/** What the lists say already happened: placements and registrations (after each change). */
function baseline() {
  if (known.version === version) return known.entries;
  const entries = [];
  for (const app of peek("/kubernetes/applications").values()) {
    const s = app.status;
    if (s.scheduled && s.scheduled_to) entries.push({ time: s.scheduled, type: "Normal", reason: "Scheduled", message: `placed on ${s.scheduled_to.name}`, involved: ref(app) });
    else if (s.state === "FAILED") entries.push({ time: app.metadata.modified || app.metadata.created, type: "Warning", reason: "FAILED", message: s.reason ? s.reason.message : "", involved: ref(app) });
  }
  for (const cluster of peek("/kubernetes/clusters").values()) {
    entries.push({ time: cluster.metadata.created, type: "Normal", reason: "Registered", message: "cluster registered", involved: ref(cluster) });
  }
  known = { version, entries };
  return entries;
}

const said = (e) => `${e.reason}|${e.involved.kind}|${e.involved.namespace || ""}|${e.involved.name}`;

/** Observed changes, and the baseline entries no observed change repeats. */
function merged() {
  const seen = new Set(observed.map(said));
  return observed.concat(baseline().filter((b) => !seen.has(said(b))));
}

/** Newest first: server events (if any), else observed changes and what the lists tell. */
export function activity({ kind, namespace, name, uid } = {}, limit = 200, source = null) {
  const all = source || serverEvents({ kind, namespace, name }) || merged();
  // an object created again under a deleted one's name has its own history: its uid's
  const wanted = all.filter((e) => (!kind || e.involved.kind === kind)
    && (!name || (e.involved.name === name && (e.involved.namespace || "") === (namespace || "")))
    && (!uid || !e.involved.uid || e.involved.uid === uid));
  wanted.sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0));
  return wanted.slice(0, limit);
}

/** `fn()` whenever what `activity(involved)` tells may have changed. */
export function onActivity(fn, involved = {}) {
  listeners.add(fn);
  const offs = ["/kubernetes/applications", "/kubernetes/clusters"].map((path) => peek(path).onRender(fn));
  ready.then(() => { if (has(EVENTS) && involved.name && listeners.has(fn)) offs.push(eventsOf(involved).onRender(fn)); fn(); });
  fn();
  return () => { listeners.delete(fn); offs.forEach((off) => off()); };
}

/** Moves from one cluster to another: the server's Migrated, ShareMoved and Rebalanced
 * events, else the observed ones. */
export function migrations(involved) {
  const moved = (e) => MOVE_REASONS.includes(e.reason);
  if (serverEvents(involved)) return activity(involved, 500).filter(moved);
  return activity(involved, 500, observed).filter(moved);
}
