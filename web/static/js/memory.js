// memory.js browses memory collections: the collections the feed announced (or one opened by ID), their
// revisions, items and tombstones, item downloads and the export in each format.

import { explain } from "./api.js";
import { download } from "./download.js";
import { h, field, replace, table } from "./dom.js";
import { json, timeEl } from "./format.js";

/** memoryView lists the collections seen in the feed and opens one by ID. */
export async function memoryView(ctx) {
  const feed = await ctx.startFeed();
  const list = h("div");
  const id = h("input", { type: "text", name: "collection", pattern: "[A-Za-z0-9_\\-]{1,96}", required: true, autocomplete: "off" });
  const render = () => {
    const cols = [...feed.collections().values()];
    if (!cols.length) {
      replace(list, h("p", { class: "empty" }, "No memory revision has reached your feed yet. An agent publishes one with ",
        h("code", {}, "waypost_memory_publish"), "; if you know a collection's ID, open it below."));
      return;
    }
    replace(list, table("Collections announced in your feed", ["Collection", "Latest revision", "By", "When"],
      cols.map((it) => [h("a", { href: `#/memory/${it.data.collection_id}` }, it.data.collection_id), String(it.data.revision),
        h("code", {}, it.data.source_actor_id), timeEl(it.committed_at)])));
  };
  ctx.onLeave(feed.subscribe(render));
  render();
  ctx.main.replaceChildren(h("section", {}, h("h1", {}, "Memory"),
    ctx.person.has("memory.read") ? null : h("p", { class: "warn" }, "Your token lacks the memory.read scope: collections cannot be read with it."),
    list,
    h("form", { class: "card inline", onsubmit: (e) => { e.preventDefault(); ctx.go(`#/memory/${id.value.trim()}`); } },
      field("Open a collection by ID", id), h("button", { type: "submit" }, "Open"))));
}

/** collectionView shows one revision of a collection (the latest unless one is chosen), with tombstones. */
export async function collectionView(ctx, collectionID) {
  const client = ctx.person.client;
  await ctx.person.describe();
  const base = `/v0/collections/${encodeURIComponent(collectionID)}`;
  const state = { revision: null, tombstones: true, items: [], cursor: null, more: false, head: null };
  const rev = h("select", { name: "revision" });
  const tomb = h("input", { type: "checkbox", id: "tomb", checked: true });
  const body = h("div");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const note = h("p", { class: "form-status", role: "status" });

  const load = async (append) => {
    const q = new URLSearchParams({ include_tombstones: String(state.tombstones), limit: "500" });
    if (state.revision !== null) q.set("revision", String(state.revision));
    if (append && state.cursor) q.set("cursor", state.cursor);
    const page = await client.call("GET", `${base}/items?${q}`);
    state.items = append ? state.items.concat(page.items) : page.items;
    state.cursor = page.next_cursor; state.more = page.has_more;
    if (state.head === null) {
      state.head = page.revision;
      const opts = [];
      for (let r = page.revision; r >= 1 && opts.length < 200; r--) opts.push(h("option", { value: String(r) }, r === page.revision ? `${r} (latest)` : String(r)));
      replace(rev, opts.length ? opts : h("option", { value: "0" }, "0 (empty)"));
    }
    render(page.revision);
  };
  const render = (revision) => {
    more.hidden = !state.more;
    if (!state.items.length) {
      replace(body, h("p", { class: "empty" }, revision === 0 ? "This collection has no revision yet." : "No items in this revision."));
      return;
    }
    replace(body, table(`Revision ${revision}: ${state.items.length} entr${state.items.length === 1 ? "y" : "ies"}`,
      ["Path", "State", "Written in", "Metadata", ""],
      state.items.map((it) => [
        h("span", { class: "path" }, it.path),
        it.state === "tombstone" ? h("span", { class: "badge tombstone" }, `tombstone (deleted in ${it.deleted_in_revision})`) : h("span", { class: "badge active" }, "active"),
        String(it.revision),
        Object.keys(it.metadata || {}).length ? h("pre", { class: "metadata small" }, json(it.metadata)) : "—",
        it.state === "active" && ctx.person.has("blob.read") ? h("button", { type: "button", onclick: () => save(`/v0/blobs/${encodeURIComponent(it.blob_id)}/content`, it.path.split("/").pop()) }, "Download") : "",
      ])));
  };
  const save = async (path, name) => {
    note.textContent = "Downloading…";
    try { await download(client, path, name); note.textContent = `Saved ${name}.`; } catch (e) { note.textContent = `${explain(e).what} ${explain(e).todo}`; }
  };
  rev.addEventListener("change", () => { state.revision = Number(rev.value); load(false).catch((e) => ctx.error(e)); });
  tomb.addEventListener("change", () => { state.tombstones = tomb.checked; load(false).catch((e) => ctx.error(e)); });
  more.addEventListener("click", () => load(true).catch((e) => ctx.error(e)));
  const exportBtn = (format, label, ext) => h("button", { type: "button", onclick: () => {
    const q = new URLSearchParams({ format });
    if (state.revision !== null) q.set("revision", String(state.revision));
    save(`${base}/export?${q}`, `${collectionID}-r${state.revision ?? state.head}.${ext}`);
  } }, label);
  const zip = ctx.person.me.capabilities && ctx.person.me.capabilities.server_export;
  ctx.main.replaceChildren(h("section", {},
    h("p", {}, h("a", { href: "#/memory" }, "← Memory")),
    h("h1", {}, "Collection ", h("code", {}, collectionID)),
    h("div", { class: "controls" }, field("Revision", rev),
      h("div", { class: "check" }, tomb, h("label", { for: "tomb" }, "Show tombstones (deleted items)"))),
    h("div", { class: "actions" }, h("span", {}, "Export: "), exportBtn("json", "JSON", "json"), exportBtn("markdown", "Markdown", "md"), zip ? exportBtn("zip", "ZIP", "zip") : null),
    note, body, more));
  await load(false);
}
