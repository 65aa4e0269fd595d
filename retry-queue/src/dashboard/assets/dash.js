// The retry-queue dashboard: plain JavaScript over the JSON API under ./api (no build step, no
// CDN). Every value from the API goes into the page as text (text nodes via el()), never as
// HTML, with control characters (NUL, BEL, ESC, U+202E, … but tab and newline) shown as
// visible escapes `\u{202E}`. With a
// token, it is asked for once and kept in this tab's sessionStorage; every API call sends it
// as `Authorization: Bearer …`.
//
// Views and the refresh chain. A view is `async (r) => paint`: it makes ONE api() call, builds
// its DOM off the page and returns a function that puts it on the page. `r` is the route:
// {view, parts (decoded path segments after the view's name), params (URLSearchParams)}.
// "#/" is the overview, "#/q/NAME/STATE" a queue; another script adds a page with
//   registerView("workers", async (r) => { const data = await api("GET", "workers"); return () => … });
// and "#/workers/…" shows it. The chain calls the current view: at once on navigation, then
// REFRESH_MS after the previous refresh finished (a setTimeout chain: never two in flight),
// not while the tab is hidden (it refreshes at once when shown again), nor while a question
// or the token form is open. Scripts load with `defer`, in order, before the first render.
"use strict";

const BASE = document.body.dataset.base || "";
const READ_ONLY = document.body.dataset.readOnly === "true";
const TOKEN_KEY = "retry-queue-token";
// Every 5 s; a tab may ask for another period (tests do): sessionStorage "retry-queue-refresh-ms".
const REFRESH_MS = Math.max(200, parseInt(sessionStorage.getItem("retry-queue-refresh-ms") || "", 10) || 5000);
const PAGE_SIZE = 20;
const STATES = ["pending", "scheduled", "active", "retry", "archived", "completed"];
const LABELS = {
  pending: "Pending", scheduled: "Scheduled", active: "Active",
  retry: "Retry", archived: "Archived", completed: "Completed", failing: "Failing",
};
// Which buttons a task gets, and which bulk actions a tab has, come with each page of tasks
// (`actions` of GET …/tasks): the server's rules, not a copy of them here.

let skewMs = 0;          // server clock minus browser clock, from each answer's `now`
let confirming = false;  // a bulk action waits for its confirmation: no auto-refresh meanwhile

// ---- DOM helpers: text only. ----
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "onclick") node.addEventListener("click", value);
    else if (key === "class") node.className = value;
    else if (key === "title") node.title = escapeBidi(String(value));
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : textOf(String(child)));
  }
  return node;
}
// Bidirectional controls would reorder what follows them (an id "evil\u202Etxt.exe" shows as
// "evilexe.txt"), and other control characters (NUL, BEL, ESC, DEL, C1) show as nothing or an
// empty box: every stored text is shown with them as marked, visible escapes (tab and newline
// stay as they are).
const BIDI = /([\u0000-\u0008\u000B-\u001F\u007F-\u009F\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069])/;
const escapeOne = (c) => "\\u{" + c.codePointAt(0).toString(16).toUpperCase() + "}";
function escapeBidi(s) {
  return s.replace(new RegExp(BIDI.source, "g"), escapeOne);
}
function textOf(s) {
  if (!BIDI.test(s)) return document.createTextNode(s);
  const out = document.createDocumentFragment();
  s.split(BIDI).forEach((part, i) => {
    if (i % 2) out.append(el("span", { class: "bidi", title: "a control character" }, escapeOne(part)));
    else if (part) out.append(document.createTextNode(part));
  });
  return out;
}
const $ = (id) => document.getElementById(id);

