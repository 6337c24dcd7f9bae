// Command testreport reads `go test -json` on its standard input and
// prints what a person needs of it: each package's result line, the whole
// output of every test that failed, build errors, and a closing line
//
//	LABEL: N passed, N failed, N skipped
//
// counting top-level tests (subtests are part of their test). It exits 1
// when a test or a package failed, or the stream held no test at all.
// scripts/test.sh runs it once per deployment (docs/tests.md).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

type counts struct{ passed, failed, skipped int }

func main() {
	label := flag.String("label", "tests", "the word before the closing line's counts")
	flag.Parse()
	c, failed, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", *label, c.passed, c.failed, c.skipped)
	if failed || c.passed+c.failed == 0 {
		os.Exit(1)
	}
}

// report copies the stream's results to out and counts the tests; failed
// is true when anything failed, a package or a build included.
func report(in io.Reader, out io.Writer) (c counts, failed bool, err error) {
	buffered := map[string]*strings.Builder{} // package + test -> its output so far
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintln(out, string(line)) // not an event: go's own message
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "":
			switch e.Action {
			case "output":
				if o := strings.TrimSpace(e.Output); o != "PASS" && o != "FAIL" && !strings.HasPrefix(o, "===") {
					fmt.Fprint(out, e.Output)
				}
			case "fail":
				failed = true
			}
		default:
			key := e.Package + " " + e.Test
			top := !strings.Contains(e.Test, "/")
			switch e.Action {
			case "output":
				// Only a top-level test's buffer: a subtest's lines are
				// reported under its test as well.
				name := e.Package + " " + strings.SplitN(e.Test, "/", 2)[0]
				b := buffered[name]
				if b == nil {
					b = &strings.Builder{}
					buffered[name] = b
				}
				b.WriteString(e.Output)
			case "pass", "skip":
				if top {
					if e.Action == "pass" {
						c.passed++
					} else {
						c.skipped++
					}
					delete(buffered, key)
				}
			case "fail":
				if top {
					c.failed++
					failed = true
					if b := buffered[key]; b != nil {
						fmt.Fprintf(out, "=== %s %s\n%s", e.Package, e.Test, b.String())
					}
					delete(buffered, key)
				}
			}
		}
	}
	return c, failed, sc.Err()
}
