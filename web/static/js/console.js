// console.js is the owner's console over /admin/v0: spaces, actors, consumers, tokens (shown once,
// revocable), quotas, per-space stats by stage, webhook deliveries with redelivery, and space deletion
// confirmed by typing the space's ID. The admin secret is asked once per browser session (sessionStorage).
//
// Spaces, actors, consumers, tokens (with the OAuth host that holds each) and the OAuth hosts themselves
// come from the control plane's list calls, so the console shows everything, wherever it was created.

import { explain } from "./api.js";
import { h, field, replace, dl, table } from "./dom.js";
import { bytes, newRequestID, seconds, timeEl } from "./format.js";

const SCOPES = ["message.send", "message.read", "receipt.write", "blob.write", "blob.read", "memory.read", "memory.write", "subscription.manage", "space.observe"];
const PERSON_SCOPES = new Set(["message.send", "message.read", "receipt.write", "blob.read", "blob.write", "memory.read"]);


function adminSignIn(ctx) {
  const input = h("input", { type: "password", name: "secret", autocomplete: "off", required: true, spellcheck: false });
  return h("section", { class: "signin" },
    h("h1", {}, "Owner's console"),
    h("form", { class: "card", onsubmit: (e) => { e.preventDefault(); ctx.admin.signIn(input.value.trim()); ctx.banner(); ctx.go("#/console"); } },
      h("h2", {}, "Enter the admin secret"),
      field("Admin secret", input, "WAYPOST_ADMIN_SECRET, or the file admin-secret in the server's data directory. It is kept for this browser tab only (sessionStorage) and is forgotten when the tab closes; it is checked on your first action."),
      h("button", { type: "submit", class: "primary" }, "Continue")));
}

/** consoleView lists the spaces and the OAuth hosts, and opens or creates a space. */
export async function consoleView(ctx) {
  if (!ctx.admin.signedIn) { ctx.main.replaceChildren(adminSignIn(ctx)); return; }
  const client = ctx.admin.client;
  const [spaceList, hostList] = await Promise.all([client.call("GET", "/admin/v0/spaces"), client.call("GET", "/admin/v0/oauth/clients")]);
  const openID = h("input", { type: "text", name: "space", pattern: "[A-Za-z0-9_\\-]{1,96}", required: true, autocomplete: "off" });
  const name = h("input", { type: "text", name: "display_name", maxLength: 200 });
  const out = h("p", { class: "form-status", role: "status" });
  const create = h("button", { type: "submit", class: "primary" }, "Create space");
  const known = spaceList.spaces;
  const hosts = h("section", { class: "card", id: "oauth-hosts", "aria-labelledby": "h-hosts" });
  ctx.main.replaceChildren(h("section", {},
    h("div", { class: "bar" }, h("h1", {}, "Owner's console"),
      h("button", { type: "button", onclick: () => { ctx.admin.signOut(); ctx.go("#/console"); } }, "Forget the admin secret")),
    known.length ? table("Spaces", ["Space", "Name", "State"], known.map((s) => [h("a", { href: `#/console/${s.space_id}` }, s.space_id), s.display_name || "—", s.state || "active"]))
      : h("p", { class: "empty" }, "No space yet: create one below (or with waypost admin space create)."),
    h("form", { class: "card inline", onsubmit: (e) => { e.preventDefault(); ctx.go(`#/console/${openID.value.trim()}`); } },
      field("Open a space by ID", openID), h("button", { type: "submit" }, "Open")),
    h("form", { class: "card inline", onsubmit: async (e) => {
      e.preventDefault();
      create.disabled = true;
      try {
        const body = { request_id: newRequestID("ui-space") };
        if (name.value.trim()) body.display_name = name.value.trim();
        const sp = await client.call("POST", "/admin/v0/spaces", body);
        ctx.go(`#/console/${sp.space_id}`);
      } catch (err) { out.textContent = `${explain(err, "admin").what} ${explain(err, "admin").todo}`; } finally { create.disabled = false; }
    } }, field("New space's name", name), create), out, hosts));
  renderHosts(hosts, client, hostList.clients);
}

