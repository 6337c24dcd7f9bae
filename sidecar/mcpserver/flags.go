package mcpserver

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// Flags are mneme mcp's command-line flags.
type Flags struct {
	Kind, Addr, Tenant, Tokens, NewToken string
}

// BindFlags binds mneme mcp's flags (defaults from MNEME_MCP_TENANT and
// MNEME_MCP_TOKENS).
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Kind, "transport", "stdio", "stdio, or http (streamable HTTP, bearer tokens per tenant)")
	fs.StringVar(&f.Addr, "addr", "127.0.0.1:8765", "listen address of the http transport")
	fs.StringVar(&f.Tenant, "tenant", os.Getenv("MNEME_MCP_TENANT"), "tenant of every stdio call (env MNEME_MCP_TENANT; empty: the default tenant)")
	fs.StringVar(&f.Tokens, "tokens", os.Getenv("MNEME_MCP_TOKENS"), `http: file of "tenant sha256-of-token" lines (env MNEME_MCP_TOKENS)`)
	fs.StringVar(&f.NewToken, "new-token", "", "print a new bearer token for this tenant and its tokens-file line, then exit")
	return f
}

// Transport checks the transport flags (ParseTransport).
func (f *Flags) Transport() (Transport, error) { return ParseTransport(f.Kind, f.Addr, f.Tokens) }

// PrintNewToken prints a new token for tenant and its tokens-file line.
func PrintNewToken(w io.Writer, tenant string) error {
	tok, line, err := NewToken(tenant)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "token (give it to the client, store it nowhere else): %s\nline for the tokens file: %s\n", tok, line)
	return err
}
