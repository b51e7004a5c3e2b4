// Drives a running Waypost server with the official TypeScript MCP client.
// Input (environment): WAYPOST_URL, WAYPOST_TOKEN_A, WAYPOST_TOKEN_B, WAYPOST_ACTOR_B, WAYPOST_CONSUMER_B.
// Output: one JSON line per step {"step", "tool", "isError", "structured"} on stdout; the Go test validates
// every structured result against the project's JSON Schemas. Exit code 1 on any unexpected outcome.
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

const call = async (client, step, name, args) => {
  const res = await client.callTool({ name, arguments: args });
  emit(step, name, res);
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
