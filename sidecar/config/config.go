// Package config reads mneme's configuration from the environment into one
// struct and validates it, with messages that say what to set.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Event transports the sidecar can learn of new jobs through.
const (
	EventsAuto        = "auto"
	EventsReplication = "replication"
	EventsNotify      = "notify"
	EventsPoll        = "poll"
)

// DefaultEmbedDim is the built-in hash embedder's dimension and the default
// dimension of the embedding column.
const DefaultEmbedDim = 256

// Config is everything mneme reads from the environment.
type Config struct {
	DatabaseURL string // DATABASE_URL

	Vector   string // MNEME_VECTOR: auto | pgvector | array (migrate time)
	EmbedDim int    // MNEME_EMBED_DIM
	// EmbedDimSet is true when MNEME_EMBED_DIM was given explicitly.
	EmbedDimSet bool

	Events      string // MNEME_EVENTS
	Concurrency int    // MNEME_CONCURRENCY
	MetricsAddr string // MNEME_METRICS_ADDR ("" disables)
	// MetricsTenantLabel: MNEME_METRICS_TENANT_LABEL=on labels the LLM
	// usage counters by tenant (a series per tenant; off by default).
	MetricsTenantLabel bool
	PollEvery          time.Duration // MNEME_POLL_INTERVAL
	SlotName           string        // MNEME_SLOT
	MaxAttempts        int           // MNEME_MAX_ATTEMPTS
	// JobLease is how long a claimed job stays with its worker without a
	// heartbeat (heartbeats extend it every third of it while the job runs);
	// a crashed worker's jobs are claimable again after it.
	JobLease time.Duration // MNEME_JOB_LEASE
	// ShutdownTimeout is how long SIGINT/SIGTERM waits for in-flight jobs
	// before cancelling and releasing them.
	ShutdownTimeout time.Duration // MNEME_SHUTDOWN_TIMEOUT

	LLM   Endpoint // MNEME_LLM_BASE_URL, MNEME_LLM_API_KEY, MNEME_LLM_MODEL
	Embed Endpoint // MNEME_EMBED_BASE_URL, MNEME_EMBED_API_KEY, MNEME_EMBED_MODEL

	LLMTimeout time.Duration // MNEME_LLM_TIMEOUT

	// IndexURL is the connection the per-scope vector indexes are made
	// through (MNEME_INDEX_DATABASE_URL; "" = DATABASE_URL): a login that
	// may create indexes on mneme.memories.
	IndexURL string
	// IndexEvery is how often the sidecar runs mneme.vector_index_plan
	// (MNEME_INDEX_INTERVAL; 0 = never, "off").
	IndexEvery time.Duration
}

// Endpoint is an OpenAI-compatible endpoint. The zero value means "not
// configured": use the offline fallback.
type Endpoint struct {
	BaseURL string
	APIKey  string
	Model   string
}

// Configured reports whether the endpoint is set.
func (e Endpoint) Configured() bool { return e.BaseURL != "" }

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("invalid configuration")

// FromEnv reads the environment. It does not validate: call Validate.
func FromEnv() (Config, error) { return fromLookup(os.LookupEnv) }

func fromLookup(lookup func(string) (string, bool)) (Config, error) {
	get := func(k, def string) string {
		if v, ok := lookup(k); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	var errs []error
	atoi := func(k string, def int) int {
		v := get(k, "")
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a whole number", ErrInvalid, k, v))
			return def
		}
		return n
	}
	dur := func(k string, def time.Duration) time.Duration {
		v := get(k, "")
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a duration (e.g. 5s, 250ms)", ErrInvalid, k, v))
			return def
		}
		return d
	}
	c := Config{
		DatabaseURL:     get("DATABASE_URL", ""),
		Vector:          get("MNEME_VECTOR", "auto"),
		EmbedDim:        atoi("MNEME_EMBED_DIM", DefaultEmbedDim),
		Events:          get("MNEME_EVENTS", EventsNotify),
		Concurrency:     atoi("MNEME_CONCURRENCY", 4),
		MetricsAddr:     get("MNEME_METRICS_ADDR", "127.0.0.1:9464"),
		PollEvery:       dur("MNEME_POLL_INTERVAL", 5*time.Second),
		SlotName:        get("MNEME_SLOT", "mneme"),
		MaxAttempts:     atoi("MNEME_MAX_ATTEMPTS", 5),
		JobLease:        dur("MNEME_JOB_LEASE", 30*time.Second),
		ShutdownTimeout: dur("MNEME_SHUTDOWN_TIMEOUT", 30*time.Second),
		LLM: Endpoint{
			BaseURL: get("MNEME_LLM_BASE_URL", ""),
			APIKey:  get("MNEME_LLM_API_KEY", ""),
			Model:   get("MNEME_LLM_MODEL", ""),
		},
		Embed: Endpoint{
			BaseURL: get("MNEME_EMBED_BASE_URL", ""),
			APIKey:  get("MNEME_EMBED_API_KEY", ""),
			Model:   get("MNEME_EMBED_MODEL", ""),
		},
		LLMTimeout: dur("MNEME_LLM_TIMEOUT", 60*time.Second),
		IndexURL:   get("MNEME_INDEX_DATABASE_URL", ""),
	}
	if get("MNEME_INDEX_INTERVAL", "") == "off" {
		c.IndexEvery = 0
	} else {
		c.IndexEvery = dur("MNEME_INDEX_INTERVAL", time.Minute)
	}
	c.EmbedDimSet = get("MNEME_EMBED_DIM", "") != ""
	switch v := get("MNEME_METRICS_TENANT_LABEL", "off"); v {
	case "on", "true", "1":
		c.MetricsTenantLabel = true
	case "off", "false", "0", "":
	default:
		errs = append(errs, fmt.Errorf("%w: MNEME_METRICS_TENANT_LABEL=%q: use on or off", ErrInvalid, v))
	}
	if get("MNEME_METRICS_ADDR", "x") == "off" {
		c.MetricsAddr = ""
	}
	return c, errors.Join(errs...)
}

