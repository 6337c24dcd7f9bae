package soak

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// testConversation is one conversation of four messages, a second apart
// except a 10 s gap before the third, with ids 1 to 4.
func testConversation(led *ledger) *conversation {
	c := &conversation{ID: uuid.New()}
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	for i, at := range []time.Duration{0, time.Second, 11 * time.Second, 12 * time.Second} {
		c.addMessage(&sentMessage{ID: int64(i + 1), Content: "m", At: t0.Add(at), Known: true})
	}
	led.convs = append(led.convs, c)
	return c
}

// The checks pass on a consistent state and fail, naming the message,
// on each way it can be wrong.
func TestCheckMessages(t *testing.T) {
	led := newLedger()
	c := testConversation(led)
	mem := uuid.New()
	s := &snapshot{messages: map[int64]msgRow{
		1: {c.ID, true, &mem}, 2: {c.ID, true, &mem}, 3: {c.ID, true, &mem}, 4: {c.ID, false, nil}}}
	s.episodes = []episodeRow{{mem, c.ID, []int64{1, 2}}, {uuid.New(), c.ID, []int64{3}}}
	iv := checkMessages(s, led, []*conversation{c})
	require.True(t, iv.Pass, iv.Examples)
	require.Equal(t, 4, iv.Checked)

	// lost: consumed without an episode
	s.episodes = s.episodes[:1]
	iv = checkMessages(s, led, []*conversation{c})
	require.False(t, iv.Pass)
	require.Contains(t, iv.Examples[0], "message 3")
	require.Contains(t, iv.Examples[0], "lost")
	// lost: gone without an erase; erased with its episode: fine
	s.episodes = append(s.episodes, episodeRow{uuid.New(), c.ID, []int64{3}})
	delete(s.messages, 3)
	require.False(t, checkMessages(s, led, []*conversation{c}).Pass)
	led.erasedMessages[3] = true
	require.True(t, checkMessages(s, led, []*conversation{c}).Pass)
	// duplicated: two episodes; a row nobody sent
	s.episodes = append(s.episodes, episodeRow{uuid.New(), c.ID, []int64{2}})
	iv = checkMessages(s, led, []*conversation{c})
	require.False(t, iv.Pass)
	require.Contains(t, iv.Examples[0], "in 2 episodes")
	s.episodes = s.episodes[:2]
	s.messages[99] = msgRow{Conversation: c.ID}
	iv = checkMessages(s, led, []*conversation{c})
	require.False(t, iv.Pass)
	require.Contains(t, iv.Examples[0], "never sent")
}

func TestCheckGapsAndReference(t *testing.T) {
	led := newLedger()
	c := testConversation(led)
	kept := []*conversation{c}
	good, _ := positions(c, [][]int64{{3, 4}, {1, 2}})
	require.Equal(t, []span{{0, 1}, {2, 3}}, good, "sorted by position")
	bad, _ := positions(c, [][]int64{{1, 2, 3}, {4}})
	live, ref := map[uuid.UUID][]span{c.ID: good}, map[uuid.UUID][]span{c.ID: good}
	require.True(t, checkGaps(live, ref, kept, 3*time.Second).Pass)
	require.True(t, checkReference(live, ref, kept).Pass)

	iv := checkGaps(map[uuid.UUID][]span{c.ID: bad}, ref, kept, 3*time.Second)
	require.False(t, iv.Pass)
	require.Contains(t, iv.Examples[0], "holds #1 and #2, 10s apart")
	require.True(t, checkGaps(map[uuid.UUID][]span{c.ID: bad}, ref, kept, 10*time.Second).Pass, "10 s is not further apart than 10 s")
	iv = checkReference(map[uuid.UUID][]span{c.ID: bad}, ref, kept)
	require.False(t, iv.Pass)
	require.Contains(t, iv.Detail, "0 of 1 conversations equal")
	require.Contains(t, iv.Examples[0], "live 0-2 3-3, drained 0-1 2-3")

	// not contiguous: never equal to a real span
	holes, _ := positions(c, [][]int64{{1, 3}})
	require.Equal(t, span{1, 0}, holes[0])
}

