// The edge's API as the storefront uses it: same origin, JSON in and out.
//
// Every call returns {status, body, headers} (body: the parsed JSON, or null) and never
// throws for an HTTP status: the page decides what each one means. A network failure or an
// abort (the shopper was switched meanwhile) rejects, as fetch does.

const JSON_TYPE = "application/json";

async function post(path, payload, { token = null, signal } = {}) {
  const headers = { "content-type": JSON_TYPE };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const response = await fetch(path, {
    method: "POST",
    headers,
    body: JSON.stringify(payload),
    signal,
    // Nothing of one shopper's may be kept by the browser for another.
    cache: "no-store",
    credentials: "omit",
  });
  const type = response.headers.get("content-type") || "";
  const body = type.startsWith(JSON_TYPE) ? await response.json() : null;
  return { status: response.status, body, headers: response.headers };
}

// What a shop's backend would hand its page: a user token for `userId`
// (POST /v1/demo/token, on an edge in demo mode; 404 otherwise).
export function demoToken(userId, { signal } = {}) {
  return post("/v1/demo/token", { user_id: userId }, { signal });
}

export function personalize(request, token, { signal } = {}) {
  return post("/v1/personalize", request, { token, signal });
}

export function feedback(request, token, { signal } = {}) {
  return post("/v1/feedback", request, { token, signal });
}
