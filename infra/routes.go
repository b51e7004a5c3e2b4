package main

import "github.com/waypost/waypost/api/ops"

// Function names: one Lambda function each, built by scripts/build-functions into
// <FunctionsDir>/<name>/bootstrap from functions/<name>/main.go.
const (
	FnMailbox    = ops.FnMailbox
	FnMemory     = ops.FnMemory
	FnBlobs      = ops.FnBlobs
	FnAdmin      = ops.FnAdmin
	FnMCP        = "mcp"
	FnDispatcher = "dispatcher"
	FnDeliverer  = "deliverer"
	FnSweeper    = "sweeper"
)

// TargetChannel is the route target of the channel service (Fargate, through the VPC link).
const TargetChannel = ops.FnChannel

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

// Routes is the route table of the HTTP API: one route per operation of api/ops (SUPPLEMENT §11.1 data
// plane, §11.3 control plane, the webhook subscription calls), to the function its descriptor names, which
// is exactly what api/httpapi serves; then MCP and the channel service's internal API. The API has no
// $default route: a request that matches no route gets API Gateway's own 404 Not Found without invoking any
// function (issue 17: edge protection).
func Routes() []Route {
	var routes []Route
	for _, o := range ops.List() {
		if o.Embedded { // served by `waypost serve` alone
			continue
		}
		routes = append(routes, Route{o.Method, o.Path, o.Function}) // net/http wildcards are API Gateway's {param}
	}
	return append(routes,
		// MCP (Streamable HTTP: POST, and GET/DELETE answered by the server itself).
		Route{"ANY", "/mcp", FnMCP},
		// channel service: the internal announce API the functions call (bearer WAYPOST_CHANNEL_SECRET; the
		// functions run outside the VPC and reach it through this API).
		Route{"ANY", "/internal/v0/{proxy+}", TargetChannel})
}