/** renderHosts lists the MCP hosts registered through OAuth, each revocable (every token it holds stops). */
function renderHosts(el, client, clients) {
  const out = h("p", { class: "form-status", role: "status" });
  const rows = clients.map((c) => [h("code", {}, c.client_id), c.client_name || "—", h("span", { class: "url" }, c.redirect_uris.join(" ")), timeEl(c.created_at),
    c.revoked ? "revoked" : confirmButton("Revoke host", async () => {
      try {
        await client.call("POST", `/admin/v0/oauth/clients/${encodeURIComponent(c.client_id)}/revoke`, { request_id: newRequestID("ui-revoke-host") });
        c.revoked = true;
        renderHosts(el, client, clients);
      } catch (err) { fail(out, err); }
    })]);
  replace(el, h("h2", { id: "h-hosts" }, "MCP hosts (OAuth)"),
    rows.length ? table("Hosts registered through OAuth", ["Client", "Name", "Sends back to", "Registered", ""], rows)
      : h("p", { class: "empty" }, "No host has registered. A host that connects through OAuth (claude.ai, ChatGPT) registers itself and asks you to approve it at /authorize."),
    h("p", { class: "hint" }, "Revoking a host stops every token it holds at once; the tokens are listed under each space."), out);
}

/** spaceView is one space: overview and quotas, stats, actors, consumers, tokens, webhooks, deletion. */
export async function spaceView(ctx, spaceID) {
  if (!ctx.admin.signedIn) { ctx.main.replaceChildren(adminSignIn(ctx)); return; }
  const client = ctx.admin.client;
  const base = `/admin/v0/spaces/${encodeURIComponent(spaceID)}`;
  const space = await client.call("GET", base);
  const sections = {
    overview: h("section", { class: "card", "aria-labelledby": "h-overview" }),
    stats: h("section", { class: "card", id: "stats", "aria-labelledby": "h-stats" }),
    actors: h("section", { class: "card", "aria-labelledby": "h-actors" }),
    tokens: h("section", { class: "card", id: "tokens", "aria-labelledby": "h-tokens" }),
    webhooks: h("section", { class: "card", id: "webhooks", "aria-labelledby": "h-webhooks" }),
    danger: h("section", { class: "card danger", "aria-labelledby": "h-danger" }),
  };
  ctx.main.replaceChildren(h("div", { class: "console" },
    h("p", {}, h("a", { href: "#/console" }, "← Spaces")),
    h("h1", {}, "Space ", h("code", {}, space.space_id), space.display_name ? ` — ${space.display_name}` : ""),
    Object.values(sections)));
  const env = { ctx, client, base, space, spaceID, sections, stats: null };
  renderOverview(env);
  await Promise.all([renderActors(env), renderTokens(env)]);
  renderDanger(env);
  await loadStats(env);
  await loadDeliveries(env);
}

function fail(out, err) { const { what, todo } = explain(err, "admin"); out.textContent = `${what} ${todo}`; }

function renderOverview(env) {
  const { space, client, base } = env;
  const q = space.quotas || {};
  const maxBytes = h("input", { type: "number", name: "max_stored_bytes", min: 1, value: q.max_stored_bytes ?? "", required: true });
  const maxItems = h("input", { type: "number", name: "max_items", min: 1, value: q.max_items ?? "", required: true });
  const out = h("p", { class: "form-status", role: "status" });
  replace(env.sections.overview,
    h("h2", { id: "h-overview" }, "Overview"),
    dl([
      ["State", space.state || "active"],
      ["Created", timeEl(space.created_at)],
      ["Default recipient", h("code", {}, space.default_recipient_id)],
      ["Source URI", h("code", {}, space.source_uri)],
      space.rate_limits ? ["Rate limit", `${space.rate_limits.requests_per_second} requests/s per credential, burst ${space.rate_limits.burst}`] : null,
      space.usage ? ["Usage", `${bytes(space.usage.stored_bytes)} of ${bytes(q.max_stored_bytes)}; ${space.usage.items} of ${q.max_items} items`] : null,
    ]),
    h("form", { class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      try {
        env.space = await client.call("PATCH", base, { request_id: newRequestID("ui-quota"), quotas: { max_stored_bytes: Number(maxBytes.value), max_items: Number(maxItems.value) } });
        out.textContent = "Quotas saved.";
      } catch (err) { fail(out, err); }
    } }, h("h3", {}, "Quotas"), field("Stored bytes at most", maxBytes), field("Items at most", maxItems), h("button", { type: "submit" }, "Save quotas"), out));
}

