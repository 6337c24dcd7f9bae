package revision

import (
	"fmt"
	"io"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// Score is one action's: how many writes were labelled with it, how many
// got it applied, how many of those were right (the action and, but for
// ADD, the target: the labelled write or one that stands for it), and
// precision and recall from these.
type Score struct {
	Action      string  `json:"action"`
	Expected    int     `json:"expected"`
	Applied     int     `json:"applied"`
	Correct     int     `json:"correct"`
	WrongTarget int     `json:"wrong_target"` // the right action on another fact
	Precision   float64 `json:"precision"`
	Recall      float64 `json:"recall"`
}

// WriteOutcome is a write the classifier got wrong.
type WriteOutcome struct {
	Conversation string `json:"conversation"`
	Key          string `json:"key"`
	Text         string `json:"text"`
	Expected     string `json:"expected"`
	Target       string `json:"target,omitempty"`
	Applied      string `json:"applied"`
	AppliedOn    string `json:"applied_on,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// QuestionOutcome is a question whose current value was not first.
type QuestionOutcome struct {
	Conversation string `json:"conversation"`
	Query        string `json:"query"`
	Current      string `json:"current"`
	First        string `json:"first"` // the text returned first ("" for nothing)
	Stale        bool   `json:"stale"`
}

// Final compares the status each write ended in with the one its labels
// give: current beliefs kept, current beliefs wrongly retired (what mem0's
// old update step did), and stale beliefs left active (what an ADD-only
// pipeline does).
type Final struct {
	Writes         int `json:"writes"`
	Right          int `json:"right"`
	WantActive     int `json:"want_active"`
	WronglyRetired int `json:"wrongly_retired"`
	WantRetired    int `json:"want_retired"`
	StaleActive    int `json:"stale_active"`
}

// Report is the suite's result in one mode.
type Report struct {
	Mode          string                    `json:"mode"`
	Conversations int                       `json:"conversations"`
	Writes        int                       `json:"writes"`
	Questions     int                       `json:"questions"`
	K             int                       `json:"k"`
	Accuracy      float64                   `json:"accuracy"` // share of writes with the right action and target
	Scores        []Score                   `json:"scores"`
	Confusion     map[string]map[string]int `json:"confusion"` // labelled -> applied
	CurrentFirst  float64                   `json:"current_first"`
	StaleFirst    float64                   `json:"stale_first"`
	CurrentInTopK float64                   `json:"current_in_top_k"`
	Final         Final                     `json:"final"`
	FailedJobs    int                       `json:"failed_jobs"`
	PendingJobs   int                       `json:"pending_jobs"`
	WrongWrites   []WriteOutcome            `json:"wrong_writes"`
	Missed        []QuestionOutcome         `json:"missed_questions"`

	CrossValidation *recall.CrossValidation `json:"cross_validation,omitempty"` // with --folds

	// Contradictions: the contradiction suite, before and after consolidation.
	Contradictions *ContradictionReport `json:"contradictions,omitempty"`

	correct, first, stale, topK int
	outcomes                    map[string]outcome // "conversation/key"
	perConv                     map[string][2]int  // conversation -> right writes, writes
}

// outcome is what one write became (the action applied, the status it
// ended in) and whether that was right.
type outcome struct {
	applied string
	status  string
	right   bool
}

func newReport() *Report {
	r := &Report{K: K, Confusion: map[string]map[string]int{}, outcomes: map[string]outcome{}, perConv: map[string][2]int{}}
	for _, a := range Actions {
		r.Scores = append(r.Scores, Score{Action: a})
		r.Confusion[a] = map[string]int{}
	}
	return r
}

func (r *Report) score(action string) *Score {
	for i := range r.Scores {
		if r.Scores[i].Action == action {
			return &r.Scores[i]
		}
	}
	return nil
}

// add scores one conversation.
func (r *Report) add(c *Conversation, res convResult) {
	l := newLabels(c)
	r.Conversations++
	want := l.wantStatus()
	for i, w := range c.Writes {
		a := res.applied[i]
		r.Writes++
		r.Confusion[w.Expect][a.action]++
		r.score(w.Expect).Expected++
		if s := r.score(a.action); s != nil {
			s.Applied++
		}
		appliedOn := res.keyOf[a.target]
		ok := a.action == w.Expect
		if ok && w.Expect != revision.ActionAdd && l.canon(appliedOn) != l.canon(w.Target) {
			ok = false
			r.score(w.Expect).WrongTarget++
		}
		r.outcomes[c.Name+"/"+w.Key] = outcome{applied: a.action, status: a.status, right: ok}
		pc := r.perConv[c.Name]
		pc[1]++
		if ok {
			pc[0]++
		}
		r.perConv[c.Name] = pc
		if ok {
			r.correct++
			r.score(w.Expect).Correct++
		} else {
			r.WrongWrites = append(r.WrongWrites, WriteOutcome{Conversation: c.Name, Key: w.Key, Text: w.Text,
				Expected: w.Expect, Target: w.Target, Applied: a.action, AppliedOn: appliedOn, Reason: a.reason})
		}
		r.Final.Writes++
		if a.status == want[i] {
			r.Final.Right++
		}
		if want[i] == "active" {
			r.Final.WantActive++
			if a.status != "active" {
				r.Final.WronglyRetired++
			}
		} else {
			r.Final.WantRetired++
			if a.status == "active" {
				r.Final.StaleActive++
			}
		}
	}
	for qi, qu := range c.Questions {
		r.Questions++
		got := res.answered[qi]
		cur := l.canon(qu.Current)
		stale := l.stale(qu.Current)
		if len(got) > 0 && got[0] != "" && l.canon(got[0]) == cur {
			r.first++
		} else {
			o := QuestionOutcome{Conversation: c.Name, Query: qu.Query, Current: c.Writes[l.index[qu.Current]].Text}
			if len(got) > 0 && got[0] != "" {
				o.First = c.Writes[l.index[got[0]]].Text
				o.Stale = stale[got[0]]
			}
			if o.Stale {
				r.stale++
			}
			r.Missed = append(r.Missed, o)
		}
		for _, k := range got {
			if k != "" && l.canon(k) == cur {
				r.topK++
				break
			}
		}
	}
}

func (r *Report) finish() {
	r.Accuracy = ratio(r.correct, r.Writes)
	for i := range r.Scores {
		s := &r.Scores[i]
		s.Precision, s.Recall = ratio(s.Correct, s.Applied), ratio(s.Correct, s.Expected)
	}
	r.CurrentFirst, r.StaleFirst, r.CurrentInTopK = ratio(r.first, r.Questions), ratio(r.stale, r.Questions), ratio(r.topK, r.Questions)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// WriteTable prints the report: per action precision and recall, the
// confusion matrix, the questions, the final states, and every write and question that went wrong.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "revision suite, %s: %d conversations, %d writes, %d questions (mneme.search k=%d)\n",
		r.Mode, r.Conversations, r.Writes, r.Questions, r.K)
	fmt.Fprintf(w, "\nper action (correct = the labelled action on the labelled fact); accuracy %.3f\n", r.Accuracy)
	fmt.Fprintf(w, "  %-11s %8s %8s %8s %12s %10s %8s\n", "action", "labelled", "applied", "correct", "wrong target", "precision", "recall")
	for _, s := range r.Scores {
		fmt.Fprintf(w, "  %-11s %8d %8d %8d %12d %10.3f %8.3f\n", s.Action, s.Expected, s.Applied, s.Correct, s.WrongTarget, s.Precision, s.Recall)
	}
	fmt.Fprintf(w, "\nconfusion (rows labelled, columns applied)\n  %-11s", "")
	cols := append(append([]string{}, Actions...), None)
	for _, c := range cols {
		fmt.Fprintf(w, " %10s", c)
	}
	fmt.Fprintln(w)
	for _, a := range Actions {
		fmt.Fprintf(w, "  %-11s", a)
		for _, c := range cols {
			fmt.Fprintf(w, " %10d", r.Confusion[a][c])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nquestions: current value first %.3f, a stale value first %.3f, current in top %d %.3f\n",
		r.CurrentFirst, r.StaleFirst, r.K, r.CurrentInTopK)
	f := r.Final
	fmt.Fprintf(w, "final states: %d of %d as labelled; current beliefs wrongly retired %d of %d; stale beliefs left active %d of %d\n",
		f.Right, f.Writes, f.WronglyRetired, f.WantActive, f.StaleActive, f.WantRetired)
	fmt.Fprintf(w, "revise jobs failed %d, left pending %d\n", r.FailedJobs, r.PendingJobs)
	if cv := r.CrossValidation; cv != nil {
		fmt.Fprintf(w, "\ncross-validated accuracy (%d folds of the conversations, settings chosen on the other folds): %.3f "+
			"(best candidate in hindsight %.3f; the table above is the shipped settings)\n", cv.Folds, cv.Recall[0].Recall, cv.Best[0].Recall)
		for _, c := range cv.Candidates {
			fmt.Fprintf(w, "  %-44s %.3f\n", c, cv.PerCand[c][0])
		}
		for _, f := range cv.Chosen {
			fmt.Fprintf(w, "  fold %d (%d conversations): chose %s (%.3f on the other folds)\n", f.Fold, len(f.Conversations), f.Candidate, f.TrainRecall)
		}
	}
	if r.Contradictions != nil {
		r.Contradictions.WriteTable(w)
	}
	if len(r.WrongWrites) > 0 {
		fmt.Fprintf(w, "\nwrites revised otherwise than labelled (%d)\n", len(r.WrongWrites))
		for _, o := range r.WrongWrites {
			want := o.Expected
			if o.Target != "" {
				want += " " + o.Target
			}
			got := o.Applied
			if o.AppliedOn != "" {
				got += " " + o.AppliedOn
			}
			fmt.Fprintf(w, "  %-30s %-12s %-22s got %-22s %q\n", clip.String(o.Conversation, 30), o.Key, want, got, o.Text)
		}
	}
	if len(r.Missed) > 0 {
		fmt.Fprintf(w, "\nquestions whose current value was not first (%d)\n", len(r.Missed))
		for _, m := range r.Missed {
			tag := ""
			if m.Stale {
				tag = " (stale)"
			}
			fmt.Fprintf(w, "  %-36q want %q, first %q%s\n", m.Query, m.Current, m.First, tag)
		}
	}
	return nil
}
