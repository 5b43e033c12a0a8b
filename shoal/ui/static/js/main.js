// The dashboard shell: hash routes, the token box, the live indicator.

import { authListeners, token } from "./api.js";
import { startActivity } from "./activity.js";
import { fill, h } from "./dom.js";
import { connection, openScope } from "./live.js";
import * as overview from "./pages/overview.js";
import * as clusters from "./pages/clusters.js";
import * as cluster from "./pages/cluster.js";
import * as applications from "./pages/applications.js";
import * as application from "./pages/application.js";
import * as metrics from "./pages/metrics.js";
import * as tasks from "./pages/tasks.js";
import * as pods from "./pages/pods.js";

// "#/clusters/ns/name" → the cluster page with params [ns, name].
const ROUTES = [
  ["overview", 0, overview], ["clusters", 0, clusters], ["clusters", 2, cluster],
  ["applications", 0, applications], ["applications", 2, application],
  ["metrics", 0, metrics], ["tasks", 0, tasks], ["pods", 0, pods],
];

const main = document.getElementById("main");
let cleanup = () => {};
let release = () => {};

function route() {
  const [name = "overview", ...params] = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const found = ROUTES.find(([n, arity]) => n === name && arity === params.length) || ROUTES[0];
  cleanup();
  fill(main);
  const previous = release;
  release = openScope();
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === found[0]));
  document.title = `Shoal · ${found[0][0].toUpperCase()}${found[0].slice(1)}`;
  cleanup = found[2].render(main, ...params) || (() => {});
  previous();  // after the new page took what it shares with the old one
}

function showConnection() {
  const el = document.getElementById("live");
  el.className = `live ${connection.open ? "on" : "off"}`;
  el.textContent = connection.open ? "live" : "reconnecting…";
}

function setupToken() {
  const input = document.getElementById("token");
  input.value = token.get();
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token.set(input.value.trim());
    location.reload();  // every stream again, with the new credentials
  });
  const banner = document.getElementById("banner");
  authListeners.add((status) => {
    if (status === 401) return signIn(input);
    banner.hidden = false;
    fill(banner, h("b", {}, "Not allowed. "), "This token may not read everything shown here.");
  });
}

// The API wants a token (none, or a wrong one): a page of zeros would mislead, so the page
// gives way to a sign-in panel until a token is entered.
function signIn(input) {
  cleanup();
  cleanup = () => {};
  release();
  release = () => {};
  const wrong = Boolean(token.get());
  fill(main, h("section", { class: "panel sign-in" },
    h("h2", {}, "Sign in"),
    h("p", {}, wrong ? "The API refused this token. " : "The API answers only with a token. ",
      "Paste an API token in the box at the top right. ",
      h("code", {}, "shoal up"), " writes the admin token in ",
      h("code", {}, "data/security/config.yaml"), "; other users' tokens are in your API's token file.")));
  input.focus();
}

connection.listeners.add(showConnection);
setupToken();
startActivity();
window.addEventListener("hashchange", route);
route();
