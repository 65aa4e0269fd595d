// The tasks of one state (tasksView: a kind selector, a search box, checkboxes and an action
// bar, flags for expired leases and overdue retries) and the page of one task (taskPage:
// payload, every failure, its actions). Loaded after dash.js and views.js, whose helpers (el,
// api, q, flash, refresh, registerView, taskAction, …) these functions call. The queue page's
// one request per refresh is `tasksQuery(r)` (dash.js's renderQueue makes it), which brings
// the kinds of the selector too. Every value goes in as text.
"use strict";

const OVERDUE_MS = 60 * 1000; // a retry due longer ago than this is flagged: no worker took it
let expanded = new Set();     // task ids whose payload row is open
let selected = new Set();     // task ids ticked in the current list
let selectionKey = "";        // the list the selection belongs to (queue, state, filter)

// replaceChildren takes nodes, not arrays or nulls (it would write them as text).
function nodes(...children) {
  return children.flat().filter((child) => child !== null && child !== undefined);
}
function taskHref(queue, id) {
  return "#/q/" + q(queue) + "/task/" + q(id);
}
// The list of `state` with a filter: kind, search, and where a cursor-paged list goes on.
function findHref(queue, state, filter) {
  const params = new URLSearchParams();
  for (const key of ["kind", "search", "after"]) if (filter[key]) params.set(key, filter[key]);
  const text = params.toString();
  return queueHref(queue, state) + (text ? "?" + text : "");
}

// ---- Flags: what looks fine but is not. ----
function leaseExpired(t) {
  return t.state === "active" && t.lease_expires_at && Date.parse(t.lease_expires_at) < nowMs();
}
function overdueMs(t) {
  if (t.state !== "retry" || !t.next_process_at) return 0;
  const late = nowMs() - Date.parse(t.next_process_at);
  return late > OVERDUE_MS ? late : 0;
}
// An active task no live worker runs (by the heartbeats): claimed ahead, it waits for a slot.
function prefetched(data, t) {
  return t.state === "active" && Array.isArray(data.running) && !data.running.includes(t.id);
}
// The cell of a task's time column, flagged when the time has passed and nothing happened.
function flaggedTimeCell(t, field) {
  if (field === "lease_expires_at" && leaseExpired(t)) {
    return el("td", { class: "next", title: t.lease_expires_at },
      el("div", { class: "flag lease-expired" }, "lease expired — the recoverer will retry it"),
      el("div", { class: "abs muted" }, absolute(t.lease_expires_at)));
  }
  if (field === "next_process_at" && overdueMs(t)) {
    return el("td", { class: "next", title: t.next_process_at },
      el("div", { class: "flag overdue" }, "overdue by " + span(overdueMs(t))),
      el("div", { class: "abs muted" }, absolute(t.next_process_at)));
  }
  return timeCell("next", t[field]);
}

// ---- One state: find, select, act. ----
// The filter of the list, from the route's query: kind, search, and the cursor of a
// filtered list.
function filterOf(r) {
  return { kind: r.params.get("kind") || "", search: r.params.get("search") || "", after: r.params.get("after") || "" };
}

// The one request of a state's tab: a page by number, or with a filter a page by cursor.
function tasksQuery(r) {
  const filter = filterOf(r);
  const base = queuePath(r.queue, "tasks", "state=" + r.state + "&size=" + PAGE_SIZE + "&kinds=1");
  if (!filter.kind && !filter.search) return base + "&page=" + r.page;
  return base + (filter.kind ? "&kind=" + q(filter.kind) : "") + (filter.search ? "&search=" + q(filter.search) : "")
    + (filter.after ? "&after=" + q(filter.after) : "");
}

