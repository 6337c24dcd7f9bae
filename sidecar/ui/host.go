package ui

import (
	"net"
	"net/http"
	"strings"
)

// hostCheck is the Host names a request may name: the loopback names,
// and the host of the configured address. A browser sends the name it
// resolved, so a page of evil.example whose name an attacker re-points to
// 127.0.0.1 (DNS rebinding) sends Host: evil.example and is refused,
// though it is the same origin to the browser.
type hostCheck struct {
	any  bool   // listening on every interface (a token is required there)
	name string // the configured host, lower case; "" when loopback
}

func newHostCheck(addr string) hostCheck {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return hostCheck{any: addr != ""}
	}
	return hostCheck{name: host}
}

func (h hostCheck) ok(hostport string) bool {
	if h.any {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport // no port
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	return isLoopback(host) || host == h.name
}

// checkHost refuses a request whose Host is not a name the server is
// served as, before anything else (the token and the pages).
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.ok(r.Host) {
			http.Error(w, "421 misdirected request: this server is not served as host "+strings.ToValidUTF8(r.Host, "?")+" (mneme ui accepts loopback names and its --addr)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
