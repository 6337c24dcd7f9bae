// Package lifecycle owns `mneme eval lifecycle`: a deterministic year of
// simulated use of one conversation's memory, through the real SQL
// lifecycle. Memories of every label arrive every week; some are
// retrieved, used and reviewed "good", some judged noise ("again"), with
// go-fsrs computing every next state and mneme.apply_review writing it;
// the cleanup policy (mneme.cleanup, evaluated at the simulated time) runs
// every cleanup_interval. The result is, per label and day, the share of
// the memories created so far that are active, inactive or purged, with
// purging off (the default) and on.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/fsrs"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// Labels in report order (project_garden stands for project_*).
var Labels = []string{"trivial", "temporary", "general", "project_garden", "user_profile", "important"}

// usage is how a label's memories are used: the chance per day that an
// active one is retrieved (while fresh: the first freshDays, and later),
// and the chance a retrieval was useful (rated good; else "again").
type usage struct {
	FreshDays       int
	RetrieveFresh   float64
	RetrieveLater   float64
	GoodFresh       float64
	GoodLater       float64
	PinnedEvery     int // every n-th memory of the label is pinned (0: none)
	PerWeek         int
	SurpriseMaximum float64
}

// Workload is the usage per label: small talk is rarely retrieved and then
// useless, a plan is useful while it lasts, facts about the user and
// decisions keep being useful.
var Workload = map[string]usage{
	"trivial":        {FreshDays: 7, RetrieveFresh: 0.02, RetrieveLater: 0.01, GoodFresh: 0.3, GoodLater: 0.1, PerWeek: 4, SurpriseMaximum: 0.2},
	"temporary":      {FreshDays: 14, RetrieveFresh: 0.10, RetrieveLater: 0.01, GoodFresh: 0.9, GoodLater: 0.1, PerWeek: 4, SurpriseMaximum: 0.5},
	"general":        {FreshDays: 30, RetrieveFresh: 0.03, RetrieveLater: 0.01, GoodFresh: 0.6, GoodLater: 0.5, PinnedEvery: 25, PerWeek: 4, SurpriseMaximum: 0.8},
	"project_garden": {FreshDays: 60, RetrieveFresh: 0.05, RetrieveLater: 0.01, GoodFresh: 0.8, GoodLater: 0.4, PerWeek: 4, SurpriseMaximum: 0.8},
	"user_profile":   {FreshDays: 30, RetrieveFresh: 0.03, RetrieveLater: 0.02, GoodFresh: 0.9, GoodLater: 0.9, PinnedEvery: 10, PerWeek: 4, SurpriseMaximum: 0.8},
	"important":      {FreshDays: 30, RetrieveFresh: 0.05, RetrieveLater: 0.02, GoodFresh: 0.9, GoodLater: 0.8, PerWeek: 4, SurpriseMaximum: 0.8},
}

// Options size the simulation.
type Options struct {
	Days           int     // default 365
	PurgeAfterDays float64 // purge_after_days in the purge-on scenario, default 60
}

// Share is one label's state on one day, as shares of the memories of that
// label created so far.
type Share struct {
	Created  int     `json:"created"`
	Active   float64 `json:"active"`
	Inactive float64 `json:"inactive"`
	Purged   float64 `json:"purged"`
}

// Day is one simulated day's shares per label.
type Day struct {
	Day    int              `json:"day"`
	Labels map[string]Share `json:"labels"`
}

// Scenario is one run: purge off or on.
type Scenario struct {
	Name           string   `json:"name"`
	PurgeAfterDays *float64 `json:"purge_after_days"`
	Days           []Day    `json:"days"`
	Reviews        int      `json:"reviews"`
	Again          int      `json:"again"`
	Cleanups       int      `json:"cleanups"`
	// Left: pinned or important memories that were ever inactive or purged
	// (the rule says none).
	PinnedOrImportantLeft int `json:"pinned_or_important_left"`
	// PurgedEarly: memories purged less than purge_after_days after they
	// became inactive (the rule says none).
	PurgedEarly int `json:"purged_early"`
	Purged      int `json:"purged"`
}

// Result is both scenarios.
type Result struct {
	Days           int                `json:"days"`
	CleanupEvery   string             `json:"cleanup_interval"`
	InactiveBelowR float64            `json:"inactive_below_r"`
	InitialDays    map[string]float64 `json:"initial_stability_days"`
	Scenarios      []Scenario         `json:"scenarios"`
}

// start is day 0: fixed and in the past, since the simulated year must end
// before the wall clock (apply_review refuses review times in the future)
// and the numbers must not depend on the day they are computed.
var start = time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)

type memory struct {
	id      uuid.UUID
	label   string
	created int // day
	n       int // index within its label
	pinned  bool
}

