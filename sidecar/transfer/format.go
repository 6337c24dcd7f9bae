// Package transfer owns mneme's export and import: a tenant's memory carried
// out of a database and into another exactly, as versioned JSON Lines
// (docs/export.md), and mem0's exported memories taken in. The line format
// is defined once, by the SQL functions of sql/460-export.sql; this package
// streams their rows out, and reads, validates and writes lines back
// through the import functions, one transaction per conversation.
package transfer

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Version is the export format version this package writes and reads.
const Version = 1

// FormatName is the header's "format".
const FormatName = "mneme-export"

// maxLine is the longest line read (a message of message_max_chars with
// its embedding fits many times over).
const maxLine = 64 << 20

// Line kinds, in the order they appear within a conversation.
const (
	kindHeader       = "header"
	kindSetting      = "setting"
	kindConversation = "conversation"
	kindMessage      = "message"
	kindMemory       = "memory"
	kindReview       = "review"
	kindEvent        = "event"
	kindEnd          = "end"
)

// rank orders the kinds of a conversation's lines.
var rank = map[string]int{kindMessage: 1, kindMemory: 2, kindReview: 3, kindEvent: 4}

// ErrFormat is wrapped by every error about the file's content (as opposed
// to the database's or the reader's).
var ErrFormat = errors.New("invalid export file")

// LineError is a problem with one line of the file.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

func lineErr(n int, format string, args ...any) error {
	return &LineError{Line: n, Err: fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)}
}

// Header is the first line.
type Header struct {
	Type           string `json:"type"`
	Format         string `json:"format"`
	Version        int    `json:"version"`
	MnemeVersion   string `json:"mneme_version"`
	SQLAPIVersion  string `json:"sql_api_version,omitempty"` // absent before 0.10.0
	Tenant         string `json:"tenant"`
	EmbeddingModel string `json:"embedding_model"`
	EmbeddingDim   int    `json:"embedding_dim"`
	VectorVariant  string `json:"vector_variant"`
	Embeddings     bool   `json:"embeddings"`
	ExportedAt     string `json:"exported_at"`
}

