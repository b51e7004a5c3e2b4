// Verifies one Waypost webhook request with the official Standard Webhooks library (npm "standardwebhooks"),
// an implementation independent of the Go signer.
//
//   node verify.mjs <secret> <webhook-id> <webhook-timestamp> <webhook-signature> < raw-body
//
// The raw body is read from stdin as bytes and given to the library unparsed. Prints one JSON line:
// {"ok":true,"type":...} and exits 0 when a signature matches; {"ok":false,"error":...} and exits 1 when
// verification fails; exits 2 on a usage error.
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const [secret, id, timestamp, signature] = process.argv.slice(2);
if (!secret || !id || !timestamp || !signature) {
  console.error("usage: node verify.mjs <secret> <webhook-id> <webhook-timestamp> <webhook-signature> < body");
  process.exit(2);
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const body = Buffer.concat(chunks);

try {
  const payload = new Webhook(secret).verify(body, {
    "webhook-id": id,
    "webhook-timestamp": timestamp,
    "webhook-signature": signature,
  });
  console.log(JSON.stringify({ ok: true, type: payload?.type ?? null, id: payload?.id ?? null }));
} catch (err) {
  if (err instanceof WebhookVerificationError) {
    console.log(JSON.stringify({ ok: false, error: err.message }));
    process.exit(1);
  }
  console.error(String(err?.stack ?? err));
  process.exit(2);
}
