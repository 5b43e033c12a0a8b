// Live collections: list once (paged), then follow the watch stream: the informer pattern of
// Shoal's own controllers, in the browser. Pages subscribe; nothing polls.

import { listPages, watch } from "./api.js";

export const keyOf = (obj) => `${obj.metadata.namespace || ""}/${obj.metadata.name}`;

/** Connection state of every open watch, for the header's indicator. */
export const connection = { open: 0, failed: 0, listeners: new Set() };
function tell() { connection.listeners.forEach((fn) => fn(connection)); }

export class LiveList {
  /**
   * `tail`: a log rather than a collection (events): one page is listed, kept only when it
   * holds everything (else `partial`, and only what arrives is shown), and at most `tail`
   * items are kept, the oldest dropped first.
   */
  constructor(path, { selector = "", pageSize = 500, tail = 0 } = {}) {
    this.path = path;
    this.selector = selector;
    this.pageSize = pageSize;
    this.tail = tail;
    this.partial = false;
    this.noReplay = false;
    this.items = new Map();
    this.loaded = false;
    this.missing = false;  // the route does not exist on this server
    this.error = null;
    this.changeListeners = new Set();  // (type, obj, old) per watch event
    this.renderListeners = new Set();  // () once per animation frame after changes
    this.pending = false;
    this.connected = false;
    this.users = 0;
    this.abort = null;
  }

  /** Start following (list, then watch) while at least one user holds it. */
  acquire() {
    if (this.users++ === 0) {
      this.abort = new AbortController();
      this.run(this.abort.signal);
    }
    return this;
  }

  /** Stop following when the last user lets go: browsers allow six connections per server. */
  release() {
    if (--this.users > 0) return;
    this.users = 0;
    this.abort.abort();
    this.loaded = false;
    this.setConnected(false);
  }

  /** `fn()` after changes (batched per frame); returns the unsubscribe function. */
  onRender(fn) { this.renderListeners.add(fn); return () => this.renderListeners.delete(fn); }
  onChange(fn) { this.changeListeners.add(fn); return () => this.changeListeners.delete(fn); }
  values() { return [...this.items.values()]; }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.renderListeners.forEach((fn) => fn()); });
  }

  setConnected(on) {
    if (on === this.connected) return;
    this.connected = on;
    connection.open += on ? 1 : -1;
    tell();
  }

  async run(signal) {
    while (!signal.aborted) {
      let revision;
      try {
        const fresh = new Map();
        const progressive = this.items.size === 0;  // show pages as they come, unless relisting
        for await (const page of listPages(this.path, { selector: this.selector, limit: this.pageSize, signal })) {
          // Watch from the first page's revision: later pages are newer, events replay the rest.
          revision ??= page.revision;
          if (this.tail && page.more) { this.partial = true; break; }  // too many to list
          for (const obj of page.items) fresh.set(keyOf(obj), obj);
          if (progressive) { this.items = fresh; this.schedule(); }
        }
        this.items = fresh;
        this.loaded = true;
        this.error = null;
        this.schedule();
      } catch (error) {
        if (signal.aborted) return;
        this.error = error;
        if (error.status === 404) { this.missing = true; this.loaded = true; this.schedule(); return; }
        this.schedule();
        await new Promise((resolve) => setTimeout(resolve, 2000));
        continue;
      }
      // A log too long to list is followed from a little before now instead: the watch
      // replays what was written in the last REPLAY revisions (unless the store compacted
      // them: then from now).
      const replay = this.partial && !this.noReplay;
      let gone = false;
      await watch(this.path, {
        revision: replay ? Math.max(0, revision - REPLAY) : revision, selector: this.selector, signal,
        onEvent: (type, obj) => this.apply(type, obj),
        onGone: () => { gone = true; },
        onState: (on) => this.setConnected(on && !signal.aborted),
      }).catch((error) => { this.error = error; });
      if (!gone) return;
      if (replay) this.noReplay = true;
    }
  }

  apply(type, obj) {
    const key = keyOf(obj);
    const old = this.items.get(key);
    if (old && old.metadata.resource_version >= obj.metadata.resource_version && type !== "DELETED") return;
    if (type === "DELETED") this.items.delete(key);
    else this.items.set(key, obj);
    if (this.tail && this.items.size > this.tail) this.items.delete(this.items.keys().next().value);
    this.changeListeners.forEach((fn) => fn(type, obj, old));
    this.schedule();
  }
}

const REPLAY = 5000;  // store revisions a partial log replays

const shared = new Map();
let scope = null;  // the lists the page on screen uses, released when it goes

/** Open the scope of a new page; returns the function that releases its lists. */
export function openScope() {
  const mine = new Set();
  scope = mine;
  return () => { mine.forEach((list) => list.release()); mine.clear(); };
}

/** The live list of `path` (shared), followed for as long as the page on screen is. */
export function live(path, selector = "", options = {}) {
  const key = `${path}?${selector}`;
  if (!shared.has(key)) shared.set(key, new LiveList(path, { selector, ...options }));
  const list = shared.get(key);
  if (scope && !scope.has(list)) { scope.add(list); list.acquire(); }
  return list;
}

/** The fleet's events are a log: its newest ones are kept, not all of them. */
export const EVENT_TAIL = { tail: 2000 };

/** The collections the pages show; reading one makes the current page follow it. */
export const fleet = {
  get clusters() { return live("/kubernetes/clusters"); },
  get applications() { return live("/kubernetes/applications"); },
  get globalMetrics() { return live("/core/globalmetrics"); },
  get metrics() { return live("/core/metrics"); },
  get globalProviders() { return live("/core/globalmetricsproviders"); },
  get providers() { return live("/core/metricsproviders"); },
  get tasks() { return live("/scheduling/rescheduletasks"); },
  get pods() { return live("/scheduling/pods"); },
  get events() { return live("/core/events", "", EVENT_TAIL); },  // the fleet's, newest
};

/** The shared list of `path` without following it (to listen to it, whoever follows it). */
export function peek(path, options = {}) {
  if (!shared.has(`${path}?`)) shared.set(`${path}?`, new LiveList(path, options));
  return shared.get(`${path}?`);
}

/** Re-run `fn` whenever any of `lists` changes; returns the unsubscribe function. */
export function follow(lists, fn) {
  const offs = lists.map((list) => list.onRender(fn));
  fn();
  return () => offs.forEach((off) => off());
}
