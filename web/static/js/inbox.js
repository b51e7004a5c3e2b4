// inbox.js shows the sign-in page and the person's inbox: every item of their feed, newest first, live.

import { explain } from "./api.js";
import { signInMethods } from "./auth.js";
import { h, replace } from "./dom.js";
import { timeEl } from "./format.js";

/** signInView offers every sign-in method; a successful one opens the inbox. */
export function signInView(ctx) {
  const msg = h("p", { class: "form-error", role: "alert" });
  const done = async (token) => {
    replace(msg, "Checking the token…");
    try {
      await ctx.person.signIn(token);
      ctx.banner();
      ctx.go(location.hash && location.hash !== "#/" ? location.hash : "#/inbox");
    } catch (e) {
      const { what, todo } = explain(e);
      replace(msg, what, " ", todo);
    }
  };
  return h("section", { class: "signin" },
    h("h1", {}, "Your Waypost inbox"),
    h("p", {}, "Read what your agents send you, reply, and mark what you have dealt with."),
    signInMethods.map((m) => m.render(done, (e) => replace(msg, e.message))),
    msg,
    h("p", { class: "hint" }, "Owner of this Waypost? ", h("a", { href: "#/console" }, "Open the console"), " with the admin secret."));
}

const typeLabel = { message: "Message", receipt: "Receipt", memory_revision: "Memory" };

/** inboxView lists the feed and keeps the list current as items arrive. */
export async function inboxView(ctx) {
  const feed = await ctx.startFeed();
  const me = ctx.person.me;
  const list = h("ol", { class: "items", "aria-label": "Feed items, newest first" });
  const status = h("p", { class: "live", role: "status" });
  const markAll = h("button", { type: "button", onclick: async () => {
    const ids = feed.order.filter((id) => feed.needsReceipt(feed.items.get(id)) && feed.stage(id) === "unread");
    markAll.disabled = true;
    try {
      for (let i = 0; i < ids.length; i += 100) await feed.ack(ids.slice(i, i + 100), "received");
    } catch (e) { ctx.error(e); } finally { markAll.disabled = false; }
  } }, "Mark all received");
  if (!ctx.person.has("receipt.write")) markAll.hidden = true;
  const body = h("div");
  ctx.main.replaceChildren(h("section", {},
    h("div", { class: "bar" }, h("h1", {}, "Inbox"), h("div", { class: "actions" }, markAll, h("a", { class: "button", href: "#/compose" }, "Compose"))),
    h("p", { class: "who" }, "Signed in as actor ", h("code", {}, me.actor_id), ", consumer ", h("code", {}, me.consumer_id), "."),
    status, body));

  const render = () => {
    const s = feed.state;
    status.textContent = s.phase === "loading" ? "Loading your feed…" : s.phase === "live" ? "Live: new items appear here as they arrive." : s.phase === "retrying" ? "Live updates paused; retrying…" : "Live updates stopped.";
    if (s.phase === "loading" && feed.order.length === 0) return;
    if (feed.order.length === 0) {
      replace(body, emptyState(me));
      return;
    }
    const rows = [...feed.order].reverse().map((id) => row(feed, feed.items.get(id)));
    replace(list, rows);
    if (list.parentNode !== body) replace(body, list);
  };
  ctx.onLeave(feed.subscribe(render));
  render();
}

function emptyState(me) {
  return h("div", { class: "empty card" },
    h("h2", {}, "No messages yet"),
    h("p", {}, "Messages sent to your actor ID ", h("code", {}, me.actor_id), " appear here at once, without reloading."),
    h("p", {}, "An agent sends one with the MCP tool ", h("code", {}, "waypost_send"), " or ", h("code", {}, "POST /v0/messages"),
      " naming you in recipient_ids; from a terminal: ", h("code", {}, `waypost send --to ${me.actor_id} --text "hello"`), "."),
    h("p", {}, h("a", { class: "button", href: "#/compose" }, "Send the first message")));
}

function row(feed, it) {
  const t = timeEl(it.committed_at);
  if (it.item_type === "message") {
    const stage = feed.needsReceipt(it) ? feed.stage(it.item_id) : "sent";
    const subject = it.data.subject || "(no subject)";
    return h("li", { class: `item message ${stage}` },
      h("a", { href: `#/message/${it.resource_id}`, class: "item-link", "aria-label": `${stage} message: ${subject}` },
        h("span", { class: "subject" }, subject),
        h("span", { class: "meta" }, "from ", h("code", {}, it.producer_id), " · ", t,
          it.data.attachment_count ? ` · ${it.data.attachment_count} attachment(s)` : "",
          it.data.in_reply_to ? " · reply" : ""),
        h("span", { class: `badge ${stage}` }, stage)));
  }
  if (it.item_type === "receipt") {
    return h("li", { class: "item receipt" },
      h("span", { class: "subject" }, `${typeLabel.receipt}: ${it.data.stage}`),
      h("span", { class: "meta" }, "by consumer ", h("code", {}, it.data.consumer_id), " of ",
        h("a", { href: `#/message/${it.data.resource_id}` }, it.data.resource_id), " · ", t));
  }
  if (it.item_type === "memory_revision") {
    return h("li", { class: "item memory" },
      h("a", { href: `#/memory/${it.data.collection_id}`, class: "item-link" },
        h("span", { class: "subject" }, `${typeLabel.memory_revision}: ${it.data.collection_id} revision ${it.data.revision}`),
        h("span", { class: "meta" }, `${it.data.mode}, ${it.data.upserted} upserted, ${it.data.deleted} deleted · `, t)));
  }
  return h("li", { class: "item" }, h("span", { class: "subject" }, it.item_type), h("span", { class: "meta" }, t));
}
