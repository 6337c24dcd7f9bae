package config

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	c, err := fromLookup(lookup(map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:5432/db"}))
	require.NoError(t, err)
	require.NoError(t, c.Validate(true))
	require.Equal(t, EventsNotify, c.Events, "NOTIFY by default: replication measured no faster and keeps a slot")
	require.Equal(t, 4, c.Concurrency)
	require.Equal(t, "127.0.0.1:9464", c.MetricsAddr)
	require.Equal(t, 5*time.Second, c.PollEvery)
	require.Equal(t, "mneme", c.SlotName)
	require.Equal(t, 30*time.Second, c.JobLease)
	require.Equal(t, 30*time.Second, c.ShutdownTimeout)
	require.False(t, c.LLM.Configured())
	require.False(t, c.Embed.Configured())
	require.False(t, c.MetricsTenantLabel, "no tenant label by default (a series per tenant)")
	c, err = fromLookup(lookup(map[string]string{"MNEME_METRICS_TENANT_LABEL": "on"}))
	require.NoError(t, err)
	require.True(t, c.MetricsTenantLabel)
}

func TestValidateReportsWhatIsMissing(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no database", map[string]string{}, []string{"DATABASE_URL is not set"}},
		{"LLM model without URL", map[string]string{"MNEME_LLM_MODEL": "gpt-4o-mini"},
			[]string{"MNEME_LLM_MODEL or MNEME_LLM_API_KEY is set but MNEME_LLM_BASE_URL is not"}},
		{"LLM URL without model", map[string]string{"MNEME_LLM_BASE_URL": "http://127.0.0.1:11434/v1"},
			[]string{"MNEME_LLM_BASE_URL is set but MNEME_LLM_MODEL is not"}},
		{"embed key without URL", map[string]string{"MNEME_EMBED_API_KEY": "k"},
			[]string{"MNEME_EMBED_BASE_URL is not"}},
		{"embed URL not http", map[string]string{"MNEME_EMBED_BASE_URL": "ftp://x", "MNEME_EMBED_MODEL": "m"},
			[]string{"MNEME_EMBED_BASE_URL=\"ftp://x\" is not an http(s) URL"}},
		{"bad transport", map[string]string{"MNEME_EVENTS": "kafka"}, []string{`MNEME_EVENTS="kafka"`}},
		{"bad concurrency", map[string]string{"MNEME_CONCURRENCY": "0"}, []string{"MNEME_CONCURRENCY=0"}},
		{"bad slot", map[string]string{"MNEME_SLOT": "My-Slot"}, []string{`MNEME_SLOT="My-Slot"`}},
		{"lease too short", map[string]string{"MNEME_JOB_LEASE": "500ms"}, []string{"MNEME_JOB_LEASE=500ms: use 1s or more"}},
		{"shutdown not positive", map[string]string{"MNEME_SHUTDOWN_TIMEOUT": "0s"}, []string{"MNEME_SHUTDOWN_TIMEOUT must be positive"}},
		{"index interval negative", map[string]string{"MNEME_INDEX_INTERVAL": "-1m"}, []string{"MNEME_INDEX_INTERVAL must be positive, or off"}},
		{"index URL not postgres", map[string]string{"MNEME_INDEX_DATABASE_URL": "http://x"}, []string{`MNEME_INDEX_DATABASE_URL="http://x" is neither`}},
		{"several at once", map[string]string{"MNEME_EVENTS": "x", "MNEME_LLM_MODEL": "m"},
			[]string{"MNEME_EVENTS", "MNEME_LLM_BASE_URL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": "postgres://u@h/db"}
			if tc.name == "no database" {
				env = map[string]string{}
			}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := fromLookup(lookup(env))
			require.NoError(t, err)
			err = c.Validate(true)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalid))
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestFromEnvRejectsUnparsable(t *testing.T) {
	_, err := fromLookup(lookup(map[string]string{"MNEME_CONCURRENCY": "four", "MNEME_POLL_INTERVAL": "5"}))
	require.ErrorContains(t, err, `MNEME_CONCURRENCY="four" is not a whole number`)
	require.ErrorContains(t, err, `MNEME_POLL_INTERVAL="5" is not a duration`)
	_, err = fromLookup(lookup(map[string]string{"MNEME_METRICS_TENANT_LABEL": "yes please"}))
	require.ErrorContains(t, err, `MNEME_METRICS_TENANT_LABEL="yes please": use on or off`)
}

// Load reports every problem at once: values that do not parse and values
// that break a rule (MNEME_EVENTS=bogus was lost behind an unparsable
// MNEME_POLL_INTERVAL).
func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := load(lookup(map[string]string{"MNEME_EVENTS": "bogus", "MNEME_POLL_INTERVAL": "5", "MNEME_CONCURRENCY": "0"}), true)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `MNEME_POLL_INTERVAL="5" is not a duration`)
	require.ErrorContains(t, err, `MNEME_EVENTS="bogus": use auto, replication, notify or poll`)
	require.ErrorContains(t, err, "MNEME_CONCURRENCY=0")
	require.ErrorContains(t, err, "DATABASE_URL is not set")
}

func TestFullyConfiguredEndpoints(t *testing.T) {
	c, err := fromLookup(lookup(map[string]string{
		"DATABASE_URL":       "postgres://u@h/db",
		"MNEME_LLM_BASE_URL": "http://127.0.0.1:11434/v1", "MNEME_LLM_MODEL": "llama3.1",
		"MNEME_EMBED_BASE_URL": "https://api.openai.com/v1", "MNEME_EMBED_MODEL": "text-embedding-3-small",
		"MNEME_EMBED_API_KEY": "sk", "MNEME_EMBED_DIM": "1536", "MNEME_METRICS_ADDR": "off",
	}))
	require.NoError(t, err)
	require.NoError(t, c.Validate(true))
	require.True(t, c.LLM.Configured())
	require.True(t, c.Embed.Configured())
	require.Equal(t, 1536, c.EmbedDim)
	require.True(t, c.EmbedDimSet)
	require.Equal(t, "", c.MetricsAddr)
}

func TestRedact(t *testing.T) {
	require.Equal(t, "postgres://u:xxxxx@h/db?sslmode=disable", Redact("postgres://u:secret@h/db?sslmode=disable"))
	require.Equal(t, "postgres://u@h/db", Redact("postgres://u@h/db"), "no password, nothing to hide")
	require.Equal(t, "host=h dbname=db", Redact("host=h dbname=db"))
}

// The index pass: every minute by default, off on request, its own login
// when given.
func TestIndexSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	c, err := load(env(map[string]string{"DATABASE_URL": "postgres://u@h/db"}), true)
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.IndexEvery)
	require.Empty(t, c.IndexURL)
	c, err = load(env(map[string]string{"DATABASE_URL": "postgres://u@h/db", "MNEME_INDEX_INTERVAL": "off",
		"MNEME_INDEX_DATABASE_URL": "postgres://indexer@h/db"}), true)
	require.NoError(t, err)
	require.Zero(t, c.IndexEvery)
	require.Equal(t, "postgres://indexer@h/db", c.IndexURL)
	_, err = load(env(map[string]string{"DATABASE_URL": "postgres://u@h/db", "MNEME_INDEX_INTERVAL": "hourly"}), true)
	require.ErrorContains(t, err, `MNEME_INDEX_INTERVAL="hourly" is not a duration`)
}
