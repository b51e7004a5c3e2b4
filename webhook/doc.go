// Package webhook holds the building blocks of Waypost's optional webhook events (RFC-0001 §12,
// capability webhook_events). This comment starts with a guide for receivers.
//
// # Receiver guide
//
// What arrives. Each notification is an HTTP POST with Content-Type application/cloudevents+json whose
// body is one CloudEvents 1.0 event in structured JSON, at most 8192 bytes:
//
//	{"specversion":"1.0","id":"it_…","source":"urn:uuid:…","type":"waypost.message.committed.v1",
//	 "subject":"messages/msg_…","time":"2026-10-11T10:00:00Z","datacontenttype":"application/json",
//	 "data":{"api_version":"0.1","message_id":"msg_…","visible_seq":"1","thread_id":"thr_…"}}
//
// The types are waypost.message.committed.v1 (subject messages/<message_id>),
// waypost.memory.revision.published.v1 (collections/<collection_id>/revisions/<n>) and
// waypost.receipt.updated.v1 (receipts/<receipt_id>). id is the feed item_id, source is the space's
// stable source_uri, time is the commit time. data holds only api_version, resource IDs, the resource
// version where there is one, and visible_seq (a decimal string). It never holds a message body, subject,
// memory content or receipt stage: read those with your own token (message.get, inbox.read,
// memory.read). An event grants no permission of any kind.
//
// Headers (Standard Webhooks):
//
//	webhook-id         the event id (a fresh "wv_…" ID for a verification challenge)
//	webhook-timestamp  Unix seconds when this attempt was signed; every attempt is signed anew
//	webhook-signature  "v1,<base64>", or two of them separated by a space for up to 5 minutes
//	                   after the secret was rotated (the new secret's first)
//
// Verifying. The secret is "whsec_" + the standard base64 of 32 random bytes; the HMAC key is those 32
// decoded bytes. Before parsing anything, compute base64(HMAC-SHA256(key, webhook-id + "." +
// webhook-timestamp + "." + raw body)) over the body bytes exactly as received (never re-serialize the
// JSON), compare it in constant time with each v1 entry, and accept if one matches. Reject a timestamp
// more than 300 s from your clock. An official Standard Webhooks library does all of this: npm
// "standardwebhooks" (checked in interop/webhooks-js) or github.com/standard-webhooks/standard-webhooks/
// libraries/go. Answer an invalid signature with a 4xx and do nothing else.
//
// Verification challenge. Before a subscription becomes active Waypost POSTs, with Content-Type
// application/json and the same signature headers,
//
//	{"type":"verification","challenge":"<43 characters: 32 random bytes in unpadded base64url>"}
//
// Verify the signature, then answer within 10 seconds with a 2xx status and the body
// {"challenge":"<the same string>"}. Each challenge is used once and expires after 60 s; no business
// content is ever sent to an unverified target. Targets must be HTTPS on a public address: private,
// loopback, link-local and similar addresses are refused when the connection is made, so a DNS name
// that later points inside a network is refused too.
//
// Answering events. Any 2xx means delivered: acknowledge quickly and process afterwards. 410 Gone means
// "stop sending": no further attempt of that event is made, and the subscription may be stopped. Any other
// answer (3xx included: redirects are not followed), a network error or no complete answer within 10 s is
// retried. A valid Retry-After (seconds or an HTTP date) is honoured, but never past the subscription's
// expiry.
//
// Duplicates and order. The same event may arrive more than once (a retry after a lost 2xx, a manual
// redelivery): deduplicate on (source, id), which never changes between attempts. Events may arrive out
// of order or not at all; data.visible_seq gives the feed order. A webhook delivery is not exactly-once,
// so make your reaction idempotent too.
//
// Retry schedule. At most 5 attempts: immediately, then 1 s, 5 s, 30 s and 5 min after the previous
// attempt ended, each delay varied by up to ±10%; about six minutes end to end. After that the failure is
// recorded (an operator can redeliver) and nothing more is sent. The schedule is short on purpose: a
// notification is only a hint that something new is in the durable feed, which keeps everything for its
// retention period. A receiver that was down catches up by reading the feed from its own cursor
// (inbox.read), not by waiting for redeliveries; an expired or failing subscription loses no content.
//
// # Packages
//
//   - event: builds the CloudEvent of a feed item (deterministic bytes, size limit).
//   - sign: secrets (redacted in every output) and Standard Webhooks signing with a rotation window.
//   - dial: the HTTP client that only connects to public addresses, checked at dial time.
//   - retry: the attempt schedule as pure functions over an injected time.
//   - deliver: one delivery attempt (Send) and the verification challenge (Verify).
//
// The domain owns subscriptions, the durable notification queue and delivery records; it calls these
// packages and maps deliver.VerifyError to WEBHOOK_VERIFICATION_FAILED or, for
// deliver.FailForbiddenTarget, FORBIDDEN_TARGET.
package webhook