function flash(message, isError) {
  const box = $("flash");
  box.replaceChildren(el("span", {}, message));
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
// 401, or 429 after many wrong tokens (`throttled`: its message says how long to wait).
class Unauthorized extends Error {
  constructor(message, throttled) {
    super(message);
    this.throttled = throttled;
  }
}

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
  if (response.status === 401 || response.status === 429) {
    throw new Unauthorized((body && body.error) || "token needed", response.status === 429);
  }
  if (!response.ok) throw new Error((body && body.error) || "HTTP " + response.status);
  return body;
}
const q = encodeURIComponent;
// The API path of a queue's route `rest` with the query `query` (already encoded, or ""). A
// queue named "." or ".." would be resolved as a dot segment (even written %2E): its name goes
// in the query instead, after the path segment "~" (see the API's docs).
function queuePath(queue, rest, query) {
  const dots = queue === "." || queue === "..";
  const segment = dots ? "~" : q(queue);
  const params = [dots ? "queue=" + q(queue) : "", query || ""].filter((p) => p).join("&");
  return "queues/" + segment + "/" + rest + (params ? "?" + params : "");
}
// A task's action: the id in the query, where the browser keeps it as it is (in the path, an
// id "." or ".." would be resolved as a dot segment, even written %2E).
function taskAction(queue, id, action) {
  return queuePath(queue, "task/" + action, "id=" + q(id));
}

// ---- Overview: one row per queue. ----
async function renderOverview() {
  const data = await api("GET", "queues");
  setClock(data.now);
  const queues = data.queues;
  const head = el("tr", {}, el("th", {}, "Queue"),
    STATES.map((s) => el("th", { class: "num" }, LABELS[s])),
    el("th", {}, "State"), el("th", { class: "num" }, "Processed today"),
    el("th", { class: "num" }, "Failed today"), el("th", { class: "num" }, "Oldest pending"),
    READ_ONLY ? null : el("th", {}, ""));
  const rows = queues.map((s) => el("tr", { class: "queue-row", "data-queue": s.queue },
    el("td", {}, el("a", { class: "queue-link", href: queueHref(s.queue, "retry") }, s.queue)),
    STATES.map((state) => el("td", { class: "num count-" + state, "data-state": state },
      el("a", { href: queueHref(s.queue, state), class: s.counts[state] ? "" : "zero" }, s.counts[state]))),
    el("td", {}, s.paused ? el("span", { class: "badge paused" }, "paused") : el("span", { class: "badge running" }, "running"), " ", noWorkerBadge(s)),
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
    onclick: () => act("POST", queuePath(s.queue, action),
      "Queue " + s.queue + (s.paused ? " unpaused." : " paused: no task is claimed from it.")),
  }, s.paused ? "Unpause" : "Pause");
}

async function act(method, path, message) {
  try {
    await api(method, path);
    await refresh(true);
    flash(message, false);
  } catch (e) {
    if (e instanceof Unauthorized) return refresh(false);
    flash(e.message, true);
  }
}

// ---- One queue: tabs, the tasks of one state, or the failing view; one request, whose
// answer carries the queue's stats (the tabs' counts) and the server's clock. ----
async function renderQueue(r) {
  const data = r.state === "failing"
    ? await api("GET", queuePath(r.queue, "errors", "states=retry,archived"))
    : await api("GET", tasksQuery(r));
  setClock(data.now);
  const stats = data.stats;
  const title = el("div", { class: "title" }, el("h1", { id: "queue-name" }, r.queue),
    stats.paused ? el("span", { class: "badge paused", id: "paused-badge" }, "paused") : null,
    READ_ONLY ? null : pauseButton(stats));
  const tabs = el("nav", { id: "tabs" },
    STATES.map((state) => el("a", {
      class: "tab" + (state === r.state ? " current" : ""), "data-state": state, href: queueHref(r.queue, state),
    }, LABELS[state], " ", el("span", { class: "count" }, stats.counts[state]),
      state === "active" ? waitingNote(stats) : null)),
    el("a", { class: "tab failing" + (r.state === "failing" ? " current" : ""), "data-state": "failing", href: queueHref(r.queue, "failing") }, "Failing"));
  const body = r.state === "failing" ? failingView(r, data) : tasksView(r, data);
  // The chart's data is fetched when the queue or its range changes, at most once a minute
  // otherwise: most refreshes draw it from what was fetched (see chart.js).
  const chart = await historyChart(r.queue);
  const systems = systemsTable(await queueSystems(r.queue));
  return () => {
    $("crumbs").replaceChildren(el("span", {}, " / "), el("a", { href: queueHref(r.queue, "retry") }, r.queue));
    $("main").replaceChildren(title, noWorkerBanner(stats), chart, systems, tabs, body);
  };
}

