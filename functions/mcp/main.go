// Command mcp is the Waypost MCP Lambda function: /mcp (api/mcpapi, every data-plane operation as an MCP
// tool over stateless Streamable HTTP with JSON responses) behind the API Gateway HTTP API. It never holds
// the admin secret. Configuration: functions/config (config.VarsFor("mcp")).
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/mcprole"
)

func main() { app.Main(mcprole.Spec()) }
