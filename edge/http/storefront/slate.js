// What the storefront shows of an answer, and what changed between two: pure functions,
// no DOM, no network.

// A shopper id as the API takes a user id (protocol.api Identifier), kept shorter here.
export const SHOPPER_ID = /^[A-Za-z0-9._:@-]{1,64}$/;

// Items ranked from the shopper's own model or session, not from what everybody likes.
const PERSONAL_SOURCES = new Set(["collaborative", "content"]);

const PLACEHOLDER_COLOURS = 8;

const SOURCE_LABELS = {
  collaborative: "for you: near your taste",
  content: "for you: like what you viewed",
  trending: "popular now",
  exploration: "something new to try",
};

// The answer of POST /v1/personalize and its X-Cache header, as the page shows them.
export function slateOf(answer, xCache) {
  const meta = answer.metadata;
  const items = answer.items.map((item) => ({
    id: item.item_id,
    rank: item.rank,
    title: item.metadata.title,
    category: item.metadata.category,
    price: item.metadata.price,
    source: item.source,
    personal: PERSONAL_SOURCES.has(item.source),
    reason: item.explanation ? item.explanation.primary_reason : null,
  }));
  return {
    requestId: answer.request_id,
    userId: answer.user_id,
    items,
    xCache: xCache || "–",
    rankedBy: meta.ranked_by || "origin",
    tier: meta.tier,
    latencyMs: meta.latency_ms,
    degraded: Boolean(meta.degraded),
    personal: items.filter((item) => item.personal).length,
  };
}

export function sourceLabel(source) {
  return SOURCE_LABELS[source] || source;
}

// One of a few placeholder colours per category: the same category always looks alike.
export function placeholderClass(category) {
  let hash = 0;
  for (const char of category) hash = (hash * 31 + char.codePointAt(0)) >>> 0;
  return `ph-${hash % PLACEHOLDER_COLOURS}`;
}

// Items that came, went and changed place from `before` to `after` (slates of one shopper).
export function compare(before, after) {
  const was = new Map(before.items.map((item) => [item.id, item.rank]));
  const now = new Set(after.items.map((item) => item.id));
  const added = after.items.filter((item) => !was.has(item.id));
  const removed = before.items.filter((item) => !now.has(item.id));
  const moved = after.items.filter((item) => was.has(item.id) && was.get(item.id) !== item.rank);
  return {
    added,
    removed,
    moved,
    same: added.length === 0 && removed.length === 0 && moved.length === 0,
  };
}

function count(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// The status line after an action: what the shopper did, and what it changed.
export function describeChange(change, after, done) {
  const how = `${after.xCache}, ranked by the ${after.rankedBy}, ${after.latencyMs} ms at the edge`;
  if (change.same) {
    const shared =
      after.personal === 0
        ? " New shoppers share their segment's recommendations; from their first " +
          "click they are theirs alone."
        : "";
    return `${done} Same recommendations as before (${how}).${shared}`;
  }
  const parts = [count(change.added.length, "new item", "new items")];
  if (change.moved.length) parts.push(count(change.moved.length, "moved", "moved"));
  if (change.removed.length) parts.push(count(change.removed.length, "gone", "gone"));
  const personal =
    after.personal > 0
      ? ` ${count(after.personal, "item is", "items are")} picked for this shopper.`
      : " These are the segment's shared recommendations.";
  return `${done} New recommendations: ${parts.join(", ")} (${how}).${personal}`;
}