function tasksView(r, data) {
  const filter = filterOf(r);
  const filtered = Boolean(filter.kind || filter.search);
  const key = [r.queue, r.state, filter.kind, filter.search].join("\u0000");
  if (key !== selectionKey) {
    selectionKey = key;
    selected = new Set();
  }
  const actions = READ_ONLY ? [] : data.actions.task;
  const findBar = findForm(r, filter, data.kinds || []);
  const info = filtered ? searchInfo(r, filter, data) : null;
  const toolbar = el("div", { class: "toolbar" }, filtered ? cursorPager(r, filter, data) : numberPager(r, data),
    el("span", { class: "spacer" }),
    !READ_ONLY && !filtered && data.actions.bulk.includes("run-all") && data.total
      ? el("button", { id: "run-all", onclick: () => confirmBulk(r, "run-all", data.total) }, "Run all") : null,
    !READ_ONLY && !filtered && data.actions.bulk.includes("delete-all") && data.total
      ? el("button", { id: "delete-all", class: "danger", onclick: () => confirmBulk(r, "delete-all", data.total) }, "Delete all") : null);
  const [lastCol, lastTime] = LAST_COLUMN[r.state];
  const pageIds = data.tasks.map((t) => t.id);
  const head = el("tr", {},
    actions.length ? el("th", { class: "select" }, el("input", {
      type: "checkbox", id: "select-page", title: "Select every task of this page",
      checked: pageIds.length > 0 && pageIds.every((id) => selected.has(id)),
      onclick: (event) => selectPage(pageIds, event.target.checked),
    })) : null,
    el("th", {}, "ID"), el("th", {}, "Kind"), el("th", { class: "num" }, "Retried"),
    el("th", {}, "Last error"), el("th", {}, "Last failed"), el("th", {}, lastCol), el("th", {}, ""));
  const columns = actions.length ? 8 : 7;
  const rows = [];
  for (const t of data.tasks) {
    rows.push(el("tr", { class: "task", "data-id": t.id },
      actions.length ? el("td", { class: "select" }, el("input", {
        type: "checkbox", class: "select-task", "data-id": t.id, checked: selected.has(t.id),
        onclick: (event) => selectOne(t.id, event.target.checked),
      })) : null,
      el("td", { class: "id", title: t.id }, el("a", { class: "task-link", href: taskHref(r.queue, t.id) }, el("code", {}, t.id)),
        prefetched(data, t) ? [" ", el("span", { class: "badge waiting", title: "claimed ahead by a worker (prefetched): waits for a free slot" }, "waiting")] : null),
      el("td", { class: "kind" }, t.kind),
      el("td", { class: "num retried" }, t.retried + "/" + t.max_retry),
      el("td", { class: "last-err", title: t.last_err }, t.last_err === null ? el("span", { class: "muted" }, "—") : el("div", { class: "clamp" }, t.last_err)),
      timeCell("last-failed", t.last_failed_at),
      flaggedTimeCell(t, lastTime),
      el("td", { class: "actions" },
        el("button", { class: "expand quiet", "data-id": t.id, onclick: () => toggle(t.id) }, expanded.has(t.id) ? "Hide" : "Details"),
        actions.map((a) => el("button", {
          class: "act" + (a === "delete" ? " danger" : ""), "data-action": a, "data-id": t.id,
          onclick: () => act("POST", taskAction(r.queue, t.id, a), "Task " + t.id + ": " + a + " done."),
        }, LABELS_ACTION[a])))));
    rows.push(el("tr", { class: "payload-row", "data-id": t.id, hidden: !expanded.has(t.id) },
      el("td", { colspan: columns },
        el("div", { class: "meta muted" }, "enqueued " + absolute(t.enqueued_at) + " (" + relative(t.enqueued_at) + ")",
          t.completed_at ? " · completed " + absolute(t.completed_at) : ""),
        t.last_err === null ? null : [el("div", { class: "label muted" }, "Last error"), el("pre", { class: "full-err" }, t.last_err)],
        el("div", { class: "label muted" }, "Payload"),
        el("pre", { class: "payload" }, pretty(t.payload)))));
  }
  const table = el("table", { id: "tasks", "data-state": r.state }, el("thead", {}, head), el("tbody", {}, rows));
  const empty = data.tasks.length ? null : el("p", { id: "empty", class: "muted" },
    filtered ? "No " + r.state + " task found" + (data.search_limit_reached ? " in the tasks searched." : ".")
      : "No " + LABELS[r.state].toLowerCase() + " tasks" + (r.page > 1 ? " on this page." : "."));
  return el("section", { id: "state-view" }, findBar, info, toolbar, el("div", { id: "confirm", hidden: true }),
    actions.length ? selectionBar(r, actions) : null, table, empty);
}
const LABELS_ACTION = { run: "Run", delete: "Delete", archive: "Archive", cancel: "Cancel" };
// The last time column of each tab: its header and the task field it shows.
const LAST_COLUMN = {
  pending: ["Due", "next_process_at"], scheduled: ["Runs", "next_process_at"],
  active: ["Lease expires", "lease_expires_at"], retry: ["Next attempt", "next_process_at"],
  archived: ["Enqueued", "enqueued_at"], completed: ["Completed", "completed_at"],
};

