// A webhook receiver that checks every request with the official Standard Webhooks library (npm
// "standardwebhooks"), an implementation independent of Waypost's Go signer. The end-to-end tests
// (e2e/webhooks_test.go) run it against the real `waypost serve --allow-loopback-webhooks`.
//
//   node receiver.mjs --secret whsec_… [--secret whsec_…] [--port N]
//
// It listens on 127.0.0.1 (port N, default any free port) and writes one JSON line per event to stdout:
//
//   {"kind":"listening","url":"http://127.0.0.1:<port>/hook"}
//   {"kind":"challenge","webhook_id":…,"verified_with":[0],"status":200}
//   {"kind":"event","webhook_id":…,"verified_with":[0,1],"body":"<raw body>","status":204}
//   {"kind":"rejected","webhook_id":…,"error":"…","status":401}
//
// verified_with lists the indexes of the --secret values whose signature verified (a request is accepted
// when at least one does: during a rotation both the old and the new secret verify). body is the raw body
// exactly as received, from which nothing is re-serialized. Verification challenges are answered with
// {"challenge": <the challenge>} after the signature verified.
//
// How events are answered is controlled by lines on stdin:
//   mode ok     answer 204 (the default)
//   mode fail   answer 503
//   mode gone   answer 410
//   mode hold   never answer: hold the request until the client goes away ("status":"held")
import http from "node:http";
import readline from "node:readline";
import { Webhook } from "standardwebhooks";

const secrets = [];
let port = 0;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--secret" && i + 1 < args.length) secrets.push(args[++i]);
  else if (args[i] === "--port" && i + 1 < args.length) port = Number(args[++i]);
  else {
    console.error(`receiver: unknown argument ${args[i]}`);
    process.exit(2);
  }
}
if (secrets.length === 0) {
  console.error("usage: node receiver.mjs --secret whsec_… [--secret whsec_…] [--port N]");
  process.exit(2);
}
const verifiers = secrets.map((s) => new Webhook(s));

let mode = "ok";
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const [cmd, arg] = line.trim().split(/\s+/);
  if (cmd === "mode" && ["ok", "fail", "gone", "hold"].includes(arg)) {
    mode = arg;
    emit({ kind: "mode", mode });
  } else if (cmd) {
    console.error(`receiver: unknown command ${line}`);
  }
});

function emit(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const headers = {
      "webhook-id": req.headers["webhook-id"] ?? "",
      "webhook-timestamp": req.headers["webhook-timestamp"] ?? "",
      "webhook-signature": req.headers["webhook-signature"] ?? "",
    };
    const verifiedWith = [];
    let lastError = "";
    verifiers.forEach((wh, i) => {
      try {
        wh.verify(body, headers); // raw bytes; checks the timestamp tolerance too
        verifiedWith.push(i);
      } catch (err) {
        lastError = String(err?.message ?? err);
      }
    });
    const id = headers["webhook-id"];
    if (verifiedWith.length === 0) {
      res.writeHead(401).end();
      emit({ kind: "rejected", webhook_id: id, error: lastError, status: 401 });
      return;
    }
    // Only a verified body is parsed.
    let msg;
    try {
      msg = JSON.parse(body.toString("utf8"));
    } catch {
      res.writeHead(400).end();
      emit({ kind: "rejected", webhook_id: id, error: "body is not JSON", status: 400 });
      return;
    }
    if (msg?.type === "verification") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ challenge: msg.challenge }));
      emit({ kind: "challenge", webhook_id: id, verified_with: verifiedWith, status: 200 });
      return;
    }
    const record = { kind: "event", webhook_id: id, verified_with: verifiedWith, body: body.toString("utf8") };
    switch (mode) {
      case "hold":
        emit({ ...record, status: "held" });
        return; // never answered; the client times out or goes away
      case "fail":
        res.writeHead(503).end();
        emit({ ...record, status: 503 });
        return;
      case "gone":
        res.writeHead(410).end();
        emit({ ...record, status: 410 });
        return;
      default:
        res.writeHead(204).end();
        emit({ ...record, status: 204 });
    }
  });
});

server.listen(port, "127.0.0.1", () => {
  emit({ kind: "listening", url: `http://127.0.0.1:${server.address().port}/hook` });
});
