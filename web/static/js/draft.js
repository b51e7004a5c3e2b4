// draft.js keeps a message draft and its request_id. The request_id is made once, when the draft starts,
// and kept (in sessionStorage, so a reload keeps it too) until the service reports the message committed:
// a double click, a retry after a lost answer, or a reload and send again all name the same submission,
// so the message is stored at most once (RFC §7).

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
  }
}