async function loadStats(env) {
  const el = env.sections.stats;
  const refresh = h("button", { type: "button", onclick: () => loadStats(env).catch((e) => env.ctx.error(e, "admin")) }, "Refresh");
  let st;
  try { st = await env.client.call("GET", `${env.base}/stats`); } catch (e) {
    replace(el, h("h2", { id: "h-stats" }, "Stats"), h("p", {}, explain(e, "admin").what), refresh);
    return;
  }
  env.stats = st;
  const stages = (s) => [String(s.reserved), String(s.prepared), String(s.committed), String(s.failed)];
  replace(el,
    h("div", { class: "bar" }, h("h2", { id: "h-stats" }, "Stats by stage"), refresh),
    h("p", { class: "hint" }, "Generated ", timeEl(st.generated_at), st.complete ? "" : " (partial: the space is large)", `; feed head ${st.visible_head}.`),
    table("Submissions", ["Operation", "Reserved", "Prepared", "Committed", "Failed"],
      [["all", ...stages(st.submissions)], ...Object.entries(st.submissions_by_operation || {}).map(([op, s]) => [op, ...stages(s)])]),
    table("Consumers: receipts and checkpoints", ["Consumer", "Actor", "View", "Not received", "Received, not processed", "Processed", "Checkpoint age"],
      st.consumers.map((c) => [h("code", {}, c.consumer_id), h("code", {}, c.actor_id), c.view, String(c.not_received), String(c.received_not_processed), String(c.processed),
        c.checkpoint ? seconds(c.checkpoint.age_seconds) : "none"])),
    table("Blobs", ["Pending", "Uploaded", "Sealed", "Sealed, unreferenced", "Expiring", "Expired"],
      [[st.blobs.pending, st.blobs.uploaded, st.blobs.sealed, st.blobs.sealed_unreferenced, st.blobs.expiring, st.blobs.expired].map(String)]),
    table("Memory", ["Collections", "Revisions", "Conflicts"], [[st.memory.collections, st.memory.revisions, st.memory.conflicts].map(String)]),
    table("Capacity", ["", "Used", "Quota"], [
      ["Stored bytes", bytes(st.usage.stored_bytes), bytes(st.quotas.max_stored_bytes)],
      ["Items", String(st.usage.items), String(st.quotas.max_items)]]));
}

async function loadDeliveries(env, note) {
  const el = env.sections.webhooks;
  const st = env.stats;
  const counts = (o) => Object.entries(o || {}).map(([k, v]) => `${v} ${k}`).join(", ") || "none";
  const head = [h("h2", { id: "h-webhooks" }, "Webhooks"),
    st ? dl([["Subscriptions", counts(st.webhooks.subscriptions)], ["Deliveries", counts(st.webhooks.deliveries)]]) : null];
  let list;
  try { list = await env.client.call("GET", `${env.base}/deliveries?state=failed`); } catch (e) {
    replace(el, head, h("p", {}, explain(e, "admin").what));
    return;
  }
  const out = h("p", { class: "form-status", role: "status" }, note || "");
  if (!list.deliveries.length) {
    replace(el, head, h("p", { class: "empty" }, "No failed deliveries. Deliveries that fail five attempts appear here, with a button to send them again."), out);
    return;
  }
  replace(el, head, table("Failed deliveries", ["Event", "Consumer", "Target", "Attempts", "Reason", "Last change", ""],
    list.deliveries.map((d) => [
      h("code", {}, d.event_type + " " + d.event_id), h("code", {}, d.consumer_id), h("span", { class: "url" }, d.url), String(d.attempts),
      d.failure_reason || "—", timeEl(d.updated_at),
      h("button", { type: "button", onclick: async (e) => {
        e.target.disabled = true;
        try {
          const r = await env.client.call("POST", `${env.base}/deliveries/${encodeURIComponent(d.delivery_id)}/redeliver`, { request_id: newRequestID("ui-redeliver") });
          await loadDeliveries(env, `Delivery ${r.delivery_id} was sent again (now ${r.state}, ${r.attempts} attempt(s) in this round).`);
        } catch (err) { fail(out, err); e.target.disabled = false; }
      } }, "Redeliver"),
    ])), out);
}