type settingLine struct {
	Type  string          `json:"type"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// lineCounts are the numbers of a conversation's lines of each kind.
type lineCounts struct {
	Messages int64 `json:"messages"`
	Memories int64 `json:"memories"`
	Reviews  int64 `json:"reviews"`
	Events   int64 `json:"events"`
}

type conversationLine struct {
	Type           string          `json:"type"`
	ID             uuid.UUID       `json:"id"`
	Erased         bool            `json:"erased,omitempty"`
	Lines          *lineCounts     `json:"lines"`
	Speakers       []string        `json:"speakers,omitempty"`
	PendingReviews json.RawMessage `json:"pending_reviews,omitempty"`
	LastMessageAt  *string         `json:"last_message_at,omitempty"`
	CreatedAt      *string         `json:"created_at,omitempty"`
	UpdatedAt      *string         `json:"updated_at,omitempty"`
}

type messageLine struct {
	Type         string          `json:"type"`
	Conversation uuid.UUID       `json:"conversation"`
	Seq          int64           `json:"seq"`
	Role         string          `json:"role"`
	Content      string          `json:"content"`
	CreatedAt    string          `json:"created_at"`
	ConsumedAt   *string         `json:"consumed_at,omitempty"`
	Episode      *uuid.UUID      `json:"episode,omitempty"`
	EndsSession  bool            `json:"ends_session,omitempty"` // segment_now ended a session here
	Embedding    json.RawMessage `json:"embedding,omitempty"`
	was          *uuid.UUID      // the file's id of the memory it is or belongs to, before remapping (import: tombstones)
}

type memoryLine struct {
	Type             string          `json:"type"`
	Conversation     uuid.UUID       `json:"conversation"`
	ID               uuid.UUID       `json:"id"`
	Kind             string          `json:"kind"`
	Title            *string         `json:"title,omitempty"`
	Content          string          `json:"content"`
	Summary          *string         `json:"summary,omitempty"`
	SourceMessages   []int64         `json:"source_messages,omitempty"`
	SourceMessageIDs []int64         `json:"source_message_ids,omitempty"` // filled on import
	SourceFirstAt    *string         `json:"source_first_at,omitempty"`
	SourceLastAt     *string         `json:"source_last_at,omitempty"`
	Surprise         json.Number     `json:"surprise"`
	Stability        json.Number     `json:"stability"`
	Difficulty       json.Number     `json:"difficulty"`
	FSRSState        string          `json:"fsrs_state"`
	LastReviewedAt   string          `json:"last_reviewed_at"`
	ReviewCount      int             `json:"review_count"`
	Label            string          `json:"label"`
	Pinned           bool            `json:"pinned"`
	Status           string          `json:"status"`
	StatusReason     *string         `json:"status_reason,omitempty"`
	ConfidenceScore  json.Number     `json:"confidence_score"`
	ValidUntil       *string         `json:"valid_until,omitempty"`
	LastConfirmedAt  *string         `json:"last_confirmed_at,omitempty"`
	SourceType       string          `json:"source_type"`
	SourceRef        *string         `json:"source_ref,omitempty"`
	SupersedesID     *uuid.UUID      `json:"supersedes_id,omitempty"`
	ConfirmsID       *uuid.UUID      `json:"confirms_id,omitempty"`
	InvalidatesID    *uuid.UUID      `json:"invalidates_id,omitempty"`
	Slot             *string         `json:"slot,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	CreatedAt        string          `json:"created_at"`
	UpdatedAt        string          `json:"updated_at"`
	Embedding        json.RawMessage `json:"embedding,omitempty"`
	// EmbeddingAt is filled on import: the embedding is the EmbeddingAt-th
	// of the batch's binary array (mneme.import_memories' embeddings).
	EmbeddingAt *int       `json:"embedding_at,omitempty"`
	was         *uuid.UUID // the file's id of the memory it is or belongs to, before remapping (import: tombstones)
}

type reviewLine struct {
	Type               string      `json:"type"`
	Conversation       uuid.UUID   `json:"conversation"`
	Seq                int64       `json:"seq"`
	Memory             uuid.UUID   `json:"memory"`
	Rating             string      `json:"rating"`
	Reviewer           string      `json:"reviewer"`
	Defaulted          bool        `json:"defaulted"`
	StabilityBefore    json.Number `json:"stability_before"`
	StabilityAfter     json.Number `json:"stability_after"`
	DifficultyBefore   json.Number `json:"difficulty_before"`
	DifficultyAfter    json.Number `json:"difficulty_after"`
	StateBefore        string      `json:"state_before"`
	StateAfter         string      `json:"state_after"`
	LastReviewedBefore string      `json:"last_reviewed_before"`
	ReviewedAt         string      `json:"reviewed_at"`
	MatchedQueries     []string    `json:"matched_queries"`
	AskedIn            *uuid.UUID  `json:"asked_in,omitempty"` // the conversation whose retrieval asked for it
	// Evidence is why the reviewer rated so (review_log.evidence): the
	// heuristic's score and thresholds, or the LLM's reason; absent for
	// reviews before mneme stored it.
	Evidence  json.RawMessage `json:"evidence,omitempty"`
	CreatedAt string          `json:"created_at"`
	was       *uuid.UUID      // the file's id of the memory it is or belongs to, before remapping (import: tombstones)
}

type eventLine struct {
	Type         string     `json:"type"`
	Conversation uuid.UUID  `json:"conversation"`
	Memory       *uuid.UUID `json:"memory,omitempty"`
	Event        string     `json:"event"`
	Reason       *string    `json:"reason,omitempty"`
	Actor        string     `json:"actor"`
	Caller       string     `json:"caller"`
	Review       *int64     `json:"review,omitempty"`
	ReviewLogID  *int64     `json:"review_log_id,omitempty"` // filled on import
	At           string     `json:"at"`
	was          *uuid.UUID // the file's id of the memory it is or belongs to, before remapping (import: tombstones)
}

