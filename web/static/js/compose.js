// compose.js writes a new message to the recipients the person's token may send to.

import { attachAll } from "./attach.js";
import { Draft, sendFailure } from "./draft.js";
import { h, field, replace } from "./dom.js";

/** composeView is the new-message form. Its draft keeps one request_id until the message is committed. */
export async function composeView(ctx) {
  const me = await ctx.person.describe();
  if (!ctx.person.has("message.send")) {
    ctx.main.replaceChildren(h("section", { class: "card" }, h("h1", {}, "Compose"),
      h("p", {}, "Your token cannot send messages (it lacks the message.send scope). Ask the owner for one that can.")));
    return;
  }
  const draft = new Draft("compose");
  const chosen = new Set(draft.fields.to || [me.default_recipient_id].filter((id) => id && id !== me.actor_id));
  const boxes = (me.allowed_recipient_ids || []).filter((id) => id !== me.actor_id).map((id) => {
    const cb = h("input", { type: "checkbox", name: "to", value: id, checked: chosen.has(id), id: `to-${id}` });
    cb.addEventListener("change", () => draft.save({ to: boxes.filter((b) => b.checked).map((b) => b.value) }));
    return cb;
  });
  const subject = h("input", { type: "text", name: "subject", maxLength: 512, value: draft.fields.subject || "" });
  const text = h("textarea", { name: "text", rows: 8, required: true, value: draft.fields.text || "" });
  subject.addEventListener("input", () => draft.save({ subject: subject.value }));
  text.addEventListener("input", () => draft.save({ text: text.value }));
  const files = h("input", { type: "file", name: "files", multiple: true });
  const canAttach = ctx.person.has("blob.write");
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const out = h("p", { class: "form-status", role: "status" });
  const fresh = h("button", { type: "button", hidden: true, onclick: () => { draft.discard(); ctx.go("#/compose"); } }, "Start a new draft");
  const form = h("form", { class: "card", onsubmit: async (e) => {
    e.preventDefault();
    const to = boxes.filter((b) => b.checked).map((b) => b.value);
    if (to.length === 0) { out.textContent = "Choose at least one recipient."; return; }
    send.disabled = true;
    out.textContent = "Sending…";
    try {
      const body = { recipient_ids: to, body: { text: text.value } };
      if (subject.value) body.subject = subject.value;
      const ids = await attachAll(ctx.person.client, draft, canAttach ? files : null, out);
      if (ids.length) {
        body.attachment_ids = ids;
        out.textContent = "Sending…";
      }
      const res = await draft.send(ctx.person.client, body);
      files.value = "";
      replace(out, "Sent: ", h("a", { href: `#/message/${res.message_id || res.resource_id}` }, res.message_id || res.resource_id), ".");
      subject.value = ""; text.value = "";
    } catch (err) {
      out.textContent = sendFailure(err);
      fresh.hidden = err.code !== "IDEMPOTENCY_CONFLICT";
    } finally { send.disabled = false; }
  } },
    h("h1", {}, "New message"),
    h("fieldset", {}, h("legend", {}, "To"),
      boxes.length ? boxes.map((b) => h("div", { class: "check" }, b, h("label", { for: b.id }, h("code", {}, b.value),
        b.value === me.default_recipient_id ? " (the space's default recipient)" : "")))
        : h("p", {}, "Your token may not send to anyone else.")),
    field("Subject", subject),
    field("Message", text, "Sent as plain text."),
    canAttach ? field("Attach files (optional)", files, "Each file is uploaded and sealed before the message is sent.") : null,
    h("div", { class: "actions" }, send, fresh), out);
  ctx.main.replaceChildren(form);
}
