// api.js calls the public Waypost HTTP APIs (/v0 with a data-plane token, /admin/v0 with the admin
// secret) on this origin, and turns every failure into an ApiError that says what happened and what to do.
// Credentials travel only in the Authorization header, never in a URL.

/** ApiError is a failed call: an error envelope (code, HTTP status, Retry-After), or no answer at all. */
export class ApiError extends Error {
  constructor({ code, status, message, retryAfter, requestID, details }) {
    super(message || code);
    this.code = code;            // SUPPLEMENT §11.4 code, or "UNREACHABLE" / "BAD_RESPONSE"
    this.status = status || 0;   // HTTP status, 0 when the server was not reached
    this.retryAfter = retryAfter; // seconds, for RATE_LIMITED and other retryable refusals
    this.requestID = requestID;
    this.details = details || {};
  }
}

/** Client calls one plane of the API with one credential. */
export class Client {
  /**
   * @param {() => string} credential returns the bearer credential (token or admin secret)
   * @param {(e: ApiError) => void} onUnauthenticated is told when the credential is refused
   */
  constructor(credential, onUnauthenticated) {
    this.credential = credential;
    this.onUnauthenticated = onUnauthenticated || (() => {});
  }

  /** call sends a JSON request and returns the envelope's data; it throws an ApiError. */
  async call(method, path, body, { signal } = {}) {
    const res = await this.raw(method, path, body, { signal });
    let env;
    try {
      env = await res.json();
    } catch {
      throw new ApiError({ code: "BAD_RESPONSE", status: res.status, message: `The server answered ${res.status} without a Waypost envelope.` });
    }
    if (!res.ok || !env.ok) throw this.failure(res, env);
    return env.data;
  }

  /** raw sends a request and returns the Response (for byte downloads); it throws an ApiError when the
   * server cannot be reached, or when it refuses with an envelope. */
  async raw(method, path, body, { signal, accept } = {}) {
    const headers = { Authorization: `Bearer ${this.credential()}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (accept) headers.Accept = accept;
    let res;
    try {
      res = await fetch(path, {
        method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store", credentials: "omit", redirect: "follow", referrerPolicy: "no-referrer",
      });
    } catch (e) {
      if (e && e.name === "AbortError") throw e;
      throw new ApiError({ code: "UNREACHABLE", message: "The Waypost server could not be reached." });
    }
    if (!res.ok && (res.headers.get("Content-Type") || "").startsWith("application/json")) {
      let env = null;
      try { env = await res.json(); } catch { /* not an envelope */ }
      throw this.failure(res, env || {});
    }
    if (!res.ok) throw new ApiError({ code: "BAD_RESPONSE", status: res.status, message: `The server answered HTTP ${res.status}.` });
    return res;
  }

  /** put uploads bytes to an upload URL with the headers blob.prepare named; the credential goes along
   * only to this origin (a presigned storage URL takes none). */
  async put(url, headers, bytes) {
    const target = new URL(url, location.href);
    const h = { ...(headers || {}) };
    if (target.origin === location.origin) h.Authorization = `Bearer ${this.credential()}`;
    let res;
    try {
      res = await fetch(target, { method: "PUT", headers: h, body: bytes, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" });
    } catch {
      throw new ApiError({ code: "UNREACHABLE", message: "The upload could not reach the server." });
    }
    let env = {};
    try { env = await res.json(); } catch { /* not an envelope */ }
    if (!res.ok) throw this.failure(res, env);
    return env.data;
  }

  failure(res, env) {
    const e = env.error || {};
    const ra = Number(res.headers.get("Retry-After"));
    const err = new ApiError({
      code: e.code || "BAD_RESPONSE", status: res.status, message: e.message,
      retryAfter: Number.isFinite(ra) && ra > 0 ? ra : undefined, requestID: env.request_id, details: e.details,
    });
    if (err.code === "UNAUTHENTICATED") this.onUnauthenticated(err);
    return err;
  }
}

/** explain turns an error into a sentence of what happened and one of what to do. */
export function explain(err, who = "token") {
  if (!(err instanceof ApiError)) return { what: "Something went wrong in the page.", todo: "Reload the page; if it happens again, report it." };
  const again = who === "admin" ? "Enter the admin secret again." : "Sign in again with a valid token.";
  switch (err.code) {
    case "UNREACHABLE":
      return { what: "The Waypost server could not be reached.", todo: "Check that it is running and your network is up; the page retries by itself." };
    case "UNAUTHENTICATED":
      return { what: who === "admin" ? "The admin secret was refused." : "Your token was refused: it is wrong, expired or revoked.", todo: again };
    case "FORBIDDEN":
      return { what: `Not allowed: ${err.message}`, todo: "Ask the owner for a token with the scope this needs." };
    case "NOT_FOUND":
      return { what: "Not found, or not visible to you.", todo: "Check the ID." };
    case "RATE_LIMITED":
      return { what: "Too many requests.", todo: `Wait ${err.retryAfter || 1} s and try again.` };
    case "STORAGE_UNAVAILABLE":
    case "INTERNAL":
      return { what: `The server had a problem (${err.code}${err.requestID ? ", request " + err.requestID : ""}).`, todo: `Try again${err.retryAfter ? " in " + err.retryAfter + " s" : ""}.` };
    case "IDEMPOTENCY_CONFLICT":
      return { what: "This draft was already sent with different content.", todo: "Start a new draft to send it again." };
    default:
      return { what: `${err.code}: ${err.message}`, todo: "Correct the request and try again." };
  }
}
