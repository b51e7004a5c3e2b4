// auth.js keeps the two credentials the app uses, and the ways to obtain them.
//
// The person's data-plane token is kept in localStorage (this browser profile, this origin) until they
// sign out or the server refuses it, so it is pasted once. The owner's admin secret is kept in
// sessionStorage only: it is gone when the tab or window closes, and never written anywhere else.
//
// A sign-in method is an object { id, label, render(done) } whose render returns the element that asks
// for the credential and calls done(token) with a data-plane token (or fail(error)). "Paste a token" and
// "the owner's approval" (the server's OAuth authorization server, oauth.js) are offered.

import { Client } from "./api.js";
import { h, field } from "./dom.js";
import { oauthSignIn } from "./oauth.js";

const PERSON_KEY = "waypost.person.token";
const ADMIN_KEY = "waypost.admin.secret";

/** PersonSession is the signed-in person: their token and what describe says about it. */
export class PersonSession {
  constructor(onLost) {
    this.onLost = onLost;
    this.me = null; // describe's data once checked
    this.client = new Client(() => this.token, (e) => this.lost(e));
  }
  get token() { return localStorage.getItem(PERSON_KEY) || ""; }
  get signedIn() { return this.token !== ""; }

  /** signIn checks a token with describe and keeps it; it throws the ApiError of a refused token. */
  async signIn(token) {
    const probe = new Client(() => token);
    const me = await probe.call("GET", "/v0/describe");
    localStorage.setItem(PERSON_KEY, token);
    this.me = me;
    return me;
  }

  /** describe loads (once) what the kept token may do. */
  async describe() {
    if (!this.me) this.me = await this.client.call("GET", "/v0/describe");
    return this.me;
  }

  /** has reports whether the token carries a scope. */
  has(scope) { return !!this.me && (this.me.scopes || []).includes(scope); }

  signOut() {
    localStorage.removeItem(PERSON_KEY);
    this.me = null;
  }

  lost(err) {
    this.signOut();
    this.onLost(err);
  }
}

/** AdminSession is the owner's admin secret for this browser session only. */
export class AdminSession {
  constructor(onLost) {
    this.onLost = onLost;
    this.client = new Client(() => this.secret, (e) => { this.signOut(); this.onLost(e); });
  }
  get secret() { return sessionStorage.getItem(ADMIN_KEY) || ""; }
  get signedIn() { return this.secret !== ""; }
  signIn(secret) { sessionStorage.setItem(ADMIN_KEY, secret); }
  signOut() { sessionStorage.removeItem(ADMIN_KEY); }
}

/** pasteToken is the sign-in method that takes a token the owner issued (waypost admin token create). */
export const pasteToken = {
  id: "token",
  label: "Paste a token",
  render(done) {
    const input = h("input", { type: "password", name: "token", autocomplete: "off", required: true, spellcheck: false });
    const form = h("form", { class: "card", onsubmit: (e) => { e.preventDefault(); done(input.value.trim()); } },
      h("h2", {}, "Sign in with a token"),
      field("Your Waypost token", input, "The owner gives you a token bound to your consumer (waypost admin token create --actor … --consumer …). It is kept in this browser until you sign out."),
      h("button", { type: "submit", class: "primary" }, "Sign in"));
    return form;
  },
};

/** signInMethods are the ways a person can sign in, in the order they are offered. */
export const signInMethods = [pasteToken, oauthSignIn];
