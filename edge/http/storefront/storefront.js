// The storefront page: one shopper at a time, their token in memory only, their slate
// from this edge, their clicks sent back as feedback, and what each answer changed.

import { demoToken, feedback, personalize } from "./api.js";
import {
  SHOPPER_ID,
  compare,
  describeChange,
  placeholderClass,
  slateOf,
  sourceLabel,
} from "./slate.js";

const COUNT = 8;
// The loop from a click to the next answer (edge -> origin -> stream worker -> the
// shopper's model -> the edges) takes well under a second: ask again after a short pause,
// and once more when nothing had changed yet.
const FIRST_ASK_MS = 400;
const SECOND_ASK_MS = 800;

const ACTIONS = [
  { action: "click", label: "View", done: "Viewed" },
  { action: "add_to_cart", label: "Add to cart", done: "Added to the cart:" },
  { action: "dismiss", label: "Dismiss", done: "Dismissed" },
];

const DEMO_OFF =
  "Demo mode is off on this edge: it has no demo token route (POST /v1/demo/token " +
  "answered 404), so the page cannot sign a shopper in. Start the stack with " +
  "perso up --demo (or make demo) to try the storefront.";

const money = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });
const byId = (id) => document.getElementById(id);

// The current shopper and everything of theirs: replaced whole when another is chosen,
// and anything still on its way for the previous one is aborted or dropped.
let shopper = null;

function newShopper(id) {
  return {
    id,
    token: null,
    sessionId: `s-${randomHex(12)}`,
    slate: null,
    dismissed: new Set(),
    controller: new AbortController(),
  };
}

function randomHex(bytes) {
  // crypto.randomUUID needs a secure context; an edge may be reached over plain http.
  const values = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(values, (b) => b.toString(16).padStart(2, "0")).join("");
}

