// app.js starts the app: the two sessions, the hash router, the navigation and the banner that says what
// went wrong and what to do. Routes live in the URL fragment (#/inbox, #/message/<id>, #/console/<space>…),
// which never holds a credential.

import { explain } from "./api.js";
import { AdminSession, PersonSession } from "./auth.js";
import { h, replace } from "./dom.js";
import { Feed } from "./feed.js";
import { inboxView, signInView } from "./inbox.js";
import { messageView } from "./message.js";
import { composeView } from "./compose.js";
import { memoryView, collectionView } from "./memory.js";
import { consoleView, spaceView } from "./console.js";
import { finishOAuth } from "./oauth.js";

/** NoConsumer is thrown when the signed-in token is bound to no consumer, so it has no feed to read. */
class NoConsumer extends Error {
  constructor() {
    super("This token is bound to no consumer, so it has no inbox to read.");
  }
}

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const bannerEl = document.getElementById("banner");

/** ctx is what every view gets: the sessions, the feed, the banner and navigation. */
const ctx = {
  main,
  person: null,
  admin: null,
  feed: null,
  keepBanner: false, // the next route keeps the banner (it says why the person was sent there)
  banner(kind, what, todo, action) {
    if (!what) { bannerEl.hidden = true; bannerEl.replaceChildren(); return; }
    bannerEl.className = `banner ${kind}`;
    replace(bannerEl, h("strong", {}, what), " ", todo || "", action || null);
    bannerEl.hidden = false;
  },
  go(hash) { if (location.hash === hash) route(); else location.hash = hash; },
  /** startFeed starts the person's feed once per sign-in (it needs a token bound to a consumer). */
  async startFeed() {
    const me = await ctx.person.describe();
    if (!me.consumer_id) {
      throw new NoConsumer();
    }
    if (!ctx.feed) {
      ctx.feed = new Feed(ctx.person);
      ctx.feed.subscribe(showFeedState);
      ctx.feed.start();
    }
    return ctx.feed;
  },
  stopFeed() {
    if (ctx.feed) ctx.feed.stop();
    ctx.feed = null;
  },
  error(err, who) {
    const { what, todo } = explain(err, who);
    ctx.banner("error", what, todo);
  },
};

function showFeedState(feed) {
  const s = feed.state;
  if (s.phase === "retrying" && s.error) {
    const { what } = explain(s.error);
    const secs = Math.max(1, Math.round((s.retryAt - Date.now()) / 1000));
    ctx.banner("warn", what, `Live updates paused; trying again in ${secs} s.`);
  } else if (s.phase === "live" && !bannerEl.classList.contains("error")) {
    ctx.banner();
  }
}

ctx.person = new PersonSession((err) => {
  ctx.stopFeed();
  const { what, todo } = explain(err, "token");
  ctx.banner("error", what, todo);
  ctx.keepBanner = true;
  ctx.go("#/inbox");
});
ctx.admin = new AdminSession((err) => {
  const { what, todo } = explain(err, "admin");
  ctx.banner("error", what, todo);
  ctx.keepBanner = true;
  ctx.go("#/console");
});

const routes = [
  [/^#\/inbox$/, inboxView],
  [/^#\/message\/([A-Za-z0-9_-]{1,96})$/, messageView],
  [/^#\/compose$/, composeView],
  [/^#\/memory$/, memoryView],
  [/^#\/memory\/([A-Za-z0-9_-]{1,96})$/, collectionView],
  [/^#\/console$/, consoleView],
  [/^#\/console\/([A-Za-z0-9_-]{1,96})$/, spaceView],
];

function renderNav() {
  const here = location.hash || "#/";
  const link = (href, text) => h("a", { href, "aria-current": here === href || here.startsWith(href + "/") ? "page" : null }, text);
  const items = [link("#/inbox", "Inbox"), link("#/compose", "Compose"), link("#/memory", "Memory"), link("#/console", "Console")];
  if (ctx.person.signedIn) {
    items.push(h("button", { type: "button", class: "link", onclick: () => { ctx.stopFeed(); ctx.person.signOut(); ctx.banner(); ctx.go("#/inbox"); } }, "Sign out"));
  }
  replace(nav, items);
}

let current = null; // the shown route: its cleanups and whether it was left

/** route shows the view of the URL fragment. Each view renders into a container of its own and gets its
 * own onLeave, so a slow view that finishes after the person moved on changes nothing on screen. */
async function route() {
  if (current) current.leave();
  if (ctx.keepBanner) ctx.keepBanner = false;
  else if (!ctx.feed || ctx.feed.state.phase !== "retrying") ctx.banner();
  const container = h("div", { class: "view" }, h("p", { class: "loading", role: "status" }, "Loading…"));
  const cleanups = [];
  const here = { left: false, leave() { here.left = true; for (const fn of cleanups.splice(0)) fn(); } };
  current = here;
  const vctx = Object.create(ctx);
  vctx.main = container;
  vctx.onLeave = (fn) => { if (here.left) fn(); else cleanups.push(fn); };
  const hash = location.hash || "#/";
  renderNav();
  if (hash === "#/" || hash === "") { location.replace("#/inbox"); return; }
  replace(main, container);
  for (const [re, view] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    const needsPerson = view !== consoleView && view !== spaceView;
    if (needsPerson && !ctx.person.signedIn) {
      replace(container, signInView(vctx));
      return;
    }
    main.focus({ preventScroll: true });
    try {
      await view(vctx, ...m.slice(1));
    } catch (e) {
      if (here.left) return;
      const { what, todo } = e instanceof NoConsumer
        ? { what: e.message, todo: "Ask the owner for a token made with --consumer (your consumer's ID), then sign out and in again." }
        : explain(e);
      if (!(e instanceof NoConsumer)) ctx.error(e);
      replace(container, h("section", { class: "card" }, h("h1", {}, "This page could not be shown"),
        h("p", {}, what), h("p", {}, todo),
        h("button", { type: "button", onclick: () => route() }, "Try again")));
    }
    return;
  }
  replace(container, h("section", { class: "card" }, h("h1", {}, "No such page"), h("p", {}, h("a", { href: "#/inbox" }, "Go to your inbox"))));
}

window.addEventListener("hashchange", route);
// A page opened by the authorization server's redirect finishes the OAuth sign-in first.
finishOAuth().then(async (token) => {
  if (token) {
    await ctx.person.signIn(token);
    if (!location.hash || location.hash === "#/") location.replace("#/inbox");
  }
}).catch((e) => {
  ctx.banner("error", e.message, "");
  ctx.keepBanner = true;
}).finally(route);
