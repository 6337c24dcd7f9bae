package soak

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// The ledger is what the soak did, written down by the client as it did it:
// the checks compare the database with it, never the database with itself.

// op is one step of a conversation, in the order it was made: a message or
// a segment_now after the messages before it. The offline reference
// replays these steps.
type op struct {
	Message    *sentMessage
	SegmentNow bool
}

// sentMessage is one message add_message accepted.
type sentMessage struct {
	ID      int64 // in the live database
	Index   int   // its position among the conversation's messages
	Role    string
	Content string
	At      time.Time // the time given, or the stored time read back (server clock)
	Known   bool      // At is known (false: read back failed, e.g. erased in between)
}

// conversation is one conversation of the soak and everything done in it.
type conversation struct {
	ID          uuid.UUID
	Tenant      int
	ServerClock bool // add_message without a time: the server's clock
	Doomed      bool // erased whole (erase_conversation) once its writer stops
	Marked      bool // its messages and remembers carry marker words (erased later)

	mu       sync.Mutex
	ops      []op
	msgs     []*sentMessage
	erased   bool // erase_conversation committed
	writing  bool // its writer still writes
	lastAt   time.Time
	virtual  time.Time // the compressed clock of a conversation with explicit times
	messages map[int64]*sentMessage
}

func (c *conversation) addMessage(m *sentMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.Index = len(c.msgs)
	c.msgs = append(c.msgs, m)
	c.ops = append(c.ops, op{Message: m})
	if c.messages == nil {
		c.messages = map[int64]*sentMessage{}
	}
	c.messages[m.ID] = m
}

func (c *conversation) addSegmentNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, op{SegmentNow: true})
}

func (c *conversation) isErased() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.erased
}

// retrieval is one recorded retrieval (retrieve or context): the query is
// unique to it, so its pending review can be counted wherever it went.
type retrieval struct {
	Conversation *conversation
	Query        string
	MemoryIDs    []uuid.UUID // what the call returned (and so recorded)
	Context      bool
	Scope        string
	Start, End   time.Time // when the call was made and returned
}

// erasedEpisode is an episode the soak erased, as it was just before: the
// live episodes are the ones left plus these.
type erasedEpisode struct {
	Conversation uuid.UUID
	MemoryID     uuid.UUID
	MessageIDs   []int64
}

// ledger collects what every goroutine of the soak did.
type ledger struct {
	mu             sync.Mutex
	convs          []*conversation
	byID           map[uuid.UUID]*conversation
	retrievals     []retrieval
	erasedEpisodes []erasedEpisode
	erasedMemories map[uuid.UUID]bool
	erasedDuring   map[uuid.UUID][2]time.Time // when the erase call that erased it ran (taken along: the call's)
	erasedMessages map[int64]bool             // source messages of the memories the soak erased (erase deletes them)
	markers        map[string]*planted
	counts         map[string]int // calls by kind (successful)
	rejected       int            // bad input refused as expected (out-of-order times)
	unexpected     []string       // calls that failed unexpectedly (first few)
	unexpectedN    int
}

func newLedger() *ledger {
	return &ledger{byID: map[uuid.UUID]*conversation{}, erasedMemories: map[uuid.UUID]bool{},
		erasedMessages: map[int64]bool{},
		erasedDuring:   map[uuid.UUID][2]time.Time{},
		markers:        map[string]*planted{}, counts: map[string]int{}}
}

func (l *ledger) call(kind string) {
	l.mu.Lock()
	l.counts[kind]++
	l.mu.Unlock()
}

func (l *ledger) fail(what string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpectedN++
	if len(l.unexpected) < 10 {
		l.unexpected = append(l.unexpected, what+": "+err.Error())
	}
}

func (l *ledger) reject() {
	l.mu.Lock()
	l.rejected++
	l.mu.Unlock()
}

// planted is where a marker word was planted: a message (its id once
// add_message returned it) or a remember.
type planted struct {
	Kind         string // "message" or "remember"
	Conversation *conversation
	MessageID    int64
}

func (l *ledger) plant(marker string, p *planted) {
	l.mu.Lock()
	l.markers[marker] = p
	l.mu.Unlock()
}

func (l *ledger) addRetrieval(r retrieval) {
	l.mu.Lock()
	l.retrievals = append(l.retrievals, r)
	l.mu.Unlock()
}

func (l *ledger) addErased(eps []erasedEpisode, memory uuid.UUID, sources []int64, during [2]time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erasedEpisodes = append(l.erasedEpisodes, eps...)
	l.erasedMemories[memory] = true
	l.erasedDuring[memory] = during
	for _, e := range eps {
		l.erasedDuring[e.MemoryID] = during
	}
	for _, id := range sources {
		l.erasedMessages[id] = true
	}
}

func (l *ledger) totalCalls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.counts {
		n += c
	}
	return n
}
