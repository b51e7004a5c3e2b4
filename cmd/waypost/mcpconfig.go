package main

import (
	"encoding/json"
	"errors"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newMCPConfigCmd() *cobra.Command {
	var url, token, name string
	cmd := &cobra.Command{
		Use:   "mcp-config",
		Short: "Print a ready MCP client configuration (URL and Authorization header) for a token",
		Long: `Print the configuration an MCP host needs to reach this Waypost server over Streamable HTTP:
the endpoint <url>/mcp and an Authorization header with a data-plane token. Paste it into your
MCP host's server list. The token is printed: treat the output as a secret.`,
		Example: `  waypost mcp-config --token "$WAYPOST_TOKEN" > waypost-mcp.json
  WAYPOST_URL=https://waypost.example.com waypost mcp-config --name work-mailbox`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				url = os.Getenv("WAYPOST_URL")
			}
			if url == "" {
				url = "http://127.0.0.1:8787"
			}
			if token == "" {
				token = os.Getenv("WAYPOST_TOKEN")
			}
			if token == "" {
				return usageError{errors.New("no token: pass --token or set WAYPOST_TOKEN (create one with 'waypost admin token create')")}
			}
			cfg := map[string]any{"mcpServers": map[string]any{name: map[string]any{
				"type":    "http",
				"url":     strings.TrimSuffix(url, "/") + "/mcp",
				"headers": map[string]string{"Authorization": "Bearer " + token},
			}}}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "server base URL (default $WAYPOST_URL or http://127.0.0.1:8787)")
	f.StringVar(&token, "token", "", "data-plane token (default $WAYPOST_TOKEN)")
	f.StringVar(&name, "name", "waypost", "server name in the configuration")
	return cmd
}