type endLine struct {
	Type          string `json:"type"`
	Conversations int64  `json:"conversations"`
	Lines         int64  `json:"lines"`
}

var (
	keyRe   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	labelRe = keyRe
)

func oneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// decodeStrict decodes one JSON object, refusing unknown fields (a typo or
// a newer format's field is an error, not silently lost).
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// lineType reads a line's "type" without decoding the rest.
func lineType(b []byte) (string, error) {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", fmt.Errorf("not a JSON object: %v", err)
	}
	if t.Type == "" {
		return "", errors.New(`no "type"`)
	}
	return t.Type, nil
}

// decodeRow decodes a message, memory, review or event line in one pass
// when its "type" shows without decoding: strictly into its kind's struct,
// the decoded type checked. That is what lineType and then the strict
// decode of row would give, at half the cost (lineType's pass was a third
// of the reader's CPU). Otherwise, or if the line fails the decode, it
// returns nil, and lineType and row decode the line as before (with their
// errors).
func decodeRow(b []byte) (string, any) {
	kind := guessType(b)
	var v any
	switch kind {
	case kindMessage:
		v = &messageLine{}
	case kindMemory:
		v = &memoryLine{}
	case kindReview:
		v = &reviewLine{}
	case kindEvent:
		v = &eventLine{}
	default:
		return "", nil
	}
	if decodeStrict(b, v) != nil {
		return "", nil
	}
	var typ string
	switch x := v.(type) {
	case *messageLine:
		typ = x.Type
	case *memoryLine:
		typ = x.Type
	case *reviewLine:
		typ = x.Type
	case *eventLine:
		typ = x.Type
	}
	if typ != kind {
		return "", nil
	}
	return kind, v
}

