package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// memoriesData is the memories view: "what does the agent remember about
// X?", filtered, sorted and paged by mneme.find_memories.
type memoriesData struct {
	Filter   Filter
	Rows     []Found
	Total    int64
	Pages    int
	Labels   []string
	Statuses []string
	Sorts    [][2]string
	From, To int
}

var memorySorts = [][2]string{
	{"created", "newest stored first"}, {"created_asc", "oldest stored first"},
	{"said", "newest said first"}, {"said_asc", "oldest said first"},
	{"r", "most faded first (R low)"}, {"r_desc", "R high first"},
	{"stability", "most stable first"}, {"reviews", "most reviewed first"},
}

func (s *Server) pageMemories(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := Filter{Conversation: strings.TrimSpace(q.Get("conversation")), Q: strings.TrimSpace(q.Get("q")),
		Label: q.Get("label"), Status: q.Get("status"), Kind: q.Get("kind"), Pinned: q.Get("pinned"),
		RMin: strings.TrimSpace(q.Get("r_min")), RMax: strings.TrimSpace(q.Get("r_max")), Sort: q.Get("sort"), Page: 1}
	if f.Sort == "" {
		f.Sort = "created"
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: page %q is not a number", errBadRequest, p))
			return
		}
		f.Page = n
	}
	if f.Conversation != "" {
		if _, err := uuid.Parse(f.Conversation); err != nil {
			s.fail(w, r, fmt.Errorf("%w: conversation %q is not a UUID", errBadRequest, f.Conversation))
			return
		}
	}
	for name, v := range map[string]string{"r_min": f.RMin, "r_max": f.RMax} {
		if v == "" {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err != nil || x < 0 || x > 1 {
			s.fail(w, r, fmt.Errorf("%w: %s %q is not a retrievability between 0 and 1", errBadRequest, name, v))
			return
		}
	}
	if f.Pinned != "" && f.Pinned != "yes" && f.Pinned != "no" {
		s.fail(w, r, fmt.Errorf("%w: pinned %q is not yes or no", errBadRequest, f.Pinned))
		return
	}
	d := memoriesData{Filter: f, Statuses: []string{"active", "superseded", "invalidated", "inactive", "merged"}, Sorts: memorySorts}
	ctx := r.Context()
	err := s.inTx(ctx, r, true, func(tx pgx.Tx) error {
		var err error
		if d.Labels, err = readLabels(ctx, tx); err != nil {
			return err
		}
		d.Rows, d.Total, err = readFound(ctx, tx, f, s.now())
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d.Pages = int((d.Total + pageSize - 1) / pageSize)
	if len(d.Rows) > 0 {
		d.From = (f.Page-1)*pageSize + 1
		d.To = d.From + len(d.Rows) - 1
	}
	title := "Memories"
	if f.Conversation != "" {
		title = "Memories of conversation " + f.Conversation[:8]
	}
	s.render(w, r, http.StatusOK, "memories", page{Title: title, Data: d})
}

// With is the view's URL with one parameter changed (a sort header, a page
// link), the others kept; the page goes back to 1 unless it is the one set.
func (f Filter) With(tenant, key, value string) string {
	v := url.Values{}
	set := func(k, x string) {
		if x != "" {
			v.Set(k, x)
		}
	}
	set("conversation", f.Conversation)
	set("q", f.Q)
	set("label", f.Label)
	set("status", f.Status)
	set("kind", f.Kind)
	set("pinned", f.Pinned)
	set("r_min", f.RMin)
	set("r_max", f.RMax)
	set("sort", f.Sort)
	v.Del(key)
	set(key, value)
	if tenant != "" {
		v.Set("tenant", tenant)
	}
	return "/memories?" + v.Encode()
}