// Validate checks the whole config and reports every problem at once.
// needDB is false for commands that do not talk to PostgreSQL.
func (c Config) Validate(needDB bool) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...))
	}
	if needDB {
		if c.DatabaseURL == "" {
			bad("DATABASE_URL is not set; set it to a PostgreSQL URL such as postgres://user@127.0.0.1:5432/db " +
				"(or run make demo: with DATABASE_URL unset, every command then uses its private cluster, .mneme/pg in this directory)")
		} else if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql" && !strings.Contains(c.DatabaseURL, "=")) {
			bad("DATABASE_URL=%q is neither a postgres:// URL nor a key=value connection string", Redact(c.DatabaseURL))
		}
	}
	switch c.Vector {
	case "auto", "pgvector", "array":
	default:
		bad("MNEME_VECTOR=%q: use auto, pgvector or array", c.Vector)
	}
	if c.EmbedDim < 2 || c.EmbedDim > 2000 {
		bad("MNEME_EMBED_DIM=%d: use a dimension between 2 and 2000", c.EmbedDim)
	}
	switch c.Events {
	case EventsAuto, EventsReplication, EventsNotify, EventsPoll:
	default:
		bad("MNEME_EVENTS=%q: use auto, replication, notify or poll", c.Events)
	}
	if c.Concurrency < 1 || c.Concurrency > 256 {
		bad("MNEME_CONCURRENCY=%d: use 1 to 256", c.Concurrency)
	}
	if c.MaxAttempts < 1 {
		bad("MNEME_MAX_ATTEMPTS=%d: use 1 or more", c.MaxAttempts)
	}
	if c.PollEvery <= 0 {
		bad("MNEME_POLL_INTERVAL must be positive")
	}
	if c.LLMTimeout <= 0 {
		bad("MNEME_LLM_TIMEOUT must be positive")
	}
	if c.JobLease < time.Second {
		bad("MNEME_JOB_LEASE=%s: use 1s or more (heartbeats extend it every third of it)", c.JobLease)
	}
	if c.ShutdownTimeout <= 0 {
		bad("MNEME_SHUTDOWN_TIMEOUT must be positive")
	}
	if c.IndexEvery < 0 {
		bad("MNEME_INDEX_INTERVAL must be positive, or off")
	}
	if c.IndexURL != "" {
		if u, err := url.Parse(c.IndexURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql" && !strings.Contains(c.IndexURL, "=")) {
			bad("MNEME_INDEX_DATABASE_URL=%q is neither a postgres:// URL nor a key=value connection string", Redact(c.IndexURL))
		}
	}
	if c.SlotName == "" || strings.ToLower(c.SlotName) != c.SlotName || strings.ContainsAny(c.SlotName, " -.") {
		bad("MNEME_SLOT=%q: use lower-case letters, digits and _", c.SlotName)
	}
	errs = append(errs, c.LLM.validate("MNEME_LLM", true)...)
	errs = append(errs, c.Embed.validate("MNEME_EMBED", true)...)
	return errors.Join(errs...)
}

func (e Endpoint) validate(prefix string, needModel bool) []error {
	var errs []error
	if e.BaseURL == "" {
		if e.Model != "" || e.APIKey != "" {
			errs = append(errs, fmt.Errorf("%w: %s_MODEL or %s_API_KEY is set but %s_BASE_URL is not; set %s_BASE_URL (e.g. http://127.0.0.1:11434/v1) or unset the group to use the offline fallback",
				ErrInvalid, prefix, prefix, prefix, prefix))
		}
		return errs
	}
	u, err := url.Parse(e.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%w: %s_BASE_URL=%q is not an http(s) URL", ErrInvalid, prefix, e.BaseURL))
	}
	if needModel && e.Model == "" {
		errs = append(errs, fmt.Errorf("%w: %s_BASE_URL is set but %s_MODEL is not; set the model name", ErrInvalid, prefix, prefix))
	}
	return errs
}

// Redact hides the password of a postgres:// URL (DATABASE_URL) for logs
// and error messages; anything else is returned as it is.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Load reads the environment and validates it: the one call a command
// needs. needDB is false for commands that do not talk to PostgreSQL.
// Every problem is reported at once: a value that does not parse (its
// default stands in for it) and every rule the others break.
func Load(needDB bool) (Config, error) { return load(os.LookupEnv, needDB) }

func load(lookup func(string) (string, bool), needDB bool) (Config, error) {
	c, err := fromLookup(lookup)
	return c, errors.Join(err, c.Validate(needDB))
}

// MigrateEmbedDim is the dimension to ask migrate for: the explicit
// MNEME_EMBED_DIM, or 0 (keep what the database has, 256 on a new one).
func (c Config) MigrateEmbedDim() int {
	if c.EmbedDimSet {
		return c.EmbedDim
	}
	return 0
}