function numberPager(r, data) {
  const pages = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
  const first = data.tasks.length ? (r.page - 1) * PAGE_SIZE + 1 : 0;
  return [
    el("span", { id: "page-info", class: "muted" },
      data.total ? first + "–" + (first + data.tasks.length - 1) + " of " + data.total : "0 tasks"),
    el("a", { id: "prev", class: "pager" + (r.page > 1 ? "" : " disabled"), href: r.page > 1 ? queueHref(r.queue, r.state, r.page - 1) : null }, "‹ Prev"),
    el("span", { class: "muted" }, "page " + r.page + " of " + pages),
    el("a", { id: "next", class: "pager" + (r.page < pages ? "" : " disabled"), href: r.page < pages ? queueHref(r.queue, r.state, r.page + 1) : null }, "Next ›"),
  ];
}

// A filtered list pages by cursor: back to its first page, or on to the next.
function cursorPager(r, filter, data) {
  const first = { kind: filter.kind, search: filter.search };
  return [
    el("span", { id: "page-info", class: "muted" }, data.tasks.length + " found (of " + data.total + " " + r.state + ")"),
    el("a", { id: "first", class: "pager" + (filter.after ? "" : " disabled"), href: filter.after ? findHref(r.queue, r.state, first) : null }, "« First"),
    el("a", { id: "next", class: "pager" + (data.next ? "" : " disabled"), href: data.next ? findHref(r.queue, r.state, { ...first, after: data.next }) : null }, "Next ›"),
  ];
}

function findForm(r, filter, kinds) {
  const options = [el("option", { value: "" }, "All kinds")];
  const known = kinds.includes(filter.kind) || !filter.kind ? kinds : [filter.kind, ...kinds];
  for (const kind of known) options.push(el("option", { value: kind, selected: kind === filter.kind }, kind));
  const search = el("input", {
    id: "search", type: "search", value: filter.search, maxlength: 256,
    placeholder: "Search id, payload, error", "aria-label": "Search id, payload or last error",
  });
  // Typing must not be wiped by the auto-refresh: it waits while the box has the focus.
  search.addEventListener("focus", () => { confirming = true; });
  search.addEventListener("blur", () => { confirming = false; });
  const kind = el("select", { id: "kind-filter", "aria-label": "Kind" }, options);
  const form = el("form", { id: "find", class: "toolbar" }, kind, search,
    el("button", { id: "search-go", type: "submit" }, "Search"),
    filter.kind || filter.search ? el("a", { id: "search-clear", href: queueHref(r.queue, r.state) }, "Clear") : null);
  const go = () => {
    confirming = false;
    location.hash = findHref(r.queue, r.state, { kind: kind.value, search: search.value.trim() });
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); go(); });
  kind.addEventListener("change", go);
  return form;
}

// What a search read: honest about the tasks it did not.
function searchInfo(r, filter, data) {
  if (data.searched === null) return null;
  const order = r.state === "archived" || r.state === "completed" ? "newest" : "soonest due";
  const text = "Searched " + data.searched + " " + r.state + " tasks" + (filter.after ? " from where the last search stopped" : "");
  if (!data.search_limit_reached) return el("p", { id: "search-info", class: "muted" }, text + ".");
  return el("p", { id: "search-info", class: "warn" },
    text + ": a search reads the " + order + " " + data.search_window + " tasks at a time; tasks after them were not searched. ",
    el("a", { id: "search-further", href: findHref(r.queue, r.state, { kind: filter.kind, search: filter.search, after: data.next }) }, "Search the next " + data.search_window + " ›"));
}

