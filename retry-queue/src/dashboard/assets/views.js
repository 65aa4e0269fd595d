// The retry-queue dashboard's views, router and refresh chain (the top of dash.js says how a
// page registers its view). Loaded after dash.js (whose helpers it calls: api, flash, $) and
// before the pages' own scripts (which call registerView()).
"use strict";

const VIEWS = {};
function registerView(name, render) {
  VIEWS[name] = render;
}

// ---- Routing: #/ (overview), #/q/NAME/STATE?page=N (or ?kind=K&search=S&after=CURSOR),
// #/q/NAME/failing, #/q/NAME/task/ID (tasks.js), #/VIEW/…. ----
function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  let parts;
  try {
    parts = path.split("/").filter((p) => p !== "").map(decodeURIComponent);
  } catch (_) {
    return { view: "overview", parts: [], params, bad: true }; // a malformed %-escape
  }
  if (parts[0] === "q" && parts[2] === "task" && parts.length >= 4) {
    return { view: "task", queue: parts[1], id: parts[3], parts: parts.slice(1), params };
  }
  if (parts[0] === "q" && parts.length >= 2) {
    let state = parts[2] || "retry";
    if (state !== "failing" && !STATES.includes(state)) state = "retry";
    const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
    return { view: "queue", queue: parts[1], state, page, parts: parts.slice(1), params };
  }
  if (parts.length && VIEWS[parts[0]] && parts[0] !== "overview") {
    return { view: parts[0], parts: parts.slice(1), params };
  }
  return { view: "overview", parts: [], params };
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
    const paint = await VIEWS[r.view](r);
    if (seq !== renderSeq) return;
    paint();
    $("login").hidden = true;
    $("main").hidden = false;
    // UTC, as every other time of the page.
    $("refreshed").textContent = "updated " + new Date(nowMs()).toISOString().slice(11, 19) + " UTC";
    if (r.bad) flash("This link is malformed (a bad %-escape after #): here is the overview.", true);
  } catch (e) {
    if (seq !== renderSeq) return;
    if (e instanceof Unauthorized) {
      $("main").hidden = true;
      $("login").hidden = false;
      if (e.throttled) flash(e.message, true);
      else if (sessionStorage.getItem(TOKEN_KEY)) flash("The token was refused.", true);
    } else {
      flash(e.message, true);
    }
  }
}

// ---- The refresh chain (see the top of this file). ----
let timer = null;     // the next refresh, when one is scheduled
let running = false;  // a render is under way
let again = null;     // {quiet, done: [resolve…]}: asked for while one ran; runs after it

async function refresh(quiet) {
  if (running) {
    renderSeq++; // the render under way paints nothing: the newer one will
    again = again || { quiet: true, done: [] };
    again.quiet = again.quiet && quiet;
    return new Promise((resolve) => again.done.push(resolve));
  }
  running = true;
  clearTimeout(timer);
  timer = null;
  try {
    await render(quiet);
    while (again) {
      const next = again;
      again = null;
      await render(next.quiet);
      next.done.forEach((resolve) => resolve());
    }
  } finally {
    running = false;
    schedule();
  }
}
function schedule() {
  clearTimeout(timer);
  timer = null;
  if (document.hidden) return;
  timer = setTimeout(() => {
    timer = null;
    if (confirming || !$("login").hidden) schedule();
    else refresh(true);
  }, REFRESH_MS);
}
document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
  } else if (!running) {
    if (confirming || !$("login").hidden) schedule();
    else refresh(true);
  }
});

function setClock(now) {
  skewMs = Date.parse(now) - Date.now();
}

// ---- Start, once every deferred script has registered its views. ----
registerView("overview", renderOverview);
registerView("queue", renderQueue);
$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
  $("token-input").value = "";
  refresh(false);
});
window.addEventListener("hashchange", () => refresh(false));
$("mode").textContent = READ_ONLY ? "read-only" : "";
document.addEventListener("DOMContentLoaded", () => refresh(false));
