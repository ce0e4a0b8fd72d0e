// The operations page: asks for the admin token, then polls /v1/admin/ops every two
// seconds and draws what it answers. It holds no figure of its own; every number shown
// is the origin's report (the processes' /metrics). Built with textContent only.

const REPORT = "/v1/admin/ops";
const POLL_MS = 2000;
const DEADLINE_MS = 5000;
const TOKEN_KEY = "perso-ops-token";
const SVG = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);
let timer = null;
let lastGood = null; // when the origin last answered (ms), to say for how long it has not

function fixed(value, digits = 1, unit = "") {
  if (value === null || value === undefined) return "–";
  return `${Number(value).toFixed(digits)}${unit}`;
}

function percent(share) {
  return share === null || share === undefined ? "–" : `${(share * 100).toFixed(1)} %`;
}

function count(value) {
  return value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en");
}

function cell(row, text, className = "") {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.append(td);
  return td;
}

// The first cell of a process's row: its name, and its URL beneath.
function processCell(row, process) {
  const td = cell(row, process.name, "text");
  const url = document.createElement("span");
  url.className = "url";
  url.textContent = process.url;
  td.append(url);
}

// A process's state, in words: "up", or "unreachable (why, last seen N s ago)".
function stateCell(row, process) {
  if (process.status === "up") {
    const silent = process.silent ? ` (no heartbeat for ${fixed(process.seen_s_ago, 0)} s)` : "";
    cell(row, `up${silent}`, "text state-up");
    return;
  }
  row.classList.add("unreachable");
  const why = process.error ? `${process.error}; ` : "";
  cell(
    row,
    `UNREACHABLE (${why}last seen ${fixed(process.seen_s_ago, 0)} s ago)`,
    "text state-unreachable",
  );
}

function fill(tableId, rows, draw) {
  const body = $(tableId).tBodies[0];
  const drawn = rows.map((item) => {
    const row = document.createElement("tr");
    draw(row, item);
    return row;
  });
  body.replaceChildren(...drawn);
}

function drawRegions(regions) {
  fill("regions", regions, (row, r) => {
    row.dataset.region = r.region;
    cell(row, r.region, "text");
    cell(row, `${r.up} of ${r.processes}`);
    if (r.up < r.processes) row.classList.add("unreachable");
    cell(row, fixed(r.requests_per_s));
    cell(row, percent(r.no_origin_share));
    cell(row, fixed(r.p50_ms, 1, " ms"));
    cell(row, fixed(r.p99_ms, 1, " ms"));
    cell(row, fixed(r.stale_per_s, 2));
    cell(row, fixed(r.fallback_per_s, 2));
  });
}

function drawEdges(edges) {
  fill("edges", edges, (row, e) => {
    row.dataset.url = e.url;
    row.dataset.status = e.status;
    processCell(row, e);
    cell(row, e.region, "text");
    stateCell(row, e);
    if (e.status !== "up") {
      for (let i = 0; i < 9; i += 1) cell(row, "–");
      return;
    }
    cell(row, fixed(e.requests_per_s));
    cell(row, percent(e.no_origin_share));
    cell(row, fixed(e.p50_ms, 1, " ms"));
    cell(row, fixed(e.p99_ms, 1, " ms"));
    cell(row, count(e.stale_total));
    cell(row, count(e.fallback_total));
    cell(row, e.breaker ?? "–", "text");
    cell(row, fixed(e.sync_lag_ms, 1, " ms"));
    cell(row, count(e.sync_gaps));
  });
}

function drawOrigins(origins) {
  fill("origins", origins, (row, o) => {
    row.dataset.url = o.url;
    row.dataset.status = o.status;
    processCell(row, o);
    stateCell(row, o);
    if (o.status !== "up") {
      for (let i = 0; i < 4; i += 1) cell(row, "–");
      return;
    }
    if (o.llm_enabled === false) {
      cell(row, "off (no model server)", "text");
    } else {
      cell(row, count(o.llm_calls));
    }
    cell(row, fixed(o.llm_calls_per_s, 2));
    cell(row, count(o.llm_fallbacks));
    cell(row, fixed(o.llm_spend_usd, 4));
  });
}

function drawWorkers(workers) {
  if (workers === null) {
    $("workers-summary").textContent = "No origin answered: the workers' figures are unknown.";
    fill("workers", [], () => {});
    return;
  }
  $("workers-summary").textContent =
    `Events/s ${fixed(workers.events_per_s)}, backlog ${count(workers.backlog)} events, ` +
    `freshness p99 ${fixed(workers.freshness_p99_ms, 0, " ms")} (as reported by ${workers.from}).`;
  fill("workers", workers.consumers, (row, w) => {
    cell(row, w.consumer, "text");
    cell(row, w.running ? "yes" : "no (totals only)", "text");
    cell(row, count(w.events));
    cell(row, fixed(w.events_per_s));
    cell(row, fixed(w.freshness_p99_ms, 0, " ms"));
  });
}

function svg(name, attributes, text = "") {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text) node.textContent = text;
  return node;
}

