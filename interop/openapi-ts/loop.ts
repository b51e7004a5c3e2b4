// The RFC §16.1 loop (send, read, ack, reply, status) and a memory publish/read, driven against a running
// Waypost server by a client generated from its OpenAPI document: ./waypost.ts is written by
// openapi-typescript from GET /v0/openapi.json (interop/openapi_ts_test.go), the calls go through
// openapi-fetch, and tsc type-checks every path, parameter, body and result against it before node runs it.
import createClient from "openapi-fetch";
import { createHash } from "node:crypto";
import type { paths } from "./waypost.js";

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

const baseUrl = env("WAYPOST_URL");
const client = (token: string) => createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
const a = client(env("WAYPOST_TOKEN_A"));
const b = client(env("WAYPOST_TOKEN_B"));
const actorA = env("WAYPOST_ACTOR_A");
const actorB = env("WAYPOST_ACTOR_B");
const consumerB = env("WAYPOST_CONSUMER_B");
const collection = env("WAYPOST_COLLECTION_A");

function check(ok: unknown, what: string): asserts ok {
  if (!ok) throw new Error(what);
}

// step prints one line per call for the Go test: the step, the HTTP status, and the answer's envelope.
function step<T extends { response: Response; data?: unknown; error?: unknown }>(name: string, r: T): T {
  console.log(JSON.stringify({ step: name, status: r.response.status, body: r.data ?? r.error }));
  return r;
}

// 1. A sends to B.
const sent = step("send", await a.POST("/v0/messages", {
  body: { request_id: "ts-oa-send-1", recipient_ids: [actorB], subject: "hello", body: { text: "hello from the generated client" } },
}));
check(sent.data?.ok && sent.data.data.submission_state === "committed", "send was not committed");
const messageId = sent.data.data.message_id;
check(messageId, "send answered no message_id");

// 2. B reads its inbox from the start.
const read = step("read", await b.POST("/v0/inbox/read", { body: { consumer_id: consumerB, cursor: null } }));
check(read.data?.ok, "inbox.read failed");
const item = read.data.data.items.find((i) => i.item_type === "message" && i.data.message_id === messageId);
check(item, "the message is not in B's inbox");

// 3. B acknowledges it (processed) and checkpoints.
const acked = step("ack", await b.POST("/v0/inbox/ack", {
  body: { request_id: "ts-oa-ack-1", consumer_id: consumerB, items: [{ item_id: item.item_id, stage: "processed" }],
    checkpoint_cursor: read.data.data.next_cursor },
}));
check(acked.data?.ok, "inbox.ack failed");

// 4. B replies to A.
const reply = step("reply", await b.POST("/v0/messages", {
  body: { request_id: "ts-oa-reply-1", recipient_ids: [actorA], in_reply_to: messageId, body: { text: "got it" } },
}));
check(reply.data?.ok && reply.data.data.submission_state === "committed", "reply was not committed");

// 5. A asks the status of its send, B of its reply.
const status = step("status", await a.GET("/v0/status", { params: { query: { operation: "message.send", request_id: "ts-oa-send-1" } } }));
check(status.data?.ok && status.data.data.submission_state === "committed", "status of the send is not committed");
const replyStatus = step("status-reply", await b.GET("/v0/status", { params: { query: { operation: "message.send", request_id: "ts-oa-reply-1" } } }));
check(replyStatus.data?.ok && replyStatus.data.data.submission_state === "committed", "status of the reply is not committed");

// A reads the reply: B's message, in reply to A's.
const replyId = reply.data.data.message_id;
check(replyId, "reply answered no message_id");
const got = step("get-reply", await a.GET("/v0/messages/{message_id}", { params: { path: { message_id: replyId } } }));
check(got.data?.ok && got.data.data.in_reply_to === messageId, "the reply does not answer the message");

// A retried send answers its first result; the same request_id with other content is a conflict.
const again = step("send-retry", await a.POST("/v0/messages", {
  body: { request_id: "ts-oa-send-1", recipient_ids: [actorB], subject: "hello", body: { text: "hello from the generated client" } },
}));
check(again.data?.ok && again.data.data.message_id === messageId, "a retried send made a second message");
const conflict = step("send-conflict", await a.POST("/v0/messages", {
  body: { request_id: "ts-oa-send-1", recipient_ids: [actorB], body: { text: "other content" } },
}));
check(conflict.response.status === 409 && conflict.error?.error.code === "IDEMPOTENCY_CONFLICT", "no IDEMPOTENCY_CONFLICT");

// Memory: a blob (prepare, PUT the bytes, commit), then a snapshot revision of A's collection and its read.
const content = new TextEncoder().encode("# notes\nfrom the generated client\n");
const sha256 = createHash("sha256").update(content).digest("hex");
const prep = step("blob-prepare", await a.POST("/v0/blobs", {
  body: { request_id: "ts-oa-blob-1", content_type: "text/markdown", size_bytes: content.length, sha256 },
}));
check(prep.data?.ok, "blob.prepare failed");
const upload = prep.data.data;
const uploadId = upload.upload_id;
check(uploadId, "blob.prepare answered no upload_id");
const put = step("blob-upload", await a.PUT("/v0/uploads/{upload_id}/content", {
  params: { path: { upload_id: uploadId } },
  body: content as unknown as Record<string, never>,
  bodySerializer: (body: unknown) => body as BodyInit,
  headers: upload.upload_headers,
}));
check(put.data?.ok, "the upload failed");
const sealed = step("blob-commit", await a.POST("/v0/blobs/commit", { body: { request_id: "ts-oa-commit-1", upload_id: uploadId } }));
check(sealed.data?.ok && sealed.data.data.state === "sealed", "blob.commit did not seal");

const pub = step("memory-publish", await a.POST("/v0/collections/{collection_id}/revisions", {
  params: { path: { collection_id: collection } },
  body: { request_id: "ts-oa-pub-1", expected_revision: 0, mode: "snapshot",
    items: [{ item_id: "notes", blob_id: sealed.data.data.blob_id, path: "notes.md" }] },
}));
check(pub.data?.ok && pub.data.data.revision === 1, "memory.publish did not make revision 1");
const mem = step("memory-read", await a.GET("/v0/collections/{collection_id}/items", {
  params: { path: { collection_id: collection }, query: { limit: 10 } },
}));
check(mem.data?.ok && mem.data.data.revision === 1 && mem.data.data.items.length === 1 &&
  mem.data.data.items[0].item_id === "notes", "memory.read does not show the revision");
const stale = step("memory-publish-stale", await a.POST("/v0/collections/{collection_id}/revisions", {
  params: { path: { collection_id: collection } },
  body: { request_id: "ts-oa-pub-2", expected_revision: 0, mode: "delta", delete_ids: ["notes"] },
}));
check(stale.response.status === 409 && stale.error?.error.code === "REVISION_CONFLICT", "a stale publish was not a REVISION_CONFLICT");

console.log(JSON.stringify({ step: "done" }));
