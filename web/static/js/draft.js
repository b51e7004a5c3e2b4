// draft.js keeps a message draft and its request_id. The request_id is made once, when the draft starts,
// and kept (in sessionStorage, so a reload keeps it too) until the service reports the message committed:
// a double click, a retry after a lost answer, or a reload and send again all name the same submission,
// so the message is stored at most once (RFC §7).

import { explain } from "./api.js";
import { newRequestID } from "./format.js";

/** Draft is one message being written, under a key such as "compose" or "reply:<message_id>". */
export class Draft {
  constructor(key) {
    this.key = `waypost.draft.${key}`;
    let saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(this.key) || "null"); } catch { saved = null; }
    this.requestID = (saved && saved.request_id) || newRequestID("ui-msg");
    this.fields = (saved && saved.fields) || {};
    this.attempted = !!(saved && saved.attempted);
    this.inFlight = null;
    this.blobs = new Map(); // attached files already sealed for this draft: key → blob_id (this page only)
  }

  save(fields) {
    this.fields = { ...this.fields, ...fields };
    sessionStorage.setItem(this.key, JSON.stringify({ request_id: this.requestID, fields: this.fields, attempted: this.attempted }));
  }

  /** send submits body once: a second call while the first is in flight returns the same promise. */
  send(client, body) {
    if (this.inFlight) return this.inFlight;
    this.attempted = true;
    this.save({});
    this.inFlight = client.call("POST", "/v0/messages", { ...body, request_id: this.requestID })
      .then((res) => { this.discard(); return res; })
      .finally(() => { this.inFlight = null; });
    return this.inFlight;
  }

  /** discard forgets the draft; the next one gets a new request_id. */
  discard() {
    sessionStorage.removeItem(this.key);
    this.requestID = newRequestID("ui-msg");
    this.fields = {};
    this.attempted = false;
    this.blobs = new Map();
  }
}

/** sendFailure says what a failed send means. When the answer may have been lost (no answer, a server
 * fault, a retryable refusal), the message may already be stored: pressing Send again is safe, because
 * the draft keeps its request_id. */
export function sendFailure(err) {
  const { what, todo } = explain(err);
  const uncertain = err && (err.code === "UNREACHABLE" || err.code === "INTERNAL" || err.code === "STORAGE_UNAVAILABLE" || err.code === "BAD_RESPONSE");
  if (uncertain) return `${what} The message may or may not be stored. Press Send again: it is stored once, never twice.`;
  if (err && err.code === "RATE_LIMITED") return `Not sent yet: ${what} ${todo} It is stored once, however often you press Send.`;
  return `Not sent: ${what} ${todo}`;
}