// Clicks per slate by minute, as a polyline in a 600×160 box (no chart library).
function drawCurve(points) {
  const box = $("curve");
  const [width, height, left, bottom] = [600, 160, 40, 20];
  const nodes = [
    svg("line", { class: "axis", x1: left, y1: 8, x2: left, y2: height - bottom }),
    svg("line", {
      class: "axis", x1: left, y1: height - bottom, x2: width - 8, y2: height - bottom,
    }),
  ];
  if (points.length === 0) {
    $("curve-summary").textContent = "no join closed in the last hour";
    box.replaceChildren(...nodes);
    return;
  }
  const top = Math.max(...points.map((p) => p.clicks_per_slate), 0.1);
  const first = points[0].minute_ms;
  const span = Math.max(points[points.length - 1].minute_ms - first, 60000);
  const x = (p) => left + ((p.minute_ms - first) / span) * (width - left - 16);
  const y = (p) => height - bottom - (p.clicks_per_slate / top) * (height - bottom - 16);
  const path = points.map((p) => `${x(p).toFixed(1)},${y(p).toFixed(1)}`).join(" ");
  nodes.push(svg("polyline", { class: "line", points: path }));
  if (points.length === 1) {
    nodes.push(svg("circle", { cx: x(points[0]), cy: y(points[0]), r: 3, class: "line" }));
  }
  nodes.push(svg("text", { x: 4, y: 14 }, top.toFixed(2)));
  nodes.push(svg("text", { x: 4, y: height - bottom }, "0"));
  nodes.push(svg("text", { x: left, y: height - 4 }, new Date(first).toISOString().slice(11, 16)));
  box.replaceChildren(...nodes);
  const last = points[points.length - 1];
  const slates = points.reduce((sum, p) => sum + p.slates, 0);
  $("curve-summary").textContent =
    `${fixed(last.clicks_per_slate, 3)} in the last minute with joins (${count(last.slates)} ` +
    `slates); ${count(slates)} slates in ${points.length} ` +
    `minute${points.length === 1 ? "" : "s"}`;
}

function drawEvaluation(evaluation) {
  if (evaluation === null) return;
  $("evaluation").textContent =
    `${evaluation.policy} against ${evaluation.live}: ${fixed(evaluation.engagement, 3)} ` +
    `engagements per slate (95 % interval ${fixed(evaluation.engagement_low, 3)}–` +
    `${fixed(evaluation.engagement_high, 3)}) against the live policy's ` +
    `${fixed(evaluation.live_engagement, 3)}, over ${count(evaluation.decisions)} decisions ` +
    `(effective sample size ${count(evaluation.ess)}).`;
}

function drawLastEvaluation(last) {
  if (last === null) return;
  const when = new Date(last.at_ms).toISOString().replace("T", " ").slice(0, 16);
  $("last-evaluation").textContent =
    `Run at ${when} UTC on ${count(last.joined)} joined decisions; the live policy ` +
    `${last.live ?? "–"} earned ${fixed(last.live_engagement, 3)} engagements per slate.`;
  fill("estimates", last.estimates, (row, e) => {
    cell(row, e.policy, "text");
    cell(row, e.estimator, "text");
    cell(row, fixed(e.value, 3));
    cell(row, `${fixed(e.low, 3)}–${fixed(e.high, 3)}`);
  });
}

function say(text, bad = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("bad", bad);
}

function draw(report) {
  drawRegions(report.regions);
  drawEdges(report.edges);
  drawOrigins(report.origins);
  drawWorkers(report.workers);
  drawCurve(report.learning_curve);
  drawEvaluation(report.evaluation);
  drawLastEvaluation(report.last_evaluation);
  const down = [...report.edges, ...report.origins].filter((p) => p.status !== "up");
  const when = new Date(report.now_ms).toISOString().slice(11, 19);
  const registry = report.registry_error ? ` ${report.registry_error}.` : "";
  if (down.length > 0) {
    say(`${down.length} unreachable: ${down.map((p) => p.name).join(", ")} (at ${when} UTC).${registry}`, true);
  } else {
    say(`All ${report.edges.length + report.origins.length} processes up (at ${when} UTC).${registry}`);
  }
  document.body.dataset.updated = String(report.now_ms);
}

async function poll() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token === null) return;
  try {
    const response = await fetch(REPORT, {
      headers: { authorization: `Bearer ${token}` },
      cache: "no-store",
      credentials: "omit",
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    if (response.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      say("The admin token was refused: enter it again.", true);
      $("token").focus();
      return;
    }
    if (!response.ok) throw new Error(`answered ${response.status}`);
    lastGood = Date.now();
    draw(await response.json());
  } catch (error) {
    // This origin itself is down or slow: say so, keep the last figures on screen.
    const since = lastGood === null ? "" : ` for ${Math.round((Date.now() - lastGood) / 1000)} s`;
    say(`This origin (${location.host}) is unreachable${since}: ${error.message}. The figures below are the last it gave.`, true);
  }
  timer = setTimeout(poll, POLL_MS);
}

function start() {
  clearTimeout(timer);
  say("Asking the origin…");
  poll();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("token").value.trim();
  if (value === "") {
    say("Enter the admin token first.", true);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, value);
  $("token").value = "";
  start();
});

$("forget").addEventListener("click", () => {
  clearTimeout(timer);
  sessionStorage.removeItem(TOKEN_KEY);
  say("Token forgotten. Enter the admin token.");
});

if (sessionStorage.getItem(TOKEN_KEY) !== null) start();
