// The Workers and Schedulers pages (#/workers, #/schedulers) and the "no worker is running"
// banner of the overview and the queue page. Loaded after dash.js and views.js, whose helpers
// (el, api, q, timeCell, queueHref, registerView, …) these functions call. One request per
// render; relative times use the server clock's offset from the last answer. Every value goes
// into the page as text.
"use strict";

// A queue needs a worker when it has work due: tasks pending or active, or a scheduled or
// retry task whose time has come (`next_due_at` in the past); `workers` (from /api/queues)
// counts the live workers serving it, by their heartbeats.
function overdue(s) {
  return s.next_due_at !== null && Date.parse(s.next_due_at) <= nowMs();
}
function needsWorker(s) {
  return s.workers === 0 && (s.counts.pending > 0 || s.counts.active > 0 || overdue(s));
}

// The overview row's flag next to the running/paused badge; null when a worker serves it.
function noWorkerBadge(s) {
  return needsWorker(s)
    ? el("span", { class: "badge no-worker", title: "No live worker heartbeat serves this queue" }, "no worker is running")
    : null;
}

// The queue page's banner: always there, hidden while a worker serves the queue.
function noWorkerBanner(s) {
  const tasks = s.counts.pending + s.counts.active;
  const due = overdue(s)
    ? " Scheduled or retry tasks are due since " + absolute(s.next_due_at) + " (" + relative(s.next_due_at) + ")."
    : "";
  return el("div", { id: "no-worker", class: "banner", role: "alert", hidden: !needsWorker(s) },
    el("strong", {}, "No worker is running"),
    " for this queue: " + tasks + (tasks === 1 ? " task is" : " tasks are") +
    " pending or active." + due + " No live worker heartbeat covers it. Start a worker that serves " + JSON.stringify(s.queue) + ".");
}

function pageCrumbs(name) {
  $("crumbs").replaceChildren(el("span", {}, " / "), el("span", {}, name));
}

// ---- #/workers: every live worker, then every task they run. ----
async function renderWorkers() {
  const data = await api("GET", "workers");
  const workers = data.workers;
  // A queue the worker leads (runs the maintenance of) carries a "leader" badge.
  const leaderBadge = (w, name) => w.leader_of.includes(name)
    ? el("span", { class: "badge leader", title: "Leader of " + name + ": runs its maintenance (recovers expired leases, trims finished tasks)" }, "leader")
    : null;
  const rows = workers.map((w) => el("tr", { class: w.leader_of.length ? "worker leader" : "worker", "data-id": w.id, "data-leader-of": w.leader_of.join(",") },
    el("td", { class: "id", title: w.id }, el("code", {}, w.id)),
    el("td", { class: "host" }, w.host),
    el("td", { class: "num pid" }, w.pid),
    el("td", { class: "queues" }, w.queues.flatMap((name, i) => [i ? ", " : null, el("a", { href: queueHref(name, "active") }, name), leaderBadge(w, name)])),
    el("td", { class: "num busy" }, w.active.length + "/" + w.concurrency),
    timeCell("started", w.started_at),
    timeCell("beat", w.last_heartbeat_at)));
  const held = [];
  for (const w of workers) {
    for (const t of w.active) {
      held.push(el("tr", { class: "held-task", "data-id": t.id, "data-worker": w.id },
        el("td", { class: "id", title: t.id }, el("code", {}, t.id)),
        el("td", { class: "kind" }, t.kind),
        el("td", { class: "queue" }, el("a", { href: queueHref(t.queue, "active") }, t.queue)),
        el("td", { class: "worker", title: w.id }, w.host + " · " + w.pid),
        timeCell("started", t.started_at)));
    }
  }
  const section = el("section", { id: "workers-view" },
    el("p", { class: "muted" }, "Worker processes with a live heartbeat (written every few seconds; a worker that misses three is dropped). A worker that stops gracefully leaves at once. Each queue has one leader, marked \u201cleader\u201d, which runs the queue's maintenance for all its workers."));
  if (!workers.length) {
    section.append(el("p", { id: "empty", class: "muted" }, "No worker is running."));
  } else {
    section.append(
      el("table", { id: "workers" },
        el("thead", {}, el("tr", {}, el("th", {}, "Worker"), el("th", {}, "Host"), el("th", { class: "num" }, "PID"),
          el("th", {}, "Queues"), el("th", { class: "num" }, "Busy"), el("th", {}, "Started"), el("th", {}, "Last heartbeat"))),
        el("tbody", {}, rows)),
      el("h2", {}, "Running tasks"),
      held.length
        ? el("table", { id: "held" },
          el("thead", {}, el("tr", {}, el("th", {}, "Task"), el("th", {}, "Kind"), el("th", {}, "Queue"), el("th", {}, "Worker"), el("th", {}, "Started"))),
          el("tbody", {}, held))
        : el("p", { id: "no-held", class: "muted" }, "The workers are idle."));
  }
  return () => {
    pageCrumbs("Workers");
    $("main").replaceChildren(el("h1", {}, "Workers"), section);
  };
}

// ---- #/schedulers: every entry of the live schedulers. ----
async function renderSchedulers() {
  const data = await api("GET", "schedulers");
  const rows = data.entries.map((e) => el("tr", { class: "entry", "data-queue": e.queue, "data-spec": e.spec },
    el("td", { class: "queue" }, el("a", { href: queueHref(e.queue, "pending") }, e.queue)),
    el("td", { class: "kind" }, e.kind === null ? el("span", { class: "muted" }, "—") : e.kind),
    el("td", { class: "spec" }, el("code", {}, e.spec)),
    timeCell("next-run", e.next_run_at),
    timeCell("last-enqueued", e.last_enqueued_at),
    el("td", { class: "last-task", title: e.last_task_id || "" }, e.last_task_id === null ? el("span", { class: "muted" }, "—") : el("code", {}, e.last_task_id)),
    el("td", { class: "scheduler", title: e.scheduler }, e.scheduler)));
  const section = el("section", { id: "schedulers-view" },
    el("p", { class: "muted" }, "Periodic entries of the schedulers with a live heartbeat. Each period's task is enqueued once, by whichever instance gets there first: the others show no last enqueue."));
  section.append(rows.length
    ? el("table", { id: "schedulers" },
      el("thead", {}, el("tr", {}, el("th", {}, "Queue"), el("th", {}, "Kind"), el("th", {}, "Spec"), el("th", {}, "Next run"),
        el("th", {}, "Last enqueued"), el("th", {}, "Last task"), el("th", {}, "Scheduler"))),
      el("tbody", {}, rows))
    : el("p", { id: "empty", class: "muted" }, "No scheduler is running."));
  return () => {
    pageCrumbs("Schedulers");
    $("main").replaceChildren(el("h1", {}, "Schedulers"), section);
  };
}

registerView("workers", renderWorkers);
registerView("schedulers", renderSchedulers);
