// The queue page's chart: finished attempts per hour or day (GET …/history), the failed ones
// stacked in red, drawn as inline SVG (no charting library). Its data is fetched when the
// queue or the range changes and at most once a minute otherwise, so most refreshes of the
// page draw it from what was fetched and cost no request. Text goes in as text nodes only.
"use strict";

const HISTORY_RANGES = [
  ["24h", "hours=24", "the last 24 hours"],
  ["7d", "hours=168", "the last 7 days"],
  ["30d", "days=30", "the last 30 days"],
  ["90d", "days=90", "the last 90 days"],
];
const HISTORY_TTL_MS = 60000;
const SVG_NS = "http://www.w3.org/2000/svg";
let historyRange = "24h";
let historyCache = null; // { queue, range, at, data }

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

// The chart section of `queue`: the range switch and the drawing.
async function historyChart(queue) {
  const stale = !historyCache || historyCache.queue !== queue || historyCache.range !== historyRange
    || Date.now() - historyCache.at > HISTORY_TTL_MS;
  if (stale) {
    const [, query] = HISTORY_RANGES.find(([name]) => name === historyRange);
    const data = await api("GET", queuePath(queue, "history", query));
    historyCache = { queue, range: historyRange, at: Date.now(), data };
  }
  const switcher = el("span", { class: "ranges", id: "history-ranges" }, HISTORY_RANGES.map(([name]) =>
    el("button", {
      class: "range" + (name === historyRange ? " current" : " quiet"), "data-range": name,
      onclick: () => { historyRange = name; render(true); },
    }, name)));
  return el("section", { id: "history" }, drawHistory(historyCache.data), switcher);
}

function bucketLabel(iso, daily) {
  const d = new Date(iso);
  const day = d.toISOString().slice(5, 10);
  return daily ? day : day + " " + d.toISOString().slice(11, 16);
}

// The bars of `data.buckets`, scaled to the busiest bucket, with the totals as a caption.
function drawHistory(data) {
  const buckets = data.buckets;
  const daily = data.days !== undefined;
  const W = 720, H = 140, top = 14, bottom = 18;
  const most = Math.max(1, ...buckets.map((b) => b.processed));
  const step = W / Math.max(1, buckets.length);
  const scale = (n) => (n / most) * (H - top - bottom);
  const bars = buckets.map((b, i) => {
    const x = i * step + step * 0.1, w = Math.max(1, step * 0.8);
    const all = scale(b.processed), bad = scale(b.failed);
    const tip = bucketLabel(b.start, daily) + " UTC: " + b.processed + " processed, " + b.failed + " failed";
    return svg("g", { class: "bucket", "data-start": b.start, "data-processed": b.processed, "data-failed": b.failed },
      svg("title", {}, tip),
      svg("rect", { class: "hit", x: i * step, y: top, width: step, height: H - top - bottom }),
      svg("rect", { class: "ok", x, y: H - bottom - all, width: w, height: Math.max(0, all - bad) }),
      svg("rect", { class: "bad", x, y: H - bottom - bad, width: w, height: bad }));
  });
  const processed = buckets.reduce((n, b) => n + b.processed, 0);
  const failed = buckets.reduce((n, b) => n + b.failed, 0);
  const first = buckets.length ? bucketLabel(buckets[0].start, daily) : "";
  const last = buckets.length ? bucketLabel(buckets[buckets.length - 1].start, daily) : "";
  const chart = svg("svg", { id: "history-chart", viewBox: "0 0 " + W + " " + H, role: "img", preserveAspectRatio: "none" },
    svg("title", {}, "Attempts per " + (daily ? "day" : "hour")),
    svg("line", { class: "axis", x1: 0, y1: H - bottom, x2: W, y2: H - bottom }),
    svg("text", { class: "label", x: 2, y: 10 }, String(most)),
    svg("text", { class: "label", x: 2, y: H - 4 }, first),
    svg("text", { class: "label", x: W - 2, y: H - 4, "text-anchor": "end" }, last),
    bars);
  const [, , words] = HISTORY_RANGES.find(([name]) => name === historyRange);
  const caption = el("p", { class: "muted small", id: "history-caption" },
    el("span", { id: "history-processed" }, processed), " processed, ",
    el("span", { id: "history-failed", class: failed ? "bad" : "" }, failed), " failed in " + words + " (UTC).");
  return el("div", { class: "chart" }, chart, caption);
}
