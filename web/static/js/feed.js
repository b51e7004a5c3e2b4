// feed.js is the person's feed: every item of their consumer from the start of retained history (inbox.read),
// then live (feed.wait long polls), with the receipt stage of each item as this browser learned it from
// inbox.ack (stages only advance: none → received → processed).

import { ApiError } from "./api.js";
import { newRequestID } from "./format.js";

const PAGE = 200;
const STAGE_RANK = { unread: 0, received: 1, processed: 2 };

/** Feed holds the items of one consumer and keeps them up to date. */
export class Feed {
  constructor(session) {
    this.session = session;
    this.client = session.client;
    this.me = session.me;
    this.consumer = session.me.consumer_id;
    this.items = new Map();   // item_id → feed item
    this.order = [];          // item_ids in feed order
    this.pages = [];          // {cursor (after the page), ids}
    this.cursor = null;
    this.listeners = new Set();
    this.state = { phase: "loading", error: null, retryAt: 0 };
    this.stageKey = `waypost.stages.${this.consumer}`;
    try { this.stages = JSON.parse(localStorage.getItem(this.stageKey) || "{}"); } catch { this.stages = {}; }
    this.abort = new AbortController();
    this.running = false;
    this.ready = new Promise((res) => { this.markReady = res; });
  }

  /** start loads the history once and then waits for new items until stop; the promise it returns
   * settles when the history is loaded. */
  start() {
    if (!this.running) {
      this.running = true;
      this.run();
    }
    return this.ready;
  }

  stop() { this.abort.abort(); }

  /** subscribe calls fn on every change; it returns the unsubscribe function. */
  subscribe(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }

  emit() { for (const fn of this.listeners) fn(this); }

  setState(s) { this.state = { ...this.state, ...s }; this.emit(); }

  async run() {
    const signal = this.abort.signal;
    let backoff = 1;
    // History: every page from the start.
    for (;;) {
      try {
        const page = await this.client.call("POST", "/v0/inbox/read", { consumer_id: this.consumer, cursor: this.cursor, limit: PAGE }, { signal });
        this.add(page);
        if (!page.has_more) break;
      } catch (e) {
        if (!(await this.failed(e, backoff))) return;
        backoff = Math.min(backoff * 2, 30);
      }
    }
    this.markReady();
    this.setState({ phase: "live", error: null });
    const max = (this.me.limits && this.me.limits.feed_wait_max_ms) || 25000;
    const timeout = Math.min(25000, max);
    backoff = 1;
    while (!signal.aborted) {
      try {
        const q = new URLSearchParams({ consumer_id: this.consumer, cursor: this.cursor, timeout_ms: String(timeout) });
        const page = await this.client.call("GET", `/v0/feed/wait?${q}`, undefined, { signal });
        this.add(page);
        backoff = 1;
        if (this.state.phase !== "live") this.setState({ phase: "live", error: null });
      } catch (e) {
        if (!(await this.failed(e, backoff))) return;
        backoff = Math.min(backoff * 2, 30);
      }
    }
  }

  /** failed reports an error and waits before the next try; false means stop (aborted or signed out). */
  async failed(e, backoff) {
    if (this.abort.signal.aborted || (e && e.name === "AbortError")) return false;
    if (e instanceof ApiError && e.code === "UNAUTHENTICATED") {
      this.setState({ phase: "stopped", error: e });
      return false;
    }
    const wait = e instanceof ApiError && e.retryAfter ? e.retryAfter : backoff;
    this.setState({ phase: "retrying", error: e, retryAt: Date.now() + wait * 1000 });
    await new Promise((res) => {
      const t = setTimeout(res, wait * 1000);
      this.abort.signal.addEventListener("abort", () => { clearTimeout(t); res(); }, { once: true });
    });
    return !this.abort.signal.aborted;
  }

  add(page) {
    const ids = [];
    for (const it of page.items) {
      if (this.items.has(it.item_id)) continue;
      this.items.set(it.item_id, it);
      this.order.push(it.item_id);
      ids.push(it.item_id);
    }
    this.cursor = page.next_cursor;
    this.pages.push({ cursor: page.next_cursor, ids });
    if (ids.length || this.pages.length === 1) this.emit();
  }

  /** stage is what this browser knows of an item's receipt: unread, received or processed. */
  stage(itemID) { return this.stages[itemID] || "unread"; }

  /** needsReceipt tells whether an item waits for this person's receipt: messages from others. */
  needsReceipt(it) { return it.item_type === "message" && it.producer_id !== this.me.actor_id; }

  /** checkpoint is the cursor after the last page such that every item up to it that needs a receipt
   * has one; null when the first page still has an unread message. */
  checkpoint(extra) {
    let cp = null;
    for (const p of this.pages) {
      const done = p.ids.every((id) => {
        const it = this.items.get(id);
        return !this.needsReceipt(it) || this.stage(id) !== "unread" || (extra && extra.has(id));
      });
      if (!done) break;
      cp = p.cursor;
    }
    return cp;
  }

  /** ack records a stage for items (inbox.ack) with the checkpoint this leaves, and keeps the stages the
   * server reports back (an item processed elsewhere comes back as processed). */
  async ack(itemIDs, stage) {
    if (!itemIDs.length) return [];
    const body = { request_id: newRequestID("ui-ack"), consumer_id: this.consumer, items: itemIDs.map((item_id) => ({ item_id, stage })) };
    const cp = this.checkpoint(new Set(itemIDs));
    if (cp) body.checkpoint_cursor = cp;
    const res = await this.client.call("POST", "/v0/inbox/ack", body);
    for (const r of res.receipts) {
      if ((STAGE_RANK[r.stage] || 0) > (STAGE_RANK[this.stage(r.item_id)] || 0)) this.stages[r.item_id] = r.stage;
    }
    localStorage.setItem(this.stageKey, JSON.stringify(this.stages));
    this.emit();
    return res.receipts;
  }

  /** itemOf returns the feed item of a message (by resource ID). */
  itemOf(messageID) {
    for (const id of this.order) {
      const it = this.items.get(id);
      if (it.item_type === "message" && it.resource_id === messageID) return it;
    }
    return null;
  }

  /** thread returns the message items of a thread, oldest first. */
  thread(threadID) {
    return this.order.map((id) => this.items.get(id)).filter((it) => it.item_type === "message" && it.thread_id === threadID);
  }

  /** collections returns the collections the feed announced revisions of: id → latest revision item. */
  collections() {
    const out = new Map();
    for (const id of this.order) {
      const it = this.items.get(id);
      if (it.item_type === "memory_revision") out.set(it.data.collection_id, it);
    }
    return out;
  }
}
