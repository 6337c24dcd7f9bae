package main

import (
	"strings"
	"testing"
)

// TestReport: top-level tests are counted (a subtest is its test's), a
// failed test's whole output is printed with its package, passing tests'
// output is not, package result lines and build errors are, and a failed
// package or build counts as a failure.
func TestReport(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"quiet line\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestB/sub","Output":"    b_test.go:9: want 1, got 2\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/sub"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (0.01s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"pass","Package":"p","Test":"TestD/sub"}`,
		`{"Action":"pass","Package":"p","Test":"TestD"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.02s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"ImportPath":"q","Action":"build-output","Output":"q/x.go:1: syntax error\n"}`,
		`{"ImportPath":"q","Action":"build-fail"}`,
		`go: warning: not json`,
	}, "\n")
	var out strings.Builder
	c, failed, err := report(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c != (counts{passed: 2, failed: 1, skipped: 1}) || !failed {
		t.Fatalf("counts %+v failed %v", c, failed)
	}
	got := out.String()
	for _, want := range []string{"=== p TestB\n", "want 1, got 2", "--- FAIL: TestB", "FAIL\tp\t0.02s", "q/x.go:1: syntax error", "go: warning: not json"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet line") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}

	c, failed, err = report(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}`+"\n"), &out)
	if err != nil || failed || c.passed != 1 {
		t.Fatalf("one passing test: %+v %v %v", c, failed, err)
	}
}