function selectionBar(r, actions) {
  const bar = el("div", { id: "selection-bar", hidden: selected.size === 0 },
    el("span", { id: "selected-count" }, selected.size + " selected"),
    actions.map((a) => el("button", {
      id: "batch-" + a, class: a === "delete" ? "danger" : "", "data-action": a,
      onclick: () => (a === "delete" ? confirmBatch(r, a) : runBatch(r, a)),
    }, LABELS_ACTION[a] + " selected")),
    el("button", { id: "select-none", class: "quiet", onclick: () => selectPage([...selected], false) }, "Clear selection"));
  return bar;
}
function showSelection() {
  const bar = $("selection-bar");
  if (!bar) return;
  bar.hidden = selected.size === 0;
  $("selected-count").textContent = selected.size + " selected";
  for (const box of document.querySelectorAll("input.select-task")) box.checked = selected.has(box.dataset.id);
  const all = $("select-page");
  const boxes = [...document.querySelectorAll("input.select-task")];
  if (all) all.checked = boxes.length > 0 && boxes.every((box) => box.checked);
}
function selectOne(id, on) {
  if (on) selected.add(id);
  else selected.delete(id);
  showSelection();
}
function selectPage(ids, on) {
  for (const id of ids) {
    if (on) selected.add(id);
    else selected.delete(id);
  }
  showSelection();
}

function confirmBatch(r, action) {
  const box = $("confirm");
  confirming = true;
  renderSeq++; // a refresh under way does not wipe the question
  box.replaceChildren(
    el("span", { id: "confirm-text" }, LABELS_ACTION[action] + " " + selected.size + " selected " + r.state + " tasks of " + r.queue + "?"),
    el("button", { id: "confirm-yes", class: "danger", onclick: () => { confirming = false; runBatch(r, action); } },
      "Yes, " + action + " them"),
    el("button", { id: "confirm-no", class: "quiet", onclick: () => { confirming = false; box.hidden = true; } }, "Cancel"));
  box.hidden = false;
}

async function runBatch(r, action) {
  const ids = [...selected];
  try {
    const result = await api("POST", queuePath(r.queue, "tasks/batch"), { action, ids });
    selected = new Set();
    await refresh(true);
    const failed = result.failed.map((f) => f.id + " (" + f.error + ")");
    flash(LABELS_ACTION[action] + ": " + result.done + " done" + (failed.length ? "; not done: " + failed.join(", ") : "."), failed.length > 0);
  } catch (e) {
    if (e instanceof Unauthorized) return refresh(false);
    flash(e.message, true);
  }
}

function pretty(payload) {
  try {
    return JSON.stringify(JSON.parse(payload), null, 2);
  } catch (_) {
    return payload;
  }
}

function toggle(id) {
  if (expanded.has(id)) expanded.delete(id);
  else expanded.add(id);
  for (const row of document.querySelectorAll("tr.payload-row")) {
    if (row.dataset.id === id) row.hidden = !expanded.has(id);
  }
  for (const button of document.querySelectorAll("button.expand")) {
    if (button.dataset.id === id) button.textContent = expanded.has(id) ? "Hide" : "Details";
  }
}

function confirmBulk(r, action, total) {
  const verb = action === "run-all" ? "Run" : "Delete";
  const box = $("confirm");
  confirming = true;
  renderSeq++; // a refresh under way does not wipe the question
  box.replaceChildren(
    el("span", { id: "confirm-text" }, verb + " all " + total + " " + r.state + " tasks of " + r.queue + "?"),
    el("button", {
      id: "confirm-yes", class: action === "delete-all" ? "danger" : "", onclick: () => {
        confirming = false;
        act("POST", queuePath(r.queue, action, "state=" + r.state), verb + " all " + r.state + " tasks: done.");
      },
    }, "Yes, " + verb.toLowerCase() + " all"),
    el("button", { id: "confirm-no", class: "quiet", onclick: () => { confirming = false; box.hidden = true; } }, "Cancel"));
  box.hidden = false;
}