// Run simulates both scenarios, each in a transaction it rolls back.
func Run(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, opts Options, log *slog.Logger) (Result, error) {
	if opts.Days <= 0 {
		opts.Days = 365
	}
	if opts.PurgeAfterDays <= 0 {
		opts.PurgeAfterDays = 60
	}
	res := Result{Days: opts.Days}
	purge := opts.PurgeAfterDays
	for _, sc := range []Scenario{{Name: "purge off"}, {Name: fmt.Sprintf("purge after %g days", purge), PurgeAfterDays: &purge}} {
		out, err := simulate(ctx, db, opts, sc, &res, log)
		if err != nil {
			return res, fmt.Errorf("%s: %w", sc.Name, err)
		}
		res.Scenarios = append(res.Scenarios, out)
	}
	return res, nil
}

func simulate(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, opts Options, sc Scenario, res *Result, log *slog.Logger) (Scenario, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return sc, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the simulation never commits
	if err := OneServer(ctx, tx, "lifecycle"); err != nil {
		return sc, err
	}

	purge := "null"
	if sc.PurgeAfterDays != nil {
		purge = fmt.Sprint(*sc.PurgeAfterDays)
	}
	if _, err := tx.Exec(ctx, `SELECT mneme.set_setting('purge_after_days', $1::jsonb)`, purge); err != nil {
		return sc, err
	}
	var every time.Duration
	if err := tx.QueryRow(ctx, `SELECT extract(epoch FROM mneme._interval_setting('cleanup_interval'))::float8 * 1e9,
		mneme.setting('cleanup_interval') #>> '{}', mneme.setting('inactive_below_r')::float8, mneme.setting('initial_stability_days')`).
		Scan(&every, &res.CleanupEvery, &res.InactiveBelowR, &res.InitialDays); err != nil {
		return sc, fmt.Errorf("read settings (cleanup_interval must be set for the simulation): %w", err)
	}
	if every < time.Hour {
		return sc, fmt.Errorf("cleanup_interval %s: the simulation needs at least an hour", res.CleanupEvery)
	}

	conv := uuid.NewSHA1(uuid.NameSpaceOID, []byte("mneme-lifecycle-"+sc.Name))
	var mems []memory
	count := map[string]int{}
	day0 := start
	nextCleanup := day0.Add(every)
	for d := 0; d < opts.Days; d++ {
		now := day0.AddDate(0, 0, d)
		// New memories on the first day of each week.
		if d%7 == 0 {
			for li, label := range Labels {
				u := Workload[label]
				for k := 0; k < u.PerWeek; k++ {
					n := count[label]
					count[label]++
					m := memory{label: label, created: d, n: n, pinned: u.PinnedEvery > 0 && n%u.PinnedEvery == u.PinnedEvery-1}
					m.id = uuid.NewSHA1(conv, []byte(fmt.Sprintf("%s-%d", label, n)))
					surprise := math.Round(u.SurpriseMaximum*unit(uint64(li), uint64(n), 1)*1000) / 1000
					at := now.Add(time.Duration(k) * time.Minute)
					if _, err := tx.Exec(ctx, `INSERT INTO mneme.memories (id, conversation_id, content, label, pinned, surprise,
						source_type, created_at, last_reviewed_at) VALUES ($1, $2, $3, $4, $5, $6, 'import', $7, $7)`,
						m.id, conv, fmt.Sprintf("%s memory %d", label, n), label, m.pinned, surprise, at); err != nil {
						return sc, fmt.Errorf("insert memory: %w", err)
					}
					mems = append(mems, m)
				}
			}
		}
		// Retrievals of active memories, each reviewed in the evening.
		status, err := statuses(ctx, tx, conv)
		if err != nil {
			return sc, err
		}
		for i, m := range mems {
			if m.created >= d || status[m.id] != "active" {
				continue
			}
			u := Workload[m.label]
			pRetrieve, pGood := u.RetrieveLater, u.GoodLater
			if d-m.created <= u.FreshDays {
				pRetrieve, pGood = u.RetrieveFresh, u.GoodFresh
			}
			if unit(uint64(i), uint64(d), 2) >= pRetrieve {
				continue
			}
			rating := fsrs.Good
			if unit(uint64(i), uint64(d), 3) >= pGood {
				rating = fsrs.Again
				sc.Again++
			}
			if err := Review(ctx, tx, m.id, rating, now.Add(20*time.Hour+time.Duration(i)*time.Millisecond), "lifecycle simulation"); err != nil {
				return sc, err
			}
			sc.Reviews++
		}
		// Cleanup on its schedule, at the simulated time.
		end := now.Add(24 * time.Hour)
		for !nextCleanup.After(end) {
			if _, err := tx.Exec(ctx, `SELECT * FROM mneme._cleanup($1, false)`, nextCleanup); err != nil {
				return sc, fmt.Errorf("cleanup at %s: %w", nextCleanup, err)
			}
			sc.Cleanups++
			nextCleanup = nextCleanup.Add(every)
		}
		status, err = statuses(ctx, tx, conv)
		if err != nil {
			return sc, err
		}
		day := Day{Day: d + 1, Labels: map[string]Share{}}
		for _, label := range Labels {
			var s Share
			for _, m := range mems {
				if m.label != label {
					continue
				}
				s.Created++
				switch status[m.id] {
				case "active":
					s.Active++
				case "inactive":
					s.Inactive++
				case "":
					s.Purged++
				}
			}
			if s.Created > 0 {
				s.Active /= float64(s.Created)
				s.Inactive /= float64(s.Created)
				s.Purged /= float64(s.Created)
			}
			day.Labels[label] = s
		}
		sc.Days = append(sc.Days, day)
		log.Debug("lifecycle: day", "scenario", sc.Name, "day", d+1)
	}

	// The rules, checked on the record (mneme.memory_events).
	if err := tx.QueryRow(ctx, `SELECT count(DISTINCT e.memory_id) FROM mneme.memory_events e
		JOIN mneme.memories m ON m.id = e.memory_id
		WHERE e.conversation_id = $1 AND e.event IN ('inactivated', 'purged') AND (m.pinned OR m.label = 'important')`, conv).
		Scan(&sc.PinnedOrImportantLeft); err != nil {
		return sc, err
	}
	var pinnedOrImportant []uuid.UUID
	for _, m := range mems {
		if m.pinned || m.label == "important" {
			pinnedOrImportant = append(pinnedOrImportant, m.id)
		}
	}
	var gone int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) AS x(id)
		WHERE NOT EXISTS (SELECT 1 FROM mneme.memories m WHERE m.id = x.id AND m.status = 'active')`, pinnedOrImportant).Scan(&gone); err != nil {
		return sc, err
	}
	sc.PinnedOrImportantLeft += gone
	grace := -1.0
	if sc.PurgeAfterDays != nil {
		grace = *sc.PurgeAfterDays
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE $2 < 0 OR p.at - (SELECT max(i.at) FROM mneme.memory_events i
		                                  WHERE i.memory_id = p.memory_id AND i.event = 'inactivated' AND i.at <= p.at) < make_interval(secs => $2 * 86400)),
		       count(*)
		FROM mneme.memory_events p WHERE p.conversation_id = $1 AND p.event = 'purged'`, conv, grace).Scan(&sc.PurgedEarly, &sc.Purged); err != nil {
		return sc, err
	}
	return sc, nil
}

