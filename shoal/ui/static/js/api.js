// The Shoal REST API as the dashboard uses it: JSON requests, paged lists, ndjson watches.
// Every request carries `Authorization: Bearer <token>` once the user has entered one.

const TOKEN_KEY = "shoal.token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (value) => value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  const secret = token.get();
  if (secret) out.Authorization = `Bearer ${secret}`;
  return out;
}

/** Listeners told about 401/403 answers, so the page can ask for a token. */
export const authListeners = new Set();

async function failure(response) {
  let problem = {};
  try { problem = await response.json(); } catch { /* not JSON */ }
  if (response.status === 401 || response.status === 403) authListeners.forEach((fn) => fn(response.status));
  return new ApiError(response.status, problem);
}

export async function request(method, path, body, { signal } = {}) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }), signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

export function query(path, params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === true) search.append(key, "");
    else if (value !== undefined && value !== null && value !== "") search.append(key, String(value));
  }
  const text = search.toString().replace(/=(&|$)/g, "$1");  // `watch`, not `watch=`
  return text ? `${path}?${text}` : path;
}

/** Pages of a list (`limit`/`continue`): yields {items, revision, more} until the last page. */
export async function* listPages(path, { selector, limit = 500, signal } = {}) {
  let cont;
  do {
    const page = await request("GET", query(path, { label_selector: selector, limit, continue: cont }), undefined, { signal });
    cont = page.metadata.continue;
    yield { items: page.items, revision: page.metadata.resource_version, more: Boolean(cont) };
  } while (cont);
}

/**
 * Follow a watch stream from `revision`: `onEvent(type, object)` per line. A cut stream is
 * resumed from the last revision seen; 410 Gone calls `onGone()` (the caller lists again).
 * Resolves when `signal` aborts.
 */
export async function watch(path, { revision, selector, signal, onEvent, onGone, onState = () => {} }) {
  let since = revision;
  let delay = 500;
  while (!signal.aborted) {
    try {
      const url = query(path, { watch: true, heartbeat: 5, resource_version: since, label_selector: selector });
      const response = await fetch(url, { headers: headers({ Accept: "application/x-ndjson" }), signal });
      if (response.status === 410) { onGone(); return; }
      if (!response.ok) throw await failure(response);
      onState(true);
      delay = 500;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          if (!line) continue;  // heartbeat
          const event = JSON.parse(line);
          since = Math.max(since || 0, event.object.metadata.resource_version || 0);
          onEvent(event.type, event.object);
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status === 404) throw error;
    }
    onState(false);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 10000);
  }
}
