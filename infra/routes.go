package main

// Function names: one Lambda function each, built by scripts/build-functions into
// <FunctionsDir>/<name>/bootstrap from functions/<name>/main.go.
const (
	FnMailbox    = "mailbox"
	FnMemory     = "memory"
	FnBlobs      = "blobs"
	FnAdmin      = "admin"
	FnMCP        = "mcp"
	FnDispatcher = "dispatcher"
	FnDeliverer  = "deliverer"
	FnSweeper    = "sweeper"
)

// TargetChannel is the route target of the channel service (Fargate, through the VPC link).
const TargetChannel = "channel"

// Functions lists every function the stack deploys, in a stable order.
func Functions() []string {
	return []string{FnMailbox, FnMemory, FnBlobs, FnAdmin, FnMCP, FnDispatcher, FnDeliverer, FnSweeper}
}

// HTTPFunctions are the functions behind the HTTP API (API Gateway payload format 2.0).
func HTTPFunctions() []string { return []string{FnMailbox, FnMemory, FnBlobs, FnAdmin, FnMCP} }

// Route is one route of the HTTP API and where it goes.
type Route struct {
	Method string // GET, POST, PUT, PATCH, DELETE or ANY
	Path   string // API Gateway path, {param} and {proxy+} as in the route key
	Target string // a function name or TargetChannel
}

// Key is the API Gateway route key, "METHOD /path".
func (r Route) Key() string { return r.Method + " " + r.Path }

// Routes is the route table of the HTTP API: SUPPLEMENT §11.1 (data plane), §11.3 (control plane), the
// webhook subscription calls, MCP and the channel service. api/httpapi serves the same method and path
// patterns (a test parses it and compares). The API has no $default route: a request that matches no route
// gets API Gateway's own 404 Not Found without invoking any function (issue 17: edge protection).
func Routes() []Route {
	const sp = "/admin/v0/spaces/{space_id}"
	return []Route{
		// mailbox: describe, status, messages, inbox, schemas, webhook subscriptions.
		{"GET", "/v0/describe", FnMailbox},
		{"GET", "/v0/status", FnMailbox},
		{"POST", "/v0/messages", FnMailbox},
		{"GET", "/v0/messages/{message_id}", FnMailbox},
		{"POST", "/v0/inbox/read", FnMailbox},
		{"POST", "/v0/inbox/ack", FnMailbox},
		{"GET", "/v0/schemas", FnMailbox},
		{"GET", "/v0/schemas/{name}", FnMailbox},
		{"GET", "/v0/subscriptions", FnMailbox},
		{"POST", "/v0/subscriptions", FnMailbox},
		{"POST", "/v0/subscriptions/{subscription_id}/stop", FnMailbox},
		// blobs.
		{"POST", "/v0/blobs", FnBlobs},
		{"PUT", "/v0/uploads/{upload_id}/content", FnBlobs},
		{"POST", "/v0/blobs/commit", FnBlobs},
		{"GET", "/v0/blobs/{blob_id}", FnBlobs},
		{"GET", "/v0/blobs/{blob_id}/content", FnBlobs},
		// memory.
		{"POST", "/v0/collections/{collection_id}/revisions", FnMemory},
		{"GET", "/v0/collections/{collection_id}/items", FnMemory},
		{"GET", "/v0/collections/{collection_id}/export", FnMemory},
		// admin (control plane).
		{"POST", "/admin/v0/spaces", FnAdmin},
		{"GET", sp, FnAdmin},
		{"PATCH", sp, FnAdmin},
		{"POST", sp + "/actors", FnAdmin},
		{"POST", sp + "/actors/{actor_id}/revoke", FnAdmin},
		{"POST", sp + "/consumers", FnAdmin},
		{"PATCH", sp + "/consumers/{consumer_id}", FnAdmin},
		{"POST", sp + "/collections", FnAdmin},
		{"POST", sp + "/grants", FnAdmin},
		{"POST", sp + "/grants/{grant_id}/revoke", FnAdmin},
		{"POST", sp + "/tokens", FnAdmin},
		{"POST", sp + "/tokens/{token_id}/revoke", FnAdmin},
		{"POST", sp + "/tokens/{token_id}/rotate", FnAdmin},
		{"GET", sp + "/deliveries", FnAdmin},
		{"POST", sp + "/deliveries/{delivery_id}/redeliver", FnAdmin},
		// MCP (Streamable HTTP: POST, and GET/DELETE answered by the server itself).
		{"ANY", "/mcp", FnMCP},
		// channel service: the feed.wait long poll, and the internal announce API the functions call
		// (bearer WAYPOST_CHANNEL_SECRET; the functions run outside the VPC and reach it through this API).
		{"GET", "/v0/feed/wait", TargetChannel},
		{"ANY", "/internal/v0/{proxy+}", TargetChannel},
	}
}