// ---- One task: #/q/NAME/task/ID. ----
async function taskPage(r) {
  let t;
  try {
    t = await api("GET", queuePath(r.queue, "task", "id=" + q(r.id)));
    setClock(t.now); // the server's clock, for the relative times and the flags
  } catch (e) {
    if (e instanceof Unauthorized || !/^no task/.test(e.message)) throw e;
    return () => {
      taskCrumbs(r, null);
      $("main").replaceChildren(el("h1", {}, "Task"), el("p", { id: "task-missing", class: "muted" },
        "No task ", el("code", {}, r.id), " in queue " + r.queue + ": deleted, trimmed after it completed, or never enqueued."));
    };
  }
  const actions = READ_ONLY ? [] : t.actions;
  const field = (name, ...value) => el("tr", {}, el("th", {}, name), el("td", { class: "field-" + name.toLowerCase().replace(/ /g, "-") }, ...value));
  const when = (iso) => (iso ? [relative(iso), " ", el("span", { class: "muted" }, absolute(iso))] : el("span", { class: "muted" }, "—"));
  const flag = leaseExpired(t) ? el("span", { class: "flag lease-expired" }, "lease expired — the recoverer will retry it")
    : overdueMs(t) ? el("span", { class: "flag overdue" }, "overdue by " + span(overdueMs(t))) : null;
  const fields = el("table", { id: "task-fields", class: "fields" }, el("tbody", {},
    field("State", el("span", { id: "task-state", class: "badge state-" + t.state }, t.state), " ", flag),
    t.archive_reason ? field("Archive reason", el("code", { id: "task-archive-reason" }, t.archive_reason)) : null,
    field("Kind", t.kind),
    field("System", t.system || "-"),
    field("Retried", t.retried + "/" + t.max_retry),
    field("Enqueued", when(t.enqueued_at)),
    t.next_process_at ? field("Next attempt", when(t.next_process_at)) : null,
    t.lease_expires_at ? field("Lease expires", when(t.lease_expires_at)) : null,
    t.last_failed_at ? field("Last failed", when(t.last_failed_at)) : null,
    t.completed_at ? field("Completed", when(t.completed_at)) : null,
    t.trace_id ? field("Trace", el("code", { id: "task-trace", title: "traceparent " + t.trace_parent }, t.trace_id)) : null));
  const buttons = el("div", { id: "task-actions", class: "toolbar" }, actions.map((a) => el("button", {
    id: "task-" + a, class: a === "delete" ? "danger" : "", "data-action": a,
    onclick: () => (a === "delete" ? confirmTaskDelete(r) : actOnTask(r, a)),
  }, LABELS_ACTION[a])));
  const failures = t.errors.length
    ? el("table", { id: "failures" }, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "Attempt"), el("th", {}, "Failed at"), el("th", {}, "Error"))),
      el("tbody", {}, t.errors.slice().reverse().map((f) => el("tr", { class: "failure" },
        el("td", { class: "num" }, "#" + (f.retried + 1)),
        timeCell("failed-at", f.at),
        el("td", {}, el("pre", { class: "full-err" }, f.error))))))
    : el("p", { id: "no-failures", class: "muted" }, "No failed attempt.");
  return () => {
    taskCrumbs(r, t.state);
    $("main").replaceChildren(...nodes(
      el("div", { class: "title" }, el("h1", {}, "Task ", el("code", { id: "task-id" }, t.id))),
      fields, buttons, el("div", { id: "confirm", hidden: true }),
      t.last_err === null ? null : [el("h2", {}, "Last error"), el("pre", { id: "task-last-err", class: "full-err" }, t.last_err)],
      el("h2", {}, "Payload"), el("pre", { id: "task-payload", class: "payload" }, pretty(t.payload)),
      el("h2", {}, "Failures ", el("span", { class: "muted small" }, "(the last 10, newest first)")), failures));
  };
}
function taskCrumbs(r, state) {
  $("crumbs").replaceChildren(...nodes(el("span", {}, " / "), el("a", { href: queueHref(r.queue, "retry") }, r.queue),
    state ? [el("span", {}, " / "), el("a", { id: "task-state-link", href: queueHref(r.queue, state) }, LABELS[state])] : null,
    el("span", {}, " / "), el("code", {}, r.id)));
}
async function actOnTask(r, action) {
  try {
    await api("POST", taskAction(r.queue, r.id, action));
    await refresh(true);
    flash("Task " + r.id + ": " + action + " done.", false);
  } catch (e) {
    if (e instanceof Unauthorized) return refresh(false);
    flash(e.message, true);
  }
}
function confirmTaskDelete(r) {
  const box = $("confirm");
  confirming = true;
  renderSeq++;
  box.replaceChildren(el("span", { id: "confirm-text" }, "Delete task " + r.id + " of " + r.queue + "?"),
    el("button", { id: "confirm-yes", class: "danger", onclick: () => { confirming = false; actOnTask(r, "delete"); } }, "Yes, delete it"),
    el("button", { id: "confirm-no", class: "quiet", onclick: () => { confirming = false; box.hidden = true; } }, "Cancel"));
  box.hidden = false;
}

registerView("task", taskPage);
