// The retry-queue dashboard: plain JavaScript over the JSON API under ./api (no build step, no
// CDN). Every value from the API goes into the page as text (textContent / text nodes), never
// as HTML. With `--token`, the token is asked for once and kept in this tab's sessionStorage;
// every API call sends it as `Authorization: Bearer …`.
"use strict";

const BASE = document.body.dataset.base || "";
const READ_ONLY = document.body.dataset.readOnly === "true";
const TOKEN_KEY = "retry-queue-token";
const REFRESH_MS = 5000;
const PAGE_SIZE = 20;
const STATES = ["pending", "scheduled", "active", "retry", "archived", "completed"];
const LABELS = {
  pending: "Pending", scheduled: "Scheduled", active: "Active",
  retry: "Retry", archived: "Archived", completed: "Completed", failing: "Failing",
};
// Which buttons a task gets, and which bulk actions a tab has, come with each page of tasks
// (`actions` of GET …/tasks): the server's rules, not a copy of them here.

let skewMs = 0;          // server clock minus browser clock, from /api/queues
let confirming = false;  // a bulk action waits for its confirmation: no auto-refresh meanwhile
let timer = null;

// ---- DOM helpers: text only. ----
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "onclick") node.addEventListener("click", value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);

function flash(text, isError) {
  const box = $("flash");
  box.textContent = text;
  box.className = isError ? "error" : "ok";
  box.hidden = false;
}
function clearFlash() {
  $("flash").hidden = true;
}

// ---- Times: absolute (UTC) and relative to the server's clock. ----
function nowMs() {
  return Date.now() + skewMs;
}
function absolute(iso) {
  // 2023-11-14T22:13:20.250Z → 2023-11-14 22:13:20 UTC (the title keeps the exact time).
  return iso ? iso.replace("T", " ").replace(/(\.\d+)?Z$/, " UTC") : "";
}
function span(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return s + " s";
  const m = Math.round(s / 60);
  if (m < 60) return m + " min";
  const h = Math.round(m / 6) / 10;
  if (h < 48) return h + " h";
  return Math.round(h / 2.4) / 10 + " d";
}
function relative(iso) {
  if (!iso) return "";
  const delta = Date.parse(iso) - nowMs();
  if (Math.abs(delta) < 1000) return "now";
  return delta > 0 ? "in " + span(delta) : span(delta) + " ago";
}
function timeCell(cls, iso) {
  if (!iso) return el("td", { class: cls }, el("span", { class: "muted" }, "—"));
  return el("td", { class: cls, title: iso },
    el("div", { class: "rel" }, relative(iso)),
    el("div", { class: "abs muted" }, absolute(iso)));
}

// ---- The API. ----
class Unauthorized extends Error {}

async function api(method, path, payload) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const init = { method, headers, credentials: "same-origin" };
  if (payload !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(payload);
  }
  const response = await fetch(BASE + "/api/" + path, init);
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (response.status === 401) throw new Unauthorized((body && body.error) || "token needed");
  if (!response.ok) throw new Error((body && body.error) || "HTTP " + response.status);
  return body;
}
const q = encodeURIComponent;

// ---- Routing: #/ (overview), #/q/NAME/STATE?page=N (or ?kind=K&search=S&after=CURSOR),
// #/q/NAME/failing, #/q/NAME/task/ID (tasks.js). ----
function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter((p) => p !== "");
  if (parts[0] === "q" && parts[2] === "task" && parts.length >= 4) {
    return { view: "task", queue: decodePart(parts[1]), id: decodePart(parts[3]) };
  }
  if (parts[0] === "q" && parts.length >= 2) {
    let state = parts[2] || "retry";
    if (state !== "failing" && !STATES.includes(state)) state = "retry";
    const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
    return { view: "queue", queue: decodeURIComponent(parts[1]), state, page, params };
  }
  return { view: "overview" };
}
function queueHref(queue, state, page) {
  return "#/q/" + q(queue) + "/" + state + (page && page > 1 ? "?page=" + page : "");
}

// Each render fetches, then paints; a render overtaken by a newer one (a click on a tab while
// a refresh was loading) or by a question (Run all / Delete all) paints nothing.
let renderSeq = 0;

async function render(quiet) {
  const seq = ++renderSeq;
  if (!quiet) clearFlash();
  const r = route();
  try {
    const paint = r.view === "task" ? await taskPage(r)
      : r.view === "queue" ? await renderQueue(r) : await renderOverview();
    if (seq !== renderSeq) return;
    paint();
    $("login").hidden = true;
    $("main").hidden = false;
    $("refreshed").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    if (seq !== renderSeq) return;
    if (e instanceof Unauthorized) {
      $("main").hidden = true;
      $("login").hidden = false;
      if (sessionStorage.getItem(TOKEN_KEY)) flash("The token was refused.", true);
    } else {
      flash(e.message, true);
    }
  }
}

async function loadQueues() {
  const data = await api("GET", "queues");
  skewMs = Date.parse(data.now) - Date.now();
  return data.queues;
}

