// oauth.js signs a person in through the server's own OAuth authorization server (docs/oauth.md): the app
// registers itself once as a public client (RFC 7591) with this page as its redirect URI, sends the browser
// to /authorize with a PKCE S256 challenge, where the owner approves (admin secret) and picks the actor and
// consumer, and exchanges the code it gets back for an ordinary data-plane token. The code arrives in the
// page's query string and is removed from the address at once; the verifier and state live in
// sessionStorage for the round trip only.

import { h } from "./dom.js";

const CLIENT_KEY = "waypost.oauth.client";
const PENDING_KEY = "waypost.oauth.pending";
const SCOPES = "message.send message.read receipt.write blob.write blob.read memory.read";

function b64url(bytes) {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(n) {
  const a = new Uint8Array(n);
  crypto.getRandomValues(a);
  return b64url(a);
}

function redirectURI() { return `${location.origin}/ui/`; }

/** client returns this app's registration, registering it when there is none for this address. */
async function client() {
  try {
    const c = JSON.parse(localStorage.getItem(CLIENT_KEY) || "null");
    if (c && c.redirect_uri === redirectURI() && c.client_id) return c;
  } catch { /* registered again below */ }
  const res = await fetch("/register", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_name: "Waypost web app", redirect_uris: [redirectURI()], token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], scope: SCOPES }) });
  const body = await res.json().catch(() => ({}));
  if (res.status !== 201) throw new Error(`The server refused to register this app: ${body.error_description || body.error || res.status}.`);
  const c = { client_id: body.client_id, redirect_uri: redirectURI() };
  localStorage.setItem(CLIENT_KEY, JSON.stringify(c));
  return c;
}

/** start sends the browser to the authorization endpoint. */
async function start() {
  if (!window.isSecureContext || !crypto.subtle) {
    throw new Error("Signing in through OAuth needs HTTPS (or localhost): this page is not a secure context. Paste a token instead.");
  }
  const c = await client();
  const verifier = randomString(32);
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const state = randomString(16);
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({ verifier, state, client_id: c.client_id }));
  const q = new URLSearchParams({ response_type: "code", client_id: c.client_id, redirect_uri: c.redirect_uri, scope: SCOPES,
    state, code_challenge: challenge, code_challenge_method: "S256", resource: `${location.origin}/v0` });
  location.assign(`/authorize?${q}`);
}

/** finish completes a sign-in when the page was opened by the authorization server's redirect: it returns
 * a data-plane token, or null when the page was not such a redirect. The code never stays in the address. */
export async function finishOAuth() {
  const q = new URLSearchParams(location.search);
  if (!q.has("code") && !q.has("error")) return null;
  history.replaceState(null, "", location.pathname + location.hash);
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
  sessionStorage.removeItem(PENDING_KEY);
  if (!pending || q.get("state") !== pending.state) throw new Error("This sign-in was not started from this tab: start it again.");
  if (q.get("iss") !== location.origin) throw new Error("The answer did not come from this server's authorization server (RFC 9207): start again.");
  if (q.has("error")) {
    throw new Error(q.get("error") === "access_denied" ? "The owner denied the sign-in." : `The sign-in was refused: ${q.get("error_description") || q.get("error")}.`);
  }
  const res = await fetch("/token", { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "authorization_code", code: q.get("code"), redirect_uri: redirectURI(),
      client_id: pending.client_id, code_verifier: pending.verifier, resource: `${location.origin}/v0` }) });
  const body = await res.json().catch(() => ({}));
  if (!res.ok || !body.access_token) throw new Error(`The code could not be exchanged: ${body.error_description || body.error || res.status}.`);
  return body.access_token;
}

/** oauthSignIn is the sign-in method that asks the owner's approval on the consent page. */
export const oauthSignIn = {
  id: "oauth",
  label: "Sign in with the owner's approval",
  render(_done, fail) {
    const button = h("button", { type: "button", class: "primary", id: "oauth-sign-in", onclick: async () => {
      button.disabled = true;
      try { await start(); } catch (e) { fail(e); button.disabled = false; }
    } }, "Continue to the approval page");
    return h("section", { class: "card" },
      h("h2", {}, "Sign in with the owner's approval"),
      h("p", { class: "hint" }, "No token? The owner approves this browser on the server's consent page (with the admin secret) and chooses which actor and inbox you get. The session lasts an hour."),
      button);
  },
};