func statuses(ctx context.Context, tx pgx.Tx, conv uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := tx.Query(ctx, `SELECT id, status FROM mneme.memories WHERE conversation_id = $1`, conv)
	if err != nil {
		return nil, fmt.Errorf("read statuses: %w", err)
	}
	out := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = s
	}
	return out, rows.Err()
}

// Review rates one memory as the review job does, at a simulated time:
// go-fsrs computes the next state from the locked row, mneme.apply_review
// writes it (reviewer heuristic, the matched query why). The simulations
// of this package and of package feedback review through it.
func Review(ctx context.Context, tx pgx.Tx, id uuid.UUID, r fsrs.Rating, at time.Time, why string) error {
	var st fsrs.State
	var phase string
	if err := tx.QueryRow(ctx, `SELECT stability, difficulty, fsrs_state, last_reviewed_at, review_count
		FROM mneme.review_targets(ARRAY[$1]::uuid[], true)`, id).Scan(&st.Stability, &st.Difficulty, &phase, &st.LastReviewedAt, &st.Reviews); err != nil {
		return fmt.Errorf("read memory %s: %w", id, err)
	}
	var err error
	if st.Phase, err = fsrs.ParsePhase(phase); err != nil {
		return err
	}
	next := fsrs.Next(st, r, at)
	if _, err := tx.Exec(ctx, `SELECT mneme.apply_review($1, $2, $3, $4, $5, $6, 'heuristic', ARRAY[$7])`,
		id, fsrs.Name(r), next.Stability, next.Difficulty, string(next.Phase), at, why); err != nil {
		return fmt.Errorf("review %s: %w", id, err)
	}
	return nil
}

// OneServer refuses a distributed mneme (Citus) for `mneme eval <name>`:
// the simulations (this package's and package feedback's) write memories
// as the caller and act through the API (as mneme's owner) in one
// transaction, and Citus refuses to read placements another role modified
// in the transaction (25001; docs/scale.md).
func OneServer(ctx context.Context, tx pgx.Tx, name string) error {
	citus, err := migrate.Distributed(ctx, tx)
	if err == nil && citus {
		err = fmt.Errorf("eval %s does not run on a distributed mneme (Citus): its simulation writes and reads in one transaction "+
			"as two roles, which Citus refuses; run it on one server (the rules are the same)", name)
	}
	return err
}

// unit is a deterministic number in [0, 1) from a, b and a stream (splitmix64).
func unit(a, b, stream uint64) float64 {
	x := a*0x9E3779B97F4A7C15 ^ b*0xBF58476D1CE4E5B9 ^ stream*0x94D049BB133111EB
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
}
