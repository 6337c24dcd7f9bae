package mcpserver

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tokens maps SHA-256 hashes of bearer tokens to tenants. The file holds
// one "tenant sha256-hex" pair per line (# comments); a plain token is
// never stored or logged.
type Tokens map[string]string

var tokenLine = regexp.MustCompile(`^([a-z0-9][a-z0-9_-]{0,62})\s+([0-9a-f]{64})$`)

// LoadTokens reads a tokens file.
func LoadTokens(path string) (Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	out := Tokens{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := tokenLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("tokens file %s line %d: want \"tenant sha256-hex-of-token\" (mneme mcp --new-token TENANT prints one)", path, n)
		}
		out[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tokens file %s holds no token", path)
	}
	return out, nil
}

// Tenants are the tenants the tokens act for, sorted, each once.
func (t Tokens) Tenants() []string {
	var out []string
	for _, tenant := range t {
		if !slices.Contains(out, tenant) {
			out = append(out, tenant)
		}
	}
	slices.Sort(out)
	return out
}

// NewToken returns a random bearer token and its tokens-file line.
func NewToken(tenant string) (token, line string, err error) {
	if !tokenLine.MatchString(tenant + " " + strings.Repeat("0", 64)) {
		return "", "", fmt.Errorf("tenant %q: want 1 to 63 lower-case letters, digits, _ or -", tenant)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = "mneme_" + hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	return token, tenant + " " + hex.EncodeToString(sum[:]), nil
}

// verify is the bearer-token check: the token's hash names its tenant.
func (t Tokens) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	h := hex.EncodeToString(sum[:])
	for hash, tenant := range t {
		if subtle.ConstantTimeCompare([]byte(hash), []byte(h)) == 1 {
			return &auth.TokenInfo{UserID: tenant}, nil
		}
	}
	return nil, auth.ErrInvalidToken
}

// HTTPHandler serves srv over streamable HTTP behind bearer tokens: each
// request runs as its token's tenant; no token or an unknown one is 401.
func HTTPHandler(srv *mcp.Server, tokens Tokens) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return auth.RequireBearerToken(tokens.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}
