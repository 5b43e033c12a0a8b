// Which optional routes this API server has, from its OpenAPI document (read once), so the
// dashboard uses a newer route when present without probing it into a 404.

import { request } from "./api.js";

let paths = null;

export const ready = request("GET", "/openapi.json")
  .then((doc) => { paths = new Set(Object.keys(doc.paths || {})); })
  .catch(() => { paths = new Set(); });

/** True when the server serves `path` (an OpenAPI template such as "/core/events"). */
export const has = (path) => paths !== null && paths.has(path);
