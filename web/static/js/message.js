// message.js shows one message as text: subject, body, metadata, its thread and attachments, and lets the
// person mark it received or processed and reply.

import { explain } from "./api.js";
import { attachAll } from "./attach.js";
import { download } from "./download.js";
import { Draft, sendFailure } from "./draft.js";
import { h, replace, dl, field } from "./dom.js";
import { bytes, json, timeEl } from "./format.js";

/** messageView shows message id; opening an unread message marks it received. */
export async function messageView(ctx, id) {
  const feed = await ctx.startFeed();
  await feed.start();
  const client = ctx.person.client;
  const msg = await client.call("GET", `/v0/messages/${encodeURIComponent(id)}`);
  const item = feed.itemOf(id);
  const stageEl = h("span", { class: "badge" });
  const processBtn = h("button", { type: "button", class: "primary" }, "Mark processed");
  const receiveBtn = h("button", { type: "button" }, "Mark received");
  const canAck = item && feed.needsReceipt(item) && ctx.person.has("receipt.write");
  const showStage = () => {
    const s = item ? (feed.needsReceipt(item) ? feed.stage(item.item_id) : "sent") : "not in your feed";
    stageEl.textContent = s;
    stageEl.className = `badge ${s}`;
    processBtn.disabled = s === "processed";
    receiveBtn.disabled = s !== "unread";
  };
  const ack = async (stage, btn) => {
    btn.disabled = true;
    try { await feed.ack([item.item_id], stage); } catch (e) { ctx.error(e); } finally { showStage(); }
  };
  processBtn.addEventListener("click", () => ack("processed", processBtn));
  receiveBtn.addEventListener("click", () => ack("received", receiveBtn));
  ctx.onLeave(feed.subscribe(showStage));
  showStage();

  const attachments = h("ul", { class: "attachments" });
  const thread = feed.thread(msg.thread_id);
  ctx.main.replaceChildren(h("article", { class: "message" },
    h("p", {}, h("a", { href: "#/inbox" }, "← Inbox")),
    h("div", { class: "bar" }, h("h1", { class: "subject" }, msg.subject || "(no subject)"), stageEl),
    dl([
      ["From", h("code", {}, msg.producer_id)],
      ["To", msg.recipient_ids.join(", ")],
      ["Sent", timeEl(msg.committed_at)],
      ["Kind", msg.kind || "message"],
      msg.in_reply_to ? ["In reply to", h("a", { href: `#/message/${msg.in_reply_to}` }, msg.in_reply_to)] : null,
      ["Message ID", h("code", {}, msg.message_id)],
    ]),
    canAck ? h("div", { class: "actions" }, receiveBtn, processBtn) : null,
    h("h2", {}, "Message"),
    h("pre", { class: "body" }, (msg.body && msg.body.text) || ""),
    msg.metadata && Object.keys(msg.metadata).length ? [h("h2", {}, "Metadata"), h("pre", { class: "metadata" }, json(msg.metadata))] : null,
    msg.source && Object.keys(msg.source).length ? [h("h2", {}, "Source"), h("pre", { class: "metadata" }, json(msg.source))] : null,
    msg.attachment_ids && msg.attachment_ids.length ? [h("h2", {}, "Attachments"), attachments] : null,
    thread.length > 1 ? [h("h2", {}, "Thread"), h("ol", { class: "thread" }, thread.map((t) =>
      h("li", { "aria-current": t.resource_id === id ? "true" : null },
        t.resource_id === id ? h("strong", {}, t.data.subject || "(no subject)", " (this message)") : h("a", { href: `#/message/${t.resource_id}` }, t.data.subject || "(no subject)"),
        " · ", h("code", {}, t.producer_id), " · ", timeEl(t.committed_at))))] : null,
    ctx.person.has("message.send") ? replyForm(ctx, msg) : null));

  for (const bid of msg.attachment_ids || []) attachments.appendChild(attachmentRow(ctx, bid));
  if (canAck && feed.stage(item.item_id) === "unread") {
    try { await feed.ack([item.item_id], "received"); } catch (e) { ctx.error(e); }
  }
}

function attachmentRow(ctx, blobID) {
  const li = h("li", {}, h("code", {}, blobID), " …");
  if (!ctx.person.has("blob.read")) {
    replace(li, h("code", {}, blobID), " — your token lacks the blob.read scope needed to download it.");
    return li;
  }
  const client = ctx.person.client;
  client.call("GET", `/v0/blobs/${encodeURIComponent(blobID)}`).then((info) => {
    const name = info.filename || blobID;
    const btn = h("button", { type: "button", class: "download" }, "Download");
    const note = h("span", { class: "hint", role: "status" });
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      note.textContent = " Downloading…";
      try {
        const n = await download(client, `/v0/blobs/${encodeURIComponent(blobID)}/content`, name);
        note.textContent = ` Saved (${bytes(n)}).`;
      } catch (e) { note.textContent = " " + explain(e).what + " " + explain(e).todo; } finally { btn.disabled = false; }
    });
    replace(li, h("span", { class: "filename" }, name), " ", h("span", { class: "meta" }, `${info.content_type}, ${bytes(info.size_bytes)}`), " ", btn, note);
  }).catch((e) => replace(li, h("code", {}, blobID), " — ", explain(e).what));
  return li;
}

/** replyForm writes a reply to msg's producer in msg's thread. */
function replyForm(ctx, msg) {
  const draft = new Draft(`reply:${msg.message_id}`);
  const text = h("textarea", { name: "text", rows: 5, required: true, value: draft.fields.text || "" });
  text.addEventListener("input", () => draft.save({ text: text.value }));
  const out = h("p", { class: "form-status", role: "status" });
  const files = ctx.person.has("blob.write") ? h("input", { type: "file", name: "files", multiple: true }) : null;
  const send = h("button", { type: "submit", class: "primary" }, "Send reply");
  const form = h("form", { class: "card reply", onsubmit: async (e) => {
    e.preventDefault();
    send.disabled = true;
    out.textContent = "Sending…";
    try {
      const body = { recipient_ids: [msg.producer_id], in_reply_to: msg.message_id, body: { text: text.value } };
      const ids = await attachAll(ctx.person.client, draft, files, out);
      if (ids.length) body.attachment_ids = ids;
      const res = await draft.send(ctx.person.client, body);
      out.replaceChildren("Reply sent (", h("code", {}, res.message_id || res.resource_id), ").");
      text.value = "";
      if (files) files.value = "";
    } catch (err) {
      out.textContent = sendFailure(err);
    } finally { send.disabled = false; }
  } },
    h("h2", {}, "Reply"),
    field(`Reply to ${msg.producer_id}`, text),
    files ? field("Attach files (optional)", files) : null,
    h("div", { class: "actions" }, send), out);
  return form;
}
