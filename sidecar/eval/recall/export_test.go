package recall

// The run's steps, for the tests of package recall_test (which read the
// LoCoMo reader's test data, and so cannot be in package recall).
var (
	Ingest       = ingest
	LoadMemories = loadMemories
)
