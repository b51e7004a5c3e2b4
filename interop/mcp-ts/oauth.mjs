// Drives Waypost's OAuth flow with the official TypeScript MCP SDK's client and its OAuth support, as an MCP
// host that connects only through OAuth does: the 401 from /mcp, protected-resource and authorization-server
// discovery, dynamic client registration, PKCE, the person at the consent page (the Go test drives a real
// browser there: this script prints the authorization URL and waits for the redirect on its own loopback
// listener), the code exchange, tool calls with the issued token, a refresh, and the refusal once the owner
// revoked the client.
//
// Every step prints one JSON line on stdout: {"step": ..., ...}. Lines on stdin are the Go test's answers
// ("revoked" once it revoked the client). Environment: WAYPOST_URL (the server), WAYPOST_ACTOR_A (a
// recipient), WAYPOST_REQUEST_ID (the request_id of the send).
import http from 'node:http';
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  UnauthorizedError,
  refreshAuthorization,
  discoverAuthorizationServerMetadata,
} from '@modelcontextprotocol/sdk/client/auth.js';

const base = process.env.WAYPOST_URL;
const actorA = process.env.WAYPOST_ACTOR_A;
const requestID = process.env.WAYPOST_REQUEST_ID;
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const fail = (msg) => { out({ step: 'error', message: String(msg) }); process.exit(1); };

const stdin = readline.createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();
async function expectLine(want) {
  const { value, done } = await lines.next();
  if (done || value.trim() !== want) fail(`expected "${want}" on stdin, got ${done ? 'end of input' : JSON.stringify(value)}`);
}

// The loopback redirect target: resolves with the query of the first /callback request.
let resolveCallback;
const callback = new Promise((r) => { resolveCallback = r; });
const listener = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  if (u.pathname !== '/callback') { res.writeHead(404).end(); return; }
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': "default-src 'none'; img-src data:" });
  res.end('<!doctype html><title>Connected</title><link rel="icon" href="data:,"><p id="done">You can close this window.</p>');
  resolveCallback(u.searchParams);
});
await new Promise((r) => listener.listen(0, '127.0.0.1', r));
const redirectUrl = `http://127.0.0.1:${listener.address().port}/callback`;

// An in-memory OAuthClientProvider, as a host keeps one per server. It defines no state(): the server must
// not demand one (PKCE binds the code to this client).
class Provider {
  constructor() { this.info = undefined; this.tok = undefined; this.verifier = undefined; }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return {
      client_name: 'Waypost interop host',
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; out({ step: 'registered', client_id: info.client_id }); }
  tokens() { return this.tok; }
  saveTokens(t) { this.tok = t; }
  redirectToAuthorization(url) { out({ step: 'authorize', url: url.toString() }); }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

const mcpURL = new URL(base + '/mcp');
const provider = new Provider();
const connect = async (transport) => {
  const client = new Client({ name: 'waypost-oauth-interop', version: '1.0.0' });
  await client.connect(transport);
  return client;
};
const structured = (r) => r.structuredContent ?? JSON.parse(r.content?.[0]?.text ?? 'null');

// 1. Unauthorized: the SDK discovers, registers and sends the person to the consent page.
try {
  await connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider }));
  fail('connected without authorization');
} catch (e) {
  if (!(e instanceof UnauthorizedError)) fail(`first connect: ${e}`);
}
const query = await callback;
const metadata = await discoverAuthorizationServerMetadata(new URL(base));
if (query.get('error')) fail(`authorization refused: ${query.get('error')} ${query.get('error_description')}`);
out({ step: 'callback', iss: query.get('iss'), issuer: metadata.issuer, has_code: !!query.get('code') });
if (query.get('iss') !== metadata.issuer) fail(`iss ${query.get('iss')} is not the issuer ${metadata.issuer} (RFC 9207)`);

// 2. The code exchange, then the tools with the issued token.
const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
await transport.finishAuth(query.get('code'));
out({ step: 'tokens', token_type: provider.tok.token_type, scope: provider.tok.scope,
  has_refresh: !!provider.tok.refresh_token, expires_in: provider.tok.expires_in, access_prefix: provider.tok.access_token.slice(0, 4) });
let client = await connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider }));
const tools = await client.listTools();
out({ step: 'tools/list', names: tools.tools.map((t) => t.name) });
const me = structured(await client.callTool({ name: 'waypost_describe', arguments: {} }))?.data;
out({ step: 'waypost_describe', actor_id: me?.actor_id, consumer_id: me?.consumer_id, scopes: me?.scopes, oauth: me?.capabilities?.oauth });
const sent = await client.callTool({ name: 'waypost_send', arguments: {
  request_id: requestID, recipient_ids: [actorA], subject: 'from an OAuth host', body: { text: 'hello over OAuth' } } });
out({ step: 'waypost_send', isError: !!sent.isError, structured: structured(sent) });
const inbox = await client.callTool({ name: 'waypost_inbox', arguments: { consumer_id: me.consumer_id, cursor: null, limit: 50 } });
const page = structured(inbox);
out({ step: 'waypost_inbox', isError: !!inbox.isError, structured: page });
const items = page?.data?.items ?? [];
if (items.length === 0) fail('the inbox is empty: the Go test sent a message first');
const acked = await client.callTool({ name: 'waypost_ack', arguments: {
  request_id: requestID + '-ack', consumer_id: me.consumer_id, checkpoint_cursor: page.data.next_cursor,
  items: items.map((it) => ({ item_id: it.item_id, stage: 'processed' })) } });
out({ step: 'waypost_ack', isError: !!acked.isError, structured: structured(acked) });
await client.close();

// 3. A refresh: a new access token (and a rotated refresh token) that works.
const before = provider.tok;
const refreshed = await refreshAuthorization(new URL(metadata.issuer), {
  metadata, clientInformation: provider.info, refreshToken: before.refresh_token, resource: mcpURL });
provider.saveTokens(refreshed);
client = await connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider }));
const desc = await client.callTool({ name: 'waypost_describe', arguments: {} });
out({ step: 'refresh', rotated: refreshed.refresh_token !== before.refresh_token,
  new_access: refreshed.access_token !== before.access_token, describe_ok: !desc.isError,
  actor_id: structured(desc)?.data?.actor_id, oauth: structured(desc)?.data?.capabilities?.oauth });
await client.close();

// 4. The owner revokes the client: its token and its refresh token are refused.
out({ step: 'await-revoke' });
await expectLine('revoked');
let refused = false;
try {
  const c = await connect(new StreamableHTTPClientTransport(mcpURL, {
    requestInit: { headers: { Authorization: `Bearer ${provider.tok.access_token}` } } }));
  const r = await c.callTool({ name: 'waypost_describe', arguments: {} });
  out({ step: 'revoked-access', error: '', answered: r });
} catch (e) {
  refused = e.code === 401 || /UNAUTHENTICATED|\b401\b/.test(String(e));
  out({ step: 'revoked-access', error: String(e).slice(0, 200) });
}
let refreshError = '';
try {
  await refreshAuthorization(new URL(metadata.issuer), {
    metadata, clientInformation: provider.info, refreshToken: provider.tok.refresh_token, resource: mcpURL });
} catch (e) {
  refreshError = e.errorCode ?? e.constructor?.errorCode ?? String(e);
}
out({ step: 'revoked', access_refused: refused, refresh_error: refreshError });
listener.close();
stdin.close();
out({ step: 'done' });