// The queue's systems, fetched when the queue changes and at most every 30 s otherwise (like
// the chart): a refresh stays one request, the tasks'.
const SYSTEMS_TTL_MS = 30000;
let systemsCache = null; // { queue, at, data }
async function queueSystems(queue) {
  if (!systemsCache || systemsCache.queue !== queue || Date.now() - systemsCache.at > SYSTEMS_TTL_MS) {
    systemsCache = { queue, at: Date.now(), data: await api("GET", queuePath(queue, "systems")) };
  }
  return systemsCache.data;
}

// The workers' last health probes of a system (worst-of: failed if any worker's failed), as of
// the fetch: "passed 3 s ago", "failed 1 min ago (1 of 3): <error>"; "-" without a probe.
function probeCell(p) {
  if (!p) return el("td", { class: "probe" }, el("span", { class: "muted" }, "-"));
  const outcome = p.passed ? "passed" : "failed";
  return el("td", { class: "probe" },
    el("span", { class: "badge probe-" + outcome }, outcome),
    " " + (p.age_ms < 1000 ? "now" : span(p.age_ms) + " ago"),
    !p.passed && p.workers > 1 ? " (" + p.failed + " of " + p.workers + ")" : null,
    p.error === null ? null : el("span", { class: "probe-error", title: p.error }, ": " + p.error));
}

// The queue's tasks per external system, and what the workers report of each (breaker, the
// rate its tasks start at, a slow start under way, their last probe); a sentence when no task
// names a system (an element either way: replaceChildren writes a null as the text "null").
function systemsTable(data) {
  if (!data.systems.length) {
    return el("p", { id: "systems-empty", class: "muted" }, "No task of this queue names an external system.");
  }
  const rate = (s) => s.workers === 0 ? "-" : s.rate === null ? "unlimited" : s.rate.toFixed(1) + "/s" + (s.ramping ? " (ramping)" : "");
  const rows = data.systems.map((s) => el("tr", { class: "system", "data-system": s.system },
    el("td", { class: "name" }, s.system),
    el("td", { class: "num due" }, s.due),
    el("td", { class: "num deferred" }, s.deferred),
    el("td", { class: "num in-flight" }, s.in_flight),
    el("td", { class: "breaker" }, el("span", { class: "badge breaker-" + (s.breaker || "none") }, s.breaker || "-")),
    el("td", { class: "num rate" }, rate(s)),
    probeCell(s.probe)));
  return el("table", { id: "systems" },
    el("thead", {}, el("tr", {}, el("th", {}, "System"), el("th", { class: "num" }, "Due"), el("th", { class: "num" }, "Deferred"),
      el("th", { class: "num" }, "In flight"), el("th", {}, "Breaker"), el("th", { class: "num" }, "Rate"),
      el("th", {}, "Probe"))),
    el("tbody", {}, rows));
}

// Active tasks a worker claimed ahead (prefetched) but does not run yet: the Active tab says
// how many of its tasks are running, by the live workers' heartbeats.
function waitingNote(stats) {
  const waiting = stats.counts.active - stats.running;
  return waiting > 0
    ? el("span", { class: "waiting muted", title: "claimed by a worker ahead, not running yet" }, " (" + stats.running + " running, " + waiting + " waiting)")
    : null;
}

// The tabs of one state (tasksView) and the task page (taskPage) are in tasks.js.

function failingView(r, answer) {
  const section = el("section", { id: "failing" },
    el("p", { class: "muted" }, "Retry and archived tasks grouped by their last error, most frequent first. Many tasks with one error usually mean an external system is down."));
  for (const data of answer.states) {
    const state = data.state;
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