function current(one) {
  return shopper === one;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function say(text) {
  byId("status").textContent = text;
}

function problem(what, answer) {
  const body = answer.body || {};
  const field = body.field ? `, field ${body.field}` : "";
  const retry = answer.headers.get("retry-after");
  const wait = retry ? ` Retry in ${retry} s.` : "";
  return `${what}: ${body.reason || "the edge answered " + answer.status} (${answer.status}${field}).${wait}`;
}

function setBusy(busy) {
  byId("slate").setAttribute("aria-busy", String(busy));
  byId("refresh").disabled = busy || shopper === null || shopper.token === null;
  for (const button of byId("slate").querySelectorAll("button")) button.disabled = busy;
}

function clearView(id) {
  byId("slate").replaceChildren();
  byId("slate-for").textContent = id;
  byId("signed-in").textContent = `Signing in as ${id}…`;
  for (const fact of ["cache", "ranked", "tier", "latency", "personal"]) {
    byId(`fact-${fact}`).textContent = "–";
  }
  for (const button of document.querySelectorAll("button.shopper")) {
    button.setAttribute("aria-pressed", String(button.dataset.shopper === id));
  }
  say("");
}

async function switchTo(id) {
  if (shopper !== null) shopper.controller.abort();
  const one = newShopper(id);
  shopper = one;
  clearView(id);
  setBusy(true);
  try {
    if (!(await signIn(one))) return;
    const slate = await ask(one);
    if (slate !== null) say(`Recommendations for ${id}: ${slate.items.length} items.`);
  } catch (error) {
    if (current(one)) say(`The edge could not be reached: ${error.message}`);
  } finally {
    if (current(one)) setBusy(false);
  }
}

async function signIn(one) {
  const answer = await demoToken(one.id, { signal: one.controller.signal });
  if (!current(one)) return false;
  if (answer.status === 404) {
    byId("signed-in").textContent = DEMO_OFF;
    say(DEMO_OFF);
    return false;
  }
  if (answer.status !== 200) {
    byId("signed-in").textContent = `Not signed in as ${one.id}.`;
    say(problem("No token", answer));
    return false;
  }
  one.token = answer.body.token;
  const until = new Date(answer.body.expires_at).toLocaleTimeString([], {
    hour: "2-digit",
    minute: "2-digit",
  });
  byId("signed-in").textContent =
    `Signed in as ${one.id} (segment at sign-in: ${answer.body.segment}; token until ${until}).`;
  return true;
}

function request(one) {
  return {
    user_id: one.id,
    session_id: one.sessionId,
    context: {
      page_type: "home",
      placement: "feed",
      device: window.matchMedia("(max-width: 700px)").matches ? "mobile" : "desktop",
    },
    constraints: { count: COUNT, exclude_items: [...one.dismissed] },
    options: { include_explanation: byId("explain").checked },
  };
}

// The shopper's next slate, shown; null when there is none (said why) or the shopper changed.
async function ask(one) {
  const signal = one.controller.signal;
  let answer = await personalize(request(one), one.token, { signal });
  if (answer.status === 401 && current(one) && (await signIn(one))) {
    answer = await personalize(request(one), one.token, { signal }); // the token had expired
  }
  if (!current(one)) return null;
  if (answer.status !== 200) {
    say(problem("No recommendations", answer));
    return null;
  }
  const slate = slateOf(answer.body, answer.headers.get("x-cache"));
  if (slate.userId !== one.id) {
    say("The edge answered for another shopper: not shown.");
    return null;
  }
  one.slate = slate;
  show(slate);
  return slate;
}

function show(slate) {
  const list = byId("slate");
  const hadFocus = list.contains(document.activeElement);
  list.replaceChildren(...slate.items.map(card));
  byId("fact-cache").textContent = slate.xCache;
  byId("fact-ranked").textContent = slate.rankedBy;
  byId("fact-tier").textContent = slate.tier + (slate.degraded ? " (degraded)" : "");
  byId("fact-latency").textContent = `${slate.latencyMs} ms`;
  byId("fact-personal").textContent = `${slate.personal} of ${slate.items.length}`;
  // The button that had focus is gone with its card: keep the keyboard in the slate.
  if (hadFocus) byId("slate-heading").focus();
}

function card(item) {
  const li = document.createElement("li");
  li.className = "item";
  li.dataset.itemId = item.id;
  li.dataset.source = item.source;

  const picture = document.createElement("div");
  picture.className = `ph ${placeholderClass(item.category)}`;
  picture.setAttribute("aria-hidden", "true");
  picture.textContent = item.category.slice(0, 1);

  const title = document.createElement("h3");
  title.className = "title";
  title.textContent = item.title;

  const meta = document.createElement("p");
  meta.className = "meta";
  meta.textContent = `${item.category} · ${money.format(item.price)}`;

  const why = document.createElement("p");
  why.className = "why";
  why.textContent = item.reason ?? "No explanation asked for.";

  const badge = document.createElement("p");
  badge.className = item.personal ? "badge personal" : "badge";
  badge.textContent = sourceLabel(item.source);

  const actions = document.createElement("div");
  actions.className = "actions";
  // Shown while the action before is still asking: one action at a time.
  const busy = byId("slate").getAttribute("aria-busy") === "true";
  for (const { action, label } of ACTIONS) {
    const button = document.createElement("button");
    button.type = "button";
    button.disabled = busy;
    button.dataset.action = action;
    button.textContent = label;
    button.setAttribute("aria-label", `${label}: ${item.title}`);
    actions.append(button);
  }
  li.append(picture, title, meta, why, badge, actions);
  return li;
}

async function act(one, itemId, action) {
  const before = one.slate;
  const item = before.items.find((candidate) => candidate.id === itemId);
  const verb = ACTIONS.find((known) => known.action === action).done;
  setBusy(true);
  try {
    const body = {
      user_id: one.id,
      session_id: one.sessionId,
      request_id: before.requestId,
      feedback: [{ item_id: item.id, action, position: item.rank }],
    };
    const answer = await feedback(body, one.token, { signal: one.controller.signal });
    if (!current(one)) return;
    if (answer.status !== 200) {
      say(problem("Not recorded", answer));
      return;
    }
    // The shopper said no: never shown again in this visit.
    if (action === "dismiss") one.dismissed.add(item.id);
    const done = `${verb} “${item.title}”.`;
    say(`${done} Asking for the next recommendations…`);
    await following(one, before, done);
  } catch (error) {
    if (current(one)) say(`The edge could not be reached: ${error.message}`);
  } finally {
    if (current(one)) setBusy(false);
  }
}

// Ask again after the pause, once more if nothing changed yet, and say what changed.
async function following(one, before, done) {
  let after = null;
  for (const pause of [FIRST_ASK_MS, SECOND_ASK_MS]) {
    await sleep(pause);
    if (!current(one)) return;
    after = await ask(one);
    if (after === null || !compare(before, after).same) break;
  }
  if (after !== null) say(describeChange(compare(before, after), after, done));
}

async function refresh() {
  const one = shopper;
  if (one === null || one.token === null) return;
  const before = one.slate;
  setBusy(true);
  try {
    const after = await ask(one);
    if (after !== null && before !== null) {
      say(describeChange(compare(before, after), after, "Asked again."));
    }
  } catch (error) {
    if (current(one)) say(`The edge could not be reached: ${error.message}`);
  } finally {
    if (current(one)) setBusy(false);
  }
}

function chooseTyped(event) {
  event.preventDefault();
  const input = byId("shopper-id");
  const id = input.value.trim();
  if (!SHOPPER_ID.test(id)) {
    input.setAttribute("aria-invalid", "true");
    say("A shopper id is 1 to 64 letters, digits or . _ : @ -");
    input.focus();
    return;
  }
  input.removeAttribute("aria-invalid");
  switchTo(id);
}

function start() {
  for (const button of document.querySelectorAll("button.shopper")) {
    button.setAttribute("aria-pressed", "false");
    button.addEventListener("click", () => switchTo(button.dataset.shopper));
  }
  byId("shopper-form").addEventListener("submit", chooseTyped);
  byId("refresh").addEventListener("click", refresh);
  byId("explain").addEventListener("change", refresh);
  byId("slate").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    const one = shopper;
    if (button === null || one === null || one.slate === null) return;
    act(one, button.closest("li").dataset.itemId, button.dataset.action);
  });
}

start();