async function renderActors(env) {
  const { client, base, space } = env;
  let actors = [];
  let consumers = [];
  const load = async () => {
    [actors, consumers] = await Promise.all([client.call("GET", `${base}/actors`).then((r) => r.actors), client.call("GET", `${base}/consumers`).then((r) => r.consumers)]);
  };
  const name = h("input", { type: "text", name: "actor_name", maxLength: 200 });
  const consActor = h("input", { type: "text", name: "consumer_actor", required: true, autocomplete: "off", pattern: "[A-Za-z0-9_\\-]{1,96}" });
  const view = h("select", { name: "view" }, h("option", { value: "inbox" }, "inbox (messages to the actor)"), h("option", { value: "space_log" }, "space_log (everything; needs space.observe)"));
  const out = h("p", { class: "form-status", role: "status" });
  const draw = () => {
    const rows = actors.map((a) => [h("code", {}, a.actor_id), a.display_name || "—",
      consumers.filter((c) => c.actor_id === a.actor_id).map((c) => `${c.consumer_id} (${c.view})`).join(", ") || "—",
      a.revoked ? "revoked" : a.actor_id === space.default_recipient_id ? "default recipient" : confirmButton("Revoke actor", async () => {
        try { await client.call("POST", `${base}/actors/${encodeURIComponent(a.actor_id)}/revoke`, { request_id: newRequestID("ui-revoke") }); a.revoked = true; draw(); } catch (err) { fail(out, err); }
      })]);
    replace(env.sections.actors,
      h("h2", { id: "h-actors" }, "Actors and consumers"),
      h("p", { class: "hint" }, "The space's default recipient is ", h("code", {}, space.default_recipient_id), ". Consumers of every actor are listed under Stats."),
      rows.length ? table("Actors", ["Actor", "Name", "Consumers", ""], rows) : null,
      h("form", { class: "inline", onsubmit: async (e) => {
        e.preventDefault();
        try {
          const body = { request_id: newRequestID("ui-actor") };
          if (name.value.trim()) body.display_name = name.value.trim();
          const a = await client.call("POST", `${base}/actors`, body);
          actors.push({ actor_id: a.actor_id, display_name: body.display_name || "" });
          consActor.value = a.actor_id;
          out.textContent = `Actor ${a.actor_id} created.`;
          name.value = "";
          draw();
        } catch (err) { fail(out, err); }
      } }, h("h3", {}, "New actor"), field("Name", name), h("button", { type: "submit" }, "Create actor")),
      h("form", { class: "inline", onsubmit: async (e) => {
        e.preventDefault();
        try {
          const c = await client.call("POST", `${base}/consumers`, { request_id: newRequestID("ui-consumer"), actor_id: consActor.value.trim(), view: view.value });
          consumers.push(c);
          out.textContent = `Consumer ${c.consumer_id} created.`;
          draw();
          loadStats(env);
        } catch (err) { fail(out, err); }
      } }, h("h3", {}, "New consumer"), field("Actor ID", consActor), field("View", view), h("button", { type: "submit" }, "Create consumer")),
      out);
  };
  try { await load(); } catch (err) { fail(out, err); }
  draw();
}

/** confirmButton asks for a second press before acting (no window.confirm). */
function confirmButton(label, act) {
  const b = h("button", { type: "button", class: "warn" }, label);
  let armed = false;
  b.addEventListener("click", async () => {
    if (!armed) { armed = true; b.textContent = `Press again to ${label.toLowerCase()}`; return; }
    b.disabled = true;
    await act();
  });
  b.addEventListener("blur", () => { if (armed && !b.disabled) { armed = false; b.textContent = label; } });
  return b;
}

