// Package interop holds tests that drive a running Waypost server with third-party clients this project
// did not write (the official TypeScript MCP SDK client from npm). scripts/test installs them with npm ci.
package interop