// ---- Overview: one row per queue. ----
async function renderOverview() {
  const queues = await loadQueues();
  const head = el("tr", {}, el("th", {}, "Queue"),
    STATES.map((s) => el("th", { class: "num" }, LABELS[s])),
    el("th", {}, "State"), el("th", { class: "num" }, "Processed today"),
    el("th", { class: "num" }, "Failed today"), el("th", { class: "num" }, "Oldest pending"),
    READ_ONLY ? null : el("th", {}, ""));
  const rows = queues.map((s) => el("tr", { class: "queue-row", "data-queue": s.queue },
    el("td", {}, el("a", { class: "queue-link", href: queueHref(s.queue, "retry") }, s.queue)),
    STATES.map((state) => el("td", { class: "num count-" + state, "data-state": state },
      el("a", { href: queueHref(s.queue, state), class: s.counts[state] ? "" : "zero" }, s.counts[state]))),
    el("td", {}, s.paused ? el("span", { class: "badge paused" }, "paused") : el("span", { class: "badge running" }, "running")),
    el("td", { class: "num processed" }, s.processed_today),
    el("td", { class: "num failed" + (s.failed_today ? " bad" : "") }, s.failed_today),
    el("td", { class: "num oldest" }, s.oldest_pending_age_secs === null ? "—" : span(s.oldest_pending_age_secs * 1000)),
    READ_ONLY ? null : el("td", {}, pauseButton(s))));
  const table = el("table", { id: "queues" }, el("thead", {}, head),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 12, class: "muted", id: "empty" }, "No queues yet: nothing was enqueued."))));
  return () => {
    $("crumbs").replaceChildren();
    $("main").replaceChildren(el("h1", {}, "Queues"), table);
  };
}

function pauseButton(s) {
  const action = s.paused ? "unpause" : "pause";
  return el("button", {
    class: "pause-toggle" + (s.paused ? "" : " quiet"), "data-queue": s.queue, "data-action": action,
    onclick: () => act("POST", "queues/" + q(s.queue) + "/" + action,
      "Queue " + s.queue + (s.paused ? " unpaused." : " paused: no task is claimed from it.")),
  }, s.paused ? "Unpause" : "Pause");
}

async function act(method, path, message) {
  try {
    await api(method, path);
    await render(true);
    flash(message, false);
  } catch (e) {
    if (e instanceof Unauthorized) return render(false);
    flash(e.message, true);
  }
}

// ---- One queue: tabs, the tasks of one state, or the failing view. ----
async function renderQueue(r) {
  const queues = await loadQueues();
  const stats = queues.find((s) => s.queue === r.queue) || {
    queue: r.queue, counts: Object.fromEntries(STATES.map((s) => [s, 0])), paused: false,
  };
  const title = el("div", { class: "title" }, el("h1", { id: "queue-name" }, r.queue),
    stats.paused ? el("span", { class: "badge paused", id: "paused-badge" }, "paused") : null,
    READ_ONLY ? null : pauseButton(stats));
  const tabs = el("nav", { id: "tabs" },
    STATES.map((state) => el("a", {
      class: "tab" + (state === r.state ? " current" : ""), "data-state": state, href: queueHref(r.queue, state),
    }, LABELS[state], " ", el("span", { class: "count" }, stats.counts[state]))),
    el("a", { class: "tab failing" + (r.state === "failing" ? " current" : ""), "data-state": "failing", href: queueHref(r.queue, "failing") }, "Failing"));
  const body = r.state === "failing" ? await failingView(r) : await tasksView(r);
  return () => {
    $("crumbs").replaceChildren(el("span", {}, " / "), el("a", { href: queueHref(r.queue, "retry") }, r.queue));
    $("main").replaceChildren(title, tabs, body);
  };
}

// The tabs of one state (tasksView) and the task page (taskPage) are in tasks.js.

async function failingView(r) {
  const section = el("section", { id: "failing" },
    el("p", { class: "muted" }, "Retry and archived tasks grouped by their last error, most frequent first. Many tasks with one error usually mean an external system is down."));
  for (const state of ["retry", "archived"]) {
    const data = await api("GET", "queues/" + q(r.queue) + "/errors?state=" + state);
    const rows = data.groups.map((g) => el("tr", { class: "group" },
      el("td", { class: "num count" }, g.count),
      el("td", { class: "last-err" }, g.last_err),
      timeCell("oldest", g.oldest), timeCell("newest", g.newest)));
    section.append(el("h2", {}, LABELS[state], " ", el("a", { class: "small", href: queueHref(r.queue, state) }, "show tasks")),
      rows.length
        ? el("table", { class: "groups", "data-state": state },
          el("thead", {}, el("tr", {}, el("th", { class: "num" }, "Tasks"), el("th", {}, "Last error"), el("th", {}, "First failed"), el("th", {}, "Last failed"))),
          el("tbody", {}, rows))
        : el("p", { class: "muted empty-groups", "data-state": state }, "No " + state + " task has an error."));
  }
  return section;
}

// ---- Start. ----
$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token-input").value);
  $("token-input").value = "";
  render(false);
});
window.addEventListener("hashchange", () => render(false));
$("mode").textContent = READ_ONLY ? "read-only" : "";
render(false);
timer = setInterval(() => {
  if (!document.hidden && !confirming && $("login").hidden) render(true);
}, REFRESH_MS);
