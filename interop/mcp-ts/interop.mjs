// Drives a running Waypost server with the official TypeScript MCP client.
// Input (environment): WAYPOST_URL, WAYPOST_TOKEN_A, WAYPOST_TOKEN_B, WAYPOST_ACTOR_B, WAYPOST_CONSUMER_B,
// WAYPOST_COLLECTION_A (a collection whose source is A).
// Output: one JSON line per step {"step", "tool", "isError", "structured"} on stdout; the Go test validates
// every structured result against the project's JSON Schemas. Exit code 1 on any unexpected outcome.
// Every tool is called at least once. The SDK itself validates each structuredContent against the tool's
// declared outputSchema (with its own Ajv); this script also checks that every result's text content parses
// as the same JSON as its structuredContent (hosts that show the model only text see the same data).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const url = new URL("/mcp", env("WAYPOST_URL"));

async function connect(token) {
  const client = new Client({ name: "waypost-interop-ts", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport); // initialize + initialized
  return client;
}

function emit(step, tool, res) {
  console.log(JSON.stringify({ step, tool, isError: !!res.isError, structured: res.structuredContent ?? null,
    text: (res.content ?? []).map((c) => c.text ?? "").join(" ") }));
}

function check(cond, msg) {
  if (!cond) {
    console.error("interop: " + msg);
    process.exit(1);
  }
}

const a = await connect(env("WAYPOST_TOKEN_A"));
const b = await connect(env("WAYPOST_TOKEN_B"));
const info = a.getServerVersion();
check(info && info.name === "waypost", `server name: ${JSON.stringify(info)}`);

const tools = await a.listTools();
const names = tools.tools.map((t) => t.name);
console.log(JSON.stringify({ step: "tools/list", names }));
for (const want of ["waypost_describe", "waypost_send", "waypost_inbox", "waypost_ack", "waypost_status"]) {
  check(names.includes(want), `tools/list lacks ${want}`);
}
await b.listTools(); // each client validates results against the output schemas it listed
for (const t of tools.tools) {
  check(t.outputSchema && t.outputSchema.type === "object", `${t.name}: no object outputSchema`);
  check(a.getToolOutputValidator(t.name) !== undefined && b.getToolOutputValidator(t.name) !== undefined,
    `${t.name}: the SDK compiled no output validator`);
}

// canonical renders a JSON value with sorted object keys, to compare two parsed documents.
const canonical = (v) =>
  Array.isArray(v) ? `[${v.map(canonical).join(",")}]`
  : v !== null && typeof v === "object" ? `{${Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",")}}`
  : JSON.stringify(v);

const called = new Set();
const call = async (client, step, name, args) => {
  const res = await client.callTool({ name, arguments: args });
  emit(step, name, res);
  called.add(name);
  check(res.structuredContent, `${step}: no structuredContent`);
  const texts = (res.content ?? []).filter((c) => c.type === "text");
  check(texts.length > 0, `${step}: no text content`);
  for (const t of texts) {
    let parsed;
    try {
      parsed = JSON.parse(t.text);
    } catch (e) {
      check(false, `${step}: text content is not JSON: ${t.text}`);
    }
    check(canonical(parsed) === canonical(res.structuredContent),
      `${step}: text content differs from structuredContent:\n${t.text}\n${JSON.stringify(res.structuredContent)}`);
  }
  return res;
};

let r = await call(a, "describe", "waypost_describe", {});
check(!r.isError && r.structuredContent.ok, "describe failed");

const send = { request_id: "ts-send-1", recipient_ids: [env("WAYPOST_ACTOR_B")], subject: "from TypeScript",
  body: { text: "hello from the official TypeScript MCP client" } };
r = await call(a, "send", "waypost_send", send);
check(!r.isError && r.structuredContent.data.submission_state === "committed", "send not committed");
const first = r.structuredContent.data;

r = await call(a, "send-retry", "waypost_send", send);
check(!r.isError && JSON.stringify(r.structuredContent.data) === JSON.stringify(first), "retry returned another result");

r = await call(a, "send-conflict", "waypost_send", { ...send, body: { text: "different" } });
check(r.isError && r.structuredContent.error.code === "IDEMPOTENCY_CONFLICT", "conflict not reported as a tool error");

r = await call(a, "status", "waypost_status", { operation: "message.send", request_id: "ts-send-1" });
check(!r.isError && r.structuredContent.data.submission_state === "committed", "status not committed");

r = await call(b, "inbox", "waypost_inbox", { consumer_id: env("WAYPOST_CONSUMER_B"), cursor: null, limit: 10 });
check(!r.isError && r.structuredContent.data.items.length === 1, "inbox does not hold the message");
const item = r.structuredContent.data.items[0];

r = await call(b, "ack", "waypost_ack", { request_id: "ts-ack-1", consumer_id: env("WAYPOST_CONSUMER_B"),
  items: [{ item_id: item.item_id, stage: "received" }], checkpoint_cursor: r.structuredContent.data.next_cursor });
check(!r.isError && r.structuredContent.data.receipts[0].changed === true, "ack did not advance");

r = await call(b, "get", "waypost_get_message", { message_id: first.message_id });
check(!r.isError && r.structuredContent.data.body.text === send.body.text, "get_message lost the body");
r = await call(b, "wait", "waypost_wait", { consumer_id: env("WAYPOST_CONSUMER_B"), cursor: null, timeout_ms: 0 });
check(!r.isError && r.structuredContent.data.items.length === 1, "wait does not return the message");

// Blobs: prepare an empty file, PUT it with fetch, commit, get.
const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
r = await call(a, "blob-prepare", "waypost_blob_prepare", { request_id: "ts-blob-1", content_type: "text/plain", size_bytes: 0, sha256: emptySHA });
check(!r.isError, "blob prepare failed");
const prep = r.structuredContent.data;
const put = await fetch(prep.upload_url, { method: "PUT", body: "",
  headers: { Authorization: `Bearer ${env("WAYPOST_TOKEN_A")}`, "Content-Type": "text/plain" } });
check(put.ok, `upload: HTTP ${put.status}`);
r = await call(a, "blob-commit", "waypost_blob_commit", { request_id: "ts-commit-1", upload_id: prep.upload_id });
check(!r.isError && r.structuredContent.data.state === "sealed", "blob commit failed");
r = await call(a, "blob-get", "waypost_blob_get", { blob_id: prep.blob_id });
check(!r.isError, "blob get failed");
r = await call(a, "blob-get-missing", "waypost_blob_get", { blob_id: "blb_none" });
check(r.isError && r.structuredContent.error.code === "NOT_FOUND", "missing blob not reported as a tool error");

// Memory: publish the blob into A's collection, read and export it.
const coll = env("WAYPOST_COLLECTION_A");
r = await call(a, "memory-publish", "waypost_memory_publish", { request_id: "ts-pub-1", collection_id: coll, expected_revision: 0,
  mode: "snapshot", items: [{ item_id: "i1", blob_id: prep.blob_id, path: "notes/empty.txt" }] });
check(!r.isError && r.structuredContent.data.revision === 1, "memory publish failed");
r = await call(a, "memory-read", "waypost_memory_read", { collection_id: coll, revision: null });
check(!r.isError && r.structuredContent.data.items.length === 1, "memory read failed");
r = await call(a, "memory-export", "waypost_memory_export", { collection_id: coll });
check(!r.isError && r.structuredContent.data.items.length === 1, "memory export failed");

// Webhook subscriptions: list, a refused target (never dialled: loopback is refused before connecting), stop.
r = await call(b, "subscriptions", "waypost_subscriptions", {});
check(!r.isError || r.structuredContent.error.code === "UNSUPPORTED", "subscriptions failed");
r = await call(b, "subscribe", "waypost_subscribe", { request_id: "ts-sub-1", consumer_id: env("WAYPOST_CONSUMER_B"),
  event_types: ["waypost.feed.item.created"], delivery: { mode: "webhook", url: "https://127.0.0.1:1/hook", secret: "whsec_" + "A".repeat(43) + "=" } });
check(r.isError, "a loopback webhook target was accepted");
r = await call(b, "unsubscribe", "waypost_unsubscribe", { subscription_id: "sub_none", request_id: "ts-unsub-1" });
check(r.isError, "stopping a missing subscription succeeded");

for (const name of names) {
  check(called.has(name), `tool ${name} was not called`);
}

// A JSON-RPC level failure (unknown tool) is a protocol error, not a tool result.
let protocolError = false;
try {
  const res = await a.callTool({ name: "waypost_no_such_tool", arguments: {} });
  protocolError = !!res.isError; // some SDK versions surface it as an error result
} catch {
  protocolError = true;
}
check(protocolError, "unknown tool was accepted");

await a.close();
await b.close();
console.log(JSON.stringify({ step: "done" }));
