package ui

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mneme-memory/mneme/client"
	"github.com/mneme-memory/mneme/sidecar/fsrs"
)

// page is what every template gets: the layout's fields and the page's own
// data.
type page struct {
	Title   string
	Tenant  string   // the tenant chosen with ?tenant=, "" for the login's own
	Tenants []string // admins choose among them
	Admin   bool
	Jobs    bool // the login may read the job queue
	CSRF    string
	Now     time.Time
	Data    any
}

var funcs = template.FuncMap{
	"href": href,
	// Every time is shown in UTC, and says so (the layout's footer says
	// which clock: said or stored).
	"ts":   func(t any) string { return timeOf(t, "2006-01-02 15:04 UTC") },
	"day":  func(t any) string { return timeOf(t, "2006-01-02") },
	"list": func(v ...string) []string { return v },
	"urlq": url.QueryEscape,
	"cond": func(c bool, a, b string) string {
		if c {
			return a
		}
		return b
	},
	"add":   func(a, b int) int { return a + b },
	"f3":    func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"f5":    func(v float64) string { return fmt.Sprintf("%.5f", v) },
	"f32":   func(v float32) string { return fmt.Sprintf("%.2f", v) },
	"pct":   func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"mb":    func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) },
	"short": func(v fmt.Stringer) string { return v.String()[:8] },
	"str": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"rank": func(p *int) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprint(*p)
	},
	"clip": clip,
	"days": func(v float64) string {
		switch {
		case v >= 365:
			return fmt.Sprintf("%.1f years", v/365)
		case v >= 1:
			return fmt.Sprintf("%.1f days", v)
		}
		return fmt.Sprintf("%.1f hours", v*24)
	},
	"dur": func(d time.Duration) string {
		switch {
		case d >= 48*time.Hour:
			return fmt.Sprintf("%g days", math.Round(d.Hours()/24*10)/10)
		case d >= 2*time.Hour:
			return fmt.Sprintf("%g hours", math.Round(d.Hours()*10)/10)
		case d >= 2*time.Minute:
			return fmt.Sprintf("%g minutes", math.Round(d.Minutes()*10)/10)
		}
		return fmt.Sprintf("%g seconds", math.Round(d.Seconds()))
	},
	"gap": func(d time.Duration) string {
		switch {
		case d >= 24*time.Hour:
			return fmt.Sprintf("%.1f days later", d.Hours()/24)
		case d >= time.Hour:
			return fmt.Sprintf("%.1f hours later", d.Hours())
		}
		return fmt.Sprintf("%.0f minutes later", d.Minutes())
	},
}

// clip cuts s to n characters, at a word boundary when one is near.
func clip(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	cut := n
	for i := n; i > n*3/4; i-- {
		if r[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(r[:cut]), " ") + "…"
}

// timeOf formats a time or *time.Time in UTC; "" for nil.
func timeOf(t any, layout string) string {
	var v time.Time
	switch x := t.(type) {
	case time.Time:
		v = x
	case *time.Time:
		if x == nil {
			return ""
		}
		v = *x
	default:
		return ""
	}
	return v.UTC().Format(layout)
}

// href is a link that keeps the chosen tenant: href .Tenant "/memories/" .ID.
func href(tenant string, parts ...any) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(fmt.Sprint(p))
	}
	u := b.String()
	if tenant == "" {
		return u
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "tenant=" + url.QueryEscape(tenant)
}

func parseTemplates() (map[string]*template.Template, error) {
	names := []string{"index", "conversation", "memory", "memories", "tombstone", "confirm", "search", "jobs", "error", "usage"}
	out := make(map[string]*template.Template, len(names))
	for _, n := range names {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: parse template %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}

// render writes a page; a template error becomes a 500 (nothing written
// before it: the page is rendered into a buffer first).
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Tenant = tenantOf(r)
	p.Admin, p.Jobs = s.admin, s.jobsReadable
	p.CSRF = csrfOf(r)
	if p.Now.IsZero() {
		p.Now = s.now()
	}
	if s.admin && p.Tenants == nil {
		p.Tenants = s.tenants(r)
	}
	var buf bytes.Buffer
	if err := s.tmpl[name].Execute(&buf, p); err != nil {
		s.log.Error("ui: render", "page", name, "err", err)
		http.Error(w, "500 internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail renders the error page with the status the error maps to and what
// the database said (its message and hint: the caller's own data).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	msg := err.Error()
	var ce *client.Error
	var pe *pgconn.PgError
	if errors.As(err, &ce) {
		msg = ce.Message + " (SQLSTATE " + ce.SQLState + ")"
		if ce.Hint != "" {
			msg += "; hint: " + ce.Hint
		}
	} else if errors.As(err, &pe) {
		msg = pe.Message + " (SQLSTATE " + pe.Code + ")"
		if pe.Hint != "" {
			msg += "; hint: " + pe.Hint
		}
	}
	if status >= 500 {
		s.log.Error("ui: request failed", "path", r.URL.Path, "err", err)
	}
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Data: map[string]any{"Status": status, "Message": msg}})
}

// errorPage renders the error page without reading the database (the
// refusals of authenticate, the mux's 404 and 405).
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Tenants: []string{}, Data: map[string]any{"Status": status, "Message": msg}})
}

func retrievability(pinned bool, stability float64, last, at time.Time) float64 {
	if pinned {
		return 1
	}
	return fsrs.Retrievability(stability, last, at)
}