// guessType is the value of the first `"type": "..."` in b, "" if none
// (a guess: the key may be a nested one; decodeRow checks it).
func guessType(b []byte) string {
	i := bytes.Index(b, []byte(`"type"`))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(b[i+len(`"type"`):], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 {
		return ""
	}
	return string(rest[1 : 1+end])
}

// checkTime checks a time of the format (RFC 3339; years 1 to 9999 as
// mneme takes them).
func checkTime(name, v string, required bool) error {
	if v == "" {
		if required {
			return fmt.Errorf("%s is missing", name)
		}
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return fmt.Errorf("%s %q is not an RFC 3339 time", name, v)
	}
	if t.Year() < 1 || t.Year() > 9999 {
		return fmt.Errorf("%s %q is outside years 1 to 9999", name, v)
	}
	return nil
}

func optTime(name string, v *string) error {
	if v == nil {
		return nil
	}
	return checkTime(name, *v, true)
}

// checkNumber checks a number field within [lo, hi].
func checkNumber(name string, n json.Number, lo, hi float64) error {
	if n == "" {
		return fmt.Errorf("%s is missing", name)
	}
	f, err := n.Float64()
	if err != nil {
		return fmt.Errorf("%s %q is not a number", name, n)
	}
	if f < lo || f > hi {
		return fmt.Errorf("%s %v is outside [%v, %v]", name, f, lo, hi)
	}
	return nil
}

func (h *Header) validate() error {
	if h.Type != kindHeader {
		return errors.New(`the first line must be the header ({"type": "header", ...})`)
	}
	if h.Format != FormatName {
		return fmt.Errorf("format %q is not %q", h.Format, FormatName)
	}
	if h.Version != Version {
		return fmt.Errorf("format version %d is not supported (this mneme reads version %d)", h.Version, Version)
	}
	if h.EmbeddingDim < 0 || h.EmbeddingDim > 2000 {
		return fmt.Errorf("embedding_dim %d is out of range", h.EmbeddingDim)
	}
	return checkTime("exported_at", h.ExportedAt, true)
}

func (s *settingLine) validate() error {
	if !keyRe.MatchString(s.Key) {
		return fmt.Errorf("setting key %q is not a key", s.Key)
	}
	if len(s.Value) == 0 {
		return fmt.Errorf("setting %s has no value", s.Key)
	}
	return nil
}

func (c *conversationLine) validate() error {
	if c.ID == uuid.Nil {
		return errors.New("conversation id is missing")
	}
	if c.Lines == nil {
		return errors.New(`"lines" (the counts of the conversation's lines) is missing`)
	}
	if c.Erased {
		if c.Speakers != nil || c.PendingReviews != nil || c.CreatedAt != nil {
			return errors.New("an erased conversation has no other fields")
		}
		return nil
	}
	if c.CreatedAt == nil || c.UpdatedAt == nil {
		return errors.New("created_at and updated_at are needed")
	}
	if len(c.PendingReviews) > 0 && c.PendingReviews[0] != '[' {
		return errors.New("pending_reviews must be an array")
	}
	for _, t := range []struct {
		n string
		v *string
	}{{"created_at", c.CreatedAt}, {"updated_at", c.UpdatedAt}, {"last_message_at", c.LastMessageAt}} {
		if err := optTime(t.n, t.v); err != nil {
			return err
		}
	}
	return nil
}

func (m *messageLine) validate() error {
	if m.Role == "" || strings.TrimSpace(m.Content) == "" {
		return errors.New("a message needs a role and content")
	}
	if err := checkTime("created_at", m.CreatedAt, true); err != nil {
		return err
	}
	return optTime("consumed_at", m.ConsumedAt)
}

func (m *memoryLine) validate() error {
	if m.ID == uuid.Nil {
		return errors.New("memory id is missing")
	}
	if !oneOf(m.Kind, "episodic", "semantic") {
		return fmt.Errorf("kind %q is not episodic or semantic", m.Kind)
	}
	if strings.TrimSpace(m.Content) == "" {
		return errors.New("content is empty")
	}
	if !oneOf(m.Status, "active", "superseded", "invalidated", "inactive", "merged") {
		return fmt.Errorf("status %q is not one of active, superseded, invalidated, inactive, merged", m.Status)
	}
	if !oneOf(m.FSRSState, "learning", "review", "relearning") {
		return fmt.Errorf("fsrs_state %q is not one of learning, review, relearning", m.FSRSState)
	}
	if !oneOf(m.SourceType, "conversation", "explicit", "extracted", "import") {
		return fmt.Errorf("source_type %q is not one of conversation, explicit, extracted, import", m.SourceType)
	}
	if !labelRe.MatchString(m.Label) {
		return fmt.Errorf("label %q is not a label", m.Label)
	}
	if m.ReviewCount < 0 {
		return fmt.Errorf("review_count %d is negative", m.ReviewCount)
	}
	if err := checkNumber("surprise", m.Surprise, 0, 1); err != nil {
		return err
	}
	if err := checkNumber("confidence_score", m.ConfidenceScore, 0, 1); err != nil {
		return err
	}
	if err := checkNumber("difficulty", m.Difficulty, 1, 10); err != nil {
		return err
	}
	if err := checkNumber("stability", m.Stability, 1e-300, 1e300); err != nil {
		return err
	}
	for _, l := range []*uuid.UUID{m.SupersedesID, m.ConfirmsID, m.InvalidatesID} {
		if l != nil && *l == m.ID {
			return errors.New("a memory cannot link to itself")
		}
	}
	if len(m.Metadata) > 0 && m.Metadata[0] != '{' {
		return errors.New("metadata must be an object")
	}
	// The limits mneme.remember keeps (title, source_ref) and the table's (slot).
	for _, l := range []struct {
		name string
		v    *string
		max  int
	}{{"title", m.Title, 1000}, {"source_ref", m.SourceRef, 512}, {"slot", m.Slot, 200}} {
		if l.v != nil && utf8.RuneCountInString(*l.v) > l.max {
			return fmt.Errorf("%s is longer than %d characters", l.name, l.max)
		}
	}
	for _, t := range []struct {
		n string
		v *string
	}{{"source_first_at", m.SourceFirstAt}, {"source_last_at", m.SourceLastAt}, {"valid_until", m.ValidUntil},
		{"last_confirmed_at", m.LastConfirmedAt}, {"last_reviewed_at", &m.LastReviewedAt}, {"created_at", &m.CreatedAt},
		{"updated_at", &m.UpdatedAt}} {
		if err := optTime(t.n, t.v); err != nil {
			return err
		}
	}
	return nil
}

func (r *reviewLine) validate() error {
	if r.Memory == uuid.Nil {
		return errors.New("review memory is missing")
	}
	if !oneOf(r.Rating, "again", "hard", "good", "easy") {
		return fmt.Errorf("rating %q is not one of again, hard, good, easy", r.Rating)
	}
	if !oneOf(r.Reviewer, "llm", "heuristic") {
		return fmt.Errorf("reviewer %q is not llm or heuristic", r.Reviewer)
	}
	for _, n := range []struct {
		name string
		v    json.Number
	}{{"stability_before", r.StabilityBefore}, {"stability_after", r.StabilityAfter},
		{"difficulty_before", r.DifficultyBefore}, {"difficulty_after", r.DifficultyAfter}} {
		if err := checkNumber(n.name, n.v, -1e300, 1e300); err != nil {
			return err
		}
	}
	if r.StateBefore == "" || r.StateAfter == "" {
		return errors.New("state_before and state_after are needed")
	}
	if string(r.Evidence) == "null" {
		r.Evidence = nil
	}
	if len(r.Evidence) > 0 && (r.Evidence[0] != '{' || len(r.Evidence) > 4096) {
		return errors.New("review evidence must be a JSON object of at most 4 kB")
	}
	for _, t := range []struct{ n, v string }{{"last_reviewed_before", r.LastReviewedBefore},
		{"reviewed_at", r.ReviewedAt}, {"created_at", r.CreatedAt}} {
		if err := checkTime(t.n, t.v, true); err != nil {
			return err
		}
	}
	return nil
}

var events = []string{"created", "reviewed", "pinned", "unpinned", "forgotten", "superseded", "inactivated",
	"reactivated", "expired", "purged", "erased", "merged", "revised"}

func (e *eventLine) validate() error {
	if !oneOf(e.Event, events...) {
		return fmt.Errorf("event %q is not one of %s", e.Event, strings.Join(events, ", "))
	}
	if e.Actor == "" || e.Caller == "" {
		return errors.New("an event needs its actor and caller")
	}
	return checkTime("at", e.At, true)
}

// reader reads the lines of a file, gunzipping it when it is gzipped
// (whatever its name).
type reader struct {
	br   *bufio.Reader
	n    int
	gz   *gzip.Reader
	done bool
}

func newReader(r io.Reader) (*reader, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrFormat, err)
		}
		return &reader{br: bufio.NewReaderSize(gz, 1<<20), gz: gz}, nil
	}
	return &reader{br: br}, nil
}

// next returns the next line without its newline, io.EOF at the end. A
// last line without a newline is returned as a line (a truncated file ends
// without its end line anyway, which the importer reports).
func (r *reader) next() ([]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, lineErr(r.n+1, "longer than %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			r.done = true
			if len(buf) == 0 {
				return nil, io.EOF
			}
			r.n++
			return buf, nil
		}
		if err != nil {
			// A gzip stream cut short or damaged is the file's fault; any
			// other read error (a cancelled context, a disk) is not.
			var corrupt flate.CorruptInputError
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt) {
				return nil, &LineError{Line: r.n + 1, Err: fmt.Errorf("%w: read: %v", ErrFormat, err)}
			}
			return nil, &LineError{Line: r.n + 1, Err: fmt.Errorf("read: %w", err)}
		}
		r.n++
		return buf[:len(buf)-1], nil
	}
}
