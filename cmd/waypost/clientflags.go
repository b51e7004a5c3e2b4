package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/waypost/waypost/client"
)

// Environment variables read by the client commands.
const (
	envURL         = "WAYPOST_URL"
	envToken       = "WAYPOST_TOKEN"
	envAdminSecret = "WAYPOST_ADMIN_SECRET"
	envSpace       = "WAYPOST_SPACE"
	defaultURL     = "http://127.0.0.1:8787"
	// defaultSecretFile is where `waypost serve` generates the admin secret with its default --data.
	defaultSecretFile = "waypost-data/admin-secret"
)

// usageError is a mistake on the command line: wrong arguments, flags or missing configuration. The
// process exits with status 2 for it (see exitCode).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCode is the process exit status for an error returned by a command: 0 for nil, 2 for a usage error
// (bad arguments, flags, or missing configuration), 1 for anything else (a service error prints as
// "CODE: message").
func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}

// withUsageErrors makes flag parsing errors of cmd and its subcommands usage errors.
func withUsageErrors(cmd *cobra.Command) *cobra.Command {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return cmd
}

// exactArgs and minArgs are cobra argument checks that report usage errors.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}

func minArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("expected %s", names)
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// conn holds the connection flags shared by the client commands.
type conn struct {
	url         string
	token       string
	adminSecret string
	json        bool
	quiet       bool
	timeout     time.Duration
}

// addDataFlags registers the flags of a data-plane command.
func (c *conn) addDataFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.url, "url", "", "service base URL (default $"+envURL+", else "+defaultURL+")")
	fs.StringVar(&c.token, "token", "", "bearer token (default $"+envToken+"; prefer the variable: flags show in ps)")
	c.addOutputFlags(fs)
}

// addAdminFlags registers the flags of the control-plane commands.
func (c *conn) addAdminFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.url, "url", "", "service base URL (default $"+envURL+", else "+defaultURL+")")
	fs.StringVar(&c.adminSecret, "admin-secret", "", "instance admin secret (default $"+envAdminSecret+", else ./"+defaultSecretFile+")")
	c.addOutputFlags(fs)
}

func (c *conn) addOutputFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.json, "json", false, "print the result (the envelope's data) as JSON")
	fs.DurationVar(&c.timeout, "timeout", client.DefaultTimeout, "timeout of each HTTP request")
}

func (c *conn) baseURL() string {
	if c.url != "" {
		return c.url
	}
	if u := os.Getenv(envURL); u != "" {
		return u
	}
	return defaultURL
}

// data returns a data-plane client, or a usage error when no token is configured.
func (c *conn) data(opts ...client.Option) (*client.Client, error) {
	tok := c.token
	if tok == "" {
		tok = os.Getenv(envToken)
	}
	if tok == "" {
		return nil, usagef("no token: pass --token or set %s (create one with 'waypost admin token create')", envToken)
	}
	return client.New(c.baseURL(), tok, append([]client.Option{client.WithTimeout(c.timeout)}, opts...)...), nil
}

// admin returns a control-plane client. The secret comes from --admin-secret, WAYPOST_ADMIN_SECRET, or the
// file the embedded server generates in ./waypost-data (saying so on stderr).
func (c *conn) admin(cmd *cobra.Command) (*client.Admin, error) {
	secret := c.adminSecret
	if secret == "" {
		secret = os.Getenv(envAdminSecret)
	}
	if secret == "" {
		raw, err := os.ReadFile(defaultSecretFile)
		switch {
		case err == nil:
			secret = strings.TrimSpace(string(raw))
			abs, aerr := filepath.Abs(defaultSecretFile)
			if aerr != nil {
				abs = defaultSecretFile
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "using the admin secret in %s (%s is not set)\n", abs, envAdminSecret)
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("reading %s: %w", defaultSecretFile, err)
		}
	}
	if secret == "" {
		return nil, usagef("no admin secret: pass --admin-secret or set %s (the embedded server writes it to <data>/admin-secret)", envAdminSecret)
	}
	return client.NewAdmin(c.baseURL(), secret, client.WithTimeout(c.timeout)), nil
}

// show prints v as JSON with --json, else as text writes it for a person.
func (c *conn) show(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	w := cmd.OutOrStdout()
	if c.json {
		return printJSON(w, v)
	}
	return text(w)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// fields prints aligned "name: value" lines, skipping empty values.
func fields(w io.Writer, kv ...string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], kv[i+1])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// orNone shows an optional string.
func orNone(s *string) string {
	if s == nil || *s == "" {
		return "(none)"
	}
	return *s
}

// stringOrEnv returns the flag value, else the environment variable.
func stringOrEnv(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}

// ids joins a list for display.
func ids[T ~string](list []T) string {
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i] = string(v)
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}
