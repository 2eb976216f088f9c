/*
 * The REST API client: requests with the CSRF token, answers as JSON, every
 * failure as an ApiError carrying the API's ``code`` and ``detail``.
 */

import { root, ui } from "./dom.js";

export const apiRoot = (root && root.dataset.apiRoot) || "/api/";
export const chatUrl = (root && root.dataset.chatUrl) || "/chat/";
// The run's event stream when the server offers it for a POST, else its JSON answer.
export const STREAM_ACCEPT = "text/event-stream, application/json;q=0.9";

export class ApiError extends Error {
  constructor(status, code, detail, errors) {
    super(detail);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.errors = errors;
  }
}

export function csrfToken() {
  // The form's token works even with CSRF_COOKIE_HTTPONLY or CSRF_USE_SESSIONS.
  const field = ui.composer.querySelector("input[name=csrfmiddlewaretoken]");
  if (field && field.value) {
    return field.value;
  }
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

/** A short text for the API's ``errors`` (items {code, detail, pointer}) or DRF's field errors. */
export function describeErrors(errors) {
  if (!errors) {
    return "";
  }
  if (Array.isArray(errors)) {
    return errors
      .map((item) => {
        if (item && typeof item === "object" && item.detail) {
          return item.pointer ? `${item.pointer}: ${item.detail}` : String(item.detail);
        }
        return describeErrors(item);
      })
      .filter(Boolean)
      .join("; ");
  }
  if (typeof errors === "object") {
    return Object.entries(errors)
      .map(([key, value]) => {
        const text = describeErrors(value);
        return text ? `${key}: ${text}` : "";
      })
      .filter(Boolean)
      .join("; ");
  }
  return String(errors);
}

/** Send a request (``accept``: the media types wanted); a network failure is an ApiError. */
export async function request(method, url, body, accept = "application/json") {
  const headers = { Accept: accept };
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (!["GET", "HEAD", "OPTIONS"].includes(method)) {
    headers["X-CSRFToken"] = csrfToken();
  }
  try {
    return await fetch(url, init);
  } catch {
    throw new ApiError(0, "network_error", "The server could not be reached; check the connection and try again.");
  }
}

/** The JSON of a successful answer; an ApiError for any other. */
export async function readAnswer(response) {
  let data = null;
  if ((response.headers.get("Content-Type") || "").includes("json")) {
    data = await response.json().catch(() => null);
  }
  if (response.ok) {
    return data;
  }
  let detail = data && data.detail ? String(data.detail) : "";
  // The API's shape is {code, detail, errors}; a plain DRF error is {field: [...]}.
  const extra = data ? describeErrors(data.code || data.detail ? data.errors : data) : "";
  if (!detail) {
    detail = `The server answered ${response.status} ${response.statusText || ""}`.trim() + ".";
  }
  if (extra && extra !== detail && !extra.endsWith(detail)) {
    detail += ` (${extra})`;
  }
  throw new ApiError(response.status, (data && data.code) || `http_${response.status}`, detail, data && data.errors);
}

export async function api(method, url, body) {
  return readAnswer(await request(method, url, body));
}

export const conversationUrl = (id) => `${apiRoot}conversations/${encodeURIComponent(id)}/`;
export const messagesUrl = (id, after = -1) =>
  `${conversationUrl(id)}messages/` + (after >= 0 ? `?after=${encodeURIComponent(after)}` : "");
export const runUrl = (id) => `${apiRoot}runs/${encodeURIComponent(id)}/`;
export const pageUrl = (id) => `${chatUrl}${encodeURIComponent(id)}/`;
export const pageItems = (data) => (Array.isArray(data) ? data : (data && data.results) || []);