async function renderTokens(env) {
  const { client, base } = env;
  let tokens = [];
  const actor = h("input", { type: "text", name: "token_actor", required: true, autocomplete: "off", pattern: "[A-Za-z0-9_\\-]{1,96}" });
  const consumer = h("input", { type: "text", name: "token_consumer", autocomplete: "off", pattern: "[A-Za-z0-9_\\-]{1,96}" });
  const expires = h("input", { type: "datetime-local", name: "expires" });
  const boxes = SCOPES.map((s) => h("input", { type: "checkbox", name: "scope", value: s, id: `scope-${s}`, checked: PERSON_SCOPES.has(s) }));
  const revokeID = h("input", { type: "text", name: "revoke_token_id", required: true, autocomplete: "off", pattern: "[A-Za-z0-9_\\-]{1,96}" });
  const shown = h("div", { class: "secret-once", "aria-live": "polite" });
  const out = h("p", { class: "form-status", role: "status" });
  const revoke = async (id) => {
    try {
      const r = await client.call("POST", `${base}/tokens/${encodeURIComponent(id)}/revoke`, { request_id: newRequestID("ui-revoke") });
      for (const t of tokens) if (t.token_id === id) t.revoked = true;
      out.textContent = `Token ${r.token_id} revoked: it is refused from now on.`;
      draw();
    } catch (err) { fail(out, err); }
  };
  const draw = () => {
    const rows = tokens.map((t) => [h("code", {}, t.token_id), h("code", {}, t.actor_id), t.consumer_id ? h("code", {}, t.consumer_id) : "—", t.scopes.join(" "),
      t.expires_at ? timeEl(t.expires_at) : "never", t.oauth_client_id ? h("code", {}, t.oauth_client_id) : "minted",
      t.revoked ? "revoked" : confirmButton("Revoke", () => revoke(t.token_id))]);
    replace(env.sections.tokens,
      h("h2", { id: "h-tokens" }, "Tokens"),
      rows.length ? table("Tokens (never their secrets)", ["Token ID", "Actor", "Consumer", "Scopes", "Expires", "Held by", ""], rows) : null,
      h("form", { class: "stack", onsubmit: async (e) => {
        e.preventDefault();
        const scopes = boxes.filter((b) => b.checked).map((b) => b.value);
        if (!scopes.length) { out.textContent = "Choose at least one scope."; return; }
        const body = { request_id: newRequestID("ui-token"), actor_id: actor.value.trim(), scopes };
        if (consumer.value.trim()) body.consumer_id = consumer.value.trim();
        if (expires.value) body.expires_at = new Date(expires.value).toISOString();
        try {
          const t = await client.call("POST", `${base}/tokens`, body);
          tokens.unshift({ token_id: t.token_id, actor_id: t.actor_id, consumer_id: t.consumer_id || "", scopes: t.scopes, expires_at: t.expires_at });
          draw();
          const val = h("input", { type: "text", readOnly: true, value: t.token, class: "token-value", id: "new-token", spellcheck: false });
          replace(shown, h("p", {}, h("strong", {}, "Copy this token now: it is shown only once."), " Give it to the person or agent it is for."),
            field(`Token ${t.token_id}`, val));
          val.focus(); val.select();
        } catch (err) { fail(out, err); }
      } },
        h("h3", {}, "New token"),
        field("Actor ID", actor), field("Consumer ID (optional; needed to read an inbox)", consumer),
        h("fieldset", {}, h("legend", {}, "Scopes"), boxes.map((b) => h("div", { class: "check" }, b, h("label", { for: b.id }, b.value)))),
        field("Expires (optional, your local time)", expires),
        h("button", { type: "submit", class: "primary" }, "Create token")),
      shown,
      h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); revoke(revokeID.value.trim()); } },
        h("h3", {}, "Revoke a token by ID"), field("Token ID", revokeID), h("button", { type: "submit", class: "warn" }, "Revoke token")),
      out);
  };
  try { tokens = (await client.call("GET", `${base}/tokens`)).tokens; } catch (err) { fail(out, err); }
  draw();
}

function renderDanger(env) {
  const { client, base, spaceID } = env;
  const typed = h("input", { type: "text", name: "confirm_space", autocomplete: "off", spellcheck: false });
  const del = h("button", { type: "submit", class: "danger", disabled: true }, "Delete this space");
  const out = h("p", { class: "form-status", role: "status" });
  typed.addEventListener("input", () => { del.disabled = typed.value !== spaceID; });
  replace(env.sections.danger,
    h("h2", { id: "h-danger" }, "Delete the space"),
    h("p", {}, "Deleting removes every message, blob, memory revision, actor and token of the space. Access stops at once; it cannot be undone."),
    h("form", { class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      if (typed.value !== spaceID) return;
      del.disabled = true;
      try {
        const r = await client.call("DELETE", base);
        out.textContent = `The space is ${r.state}.`;
      } catch (err) { fail(out, err); del.disabled = false; }
    } }, field(`Type the space ID (${spaceID}) to confirm`, typed), del),
    out);
}