func TestCheckReviewsAndErased(t *testing.T) {
	led := newLedger()
	c := testConversation(led)
	kept, gone := uuid.New(), uuid.New()
	led.addRetrieval(retrieval{Conversation: c, Query: "q1 zqhhhhhhhhh", MemoryIDs: []uuid.UUID{kept}})
	led.addRetrieval(retrieval{Conversation: c, Query: "q2 zqkkkkkkkkk", MemoryIDs: []uuid.UUID{kept, gone}})
	led.addRetrieval(retrieval{Conversation: c, Query: "q3"})
	led.addErased(nil, gone, nil, [2]time.Time{})
	led.plant("zqhhhhhhhhh", &planted{Kind: "remember", Conversation: c})
	led.plant("zqkkkkkkkkk", &planted{Kind: "remember", Conversation: c})
	s := &snapshot{tombstones: map[uuid.UUID]bool{}, pendingQueries: map[string]int{"q1 zqhhhhhhhhh": 1},
		jobQueries: map[string]int{}, markersFound: map[string][]string{"zqhhhhh": {"message_queue"}}}
	iv := checkReviews(s, led)
	require.True(t, iv.Pass, iv.Examples)
	require.True(t, checkErased(s, led).Pass, "a marker quoted by a query that stays may stay")
	s.markersFound["zqhhhhh"] = []string{"message_queue", "memories"}
	iv = checkErased(s, led)
	require.False(t, iv.Pass, "... where queries go, not in a memory")
	require.Contains(t, iv.Examples[0], "zqhhhhhhhhh (planted in a remember) is still in memories")
	s.markersFound["zqhhhhh"] = []string{"message_queue"}

	s.jobQueries["q1 zqhhhhhhhhh"] = 1 // taken twice
	s.jobQueries["q2 zqkkkkkkkkk"] = 1 // kept although it returned an erased memory
	s.markersFound["zqkkkkk"] = []string{"jobs"}
	iv = checkReviews(s, led)
	require.Equal(t, 2, iv.Failed, iv.Examples)
	iv = checkErased(s, led)
	require.False(t, iv.Pass)
	require.Contains(t, iv.Examples[0], "zqkkkkkkkkk (planted in a remember) is still in jobs")
}

func TestCheckJobs(t *testing.T) {
	now := time.Now()
	msg := "boom"
	later := now.Add(time.Hour)
	s := &snapshot{now: now, jobs: []jobRow{{ID: 1, Kind: "segment", State: "done"}, {ID: 2, Kind: "review", State: "failed", LastError: &msg},
		{ID: 3, Kind: "cleanup", State: "pending", RunAt: later}}}
	require.True(t, checkJobs(s).Pass)
	past := now.Add(-time.Minute)
	s.jobs = append(s.jobs, jobRow{ID: 4, Kind: "segment", State: "running", LockedUntil: &past},
		jobRow{ID: 5, Kind: "segment", State: "failed"}, jobRow{ID: 6, Kind: "segment", State: "pending", RunAt: later})
	iv := checkJobs(s)
	require.Equal(t, 3, iv.Failed)
	require.Contains(t, iv.Examples[0], "running past its lease")
	require.Contains(t, iv.Examples[1], "failed without an error")
	require.Contains(t, iv.Examples[2], "waits for a retry")
}

// A review kept although its retrieval returned an erased memory says
// whether the erase ran while the retrieval did.
func TestRaceNote(t *testing.T) {
	led := newLedger()
	c := testConversation(led)
	x := uuid.New()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	r := retrieval{Conversation: c, Query: "q", MemoryIDs: []uuid.UUID{uuid.New(), x}, Start: t0, End: t0.Add(10 * time.Millisecond)}
	led.addErased(nil, x, nil, [2]time.Time{t0.Add(5 * time.Millisecond), t0.Add(20 * time.Millisecond)})
	require.Contains(t, raceNote(r, led), "the retrieve/erase race")
	led.addErased(nil, x, nil, [2]time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)})
	require.Contains(t, raceNote(r, led), "after the retrieval returned (the erase missed its committed review)")
	led.addErased(nil, x, nil, [2]time.Time{t0.Add(-time.Second), t0.Add(-500 * time.Millisecond)})
	require.Contains(t, raceNote(r, led), "before the retrieval started")

	s := &snapshot{tombstones: map[uuid.UUID]bool{}, pendingQueries: map[string]int{}, jobQueries: map[string]int{"q": 1}}
	led.addRetrieval(r)
	iv := checkReviews(s, led)
	require.False(t, iv.Pass)
	require.Contains(t, iv.Examples[0], "before the retrieval started")
}
