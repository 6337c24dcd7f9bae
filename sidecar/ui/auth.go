package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

const (
	tokenCookie = "mneme_ui_token"
	csrfCookie  = "mneme_ui_csrf"
	csrfField   = "csrf"
)

type csrfKey struct{}

// authenticate requires the token (when one is set) and gives every
// request its CSRF token: a random value in a cookie that each form
// repeats (double submit); a POST whose form does not repeat it, or that a
// browser says came from another site, is refused.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; script-src 'none'; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if s.token != "" {
			if q := r.URL.Query().Get("token"); q != "" {
				if !equal(q, s.token) {
					s.errorPage(w, r, http.StatusUnauthorized, "wrong token")
					return
				}
				// The cookie carries it from now on; the URL loses it, so it
				// stays out of the history and of shared links.
				// Lax: a shared link opened from elsewhere still carries it;
				// state changes need the CSRF token besides.
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
				u := *r.URL
				v := u.Query()
				v.Del("token")
				u.RawQuery = v.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
			if !s.tokenOK(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mneme ui"`)
				s.errorPage(w, r, http.StatusUnauthorized, "send the token (Authorization: Bearer ..., or open any page once with ?token=...)")
				return
			}
		}
		csrf := ""
		if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
			csrf = c.Value
		}
		if r.Method == http.MethodPost {
			if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
				s.errorPage(w, r, http.StatusForbidden, "a request from another site")
				return
			}
			if csrf == "" || !equal(r.PostFormValue(csrfField), csrf) {
				s.errorPage(w, r, http.StatusForbidden, "missing or wrong CSRF token (reload the page and try again)")
				return
			}
		} else if csrf == "" {
			csrf = newCSRF()
			http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), csrfKey{}, csrf)))
	})
}

func (s *Server) tokenOK(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") && equal(strings.TrimPrefix(h, "Bearer "), s.token) {
		return true
	}
	c, err := r.Cookie(tokenCookie)
	return err == nil && equal(c.Value, s.token)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func newCSRF() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

func csrfOf(r *http.Request) string {
	v, _ := r.Context().Value(csrfKey{}).(string)
	return v
}
