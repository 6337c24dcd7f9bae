package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Where a CPU-bound benchmark's time goes: CPU seconds of the server's
// processes, told apart by what pg_stat_activity says they serve, and of
// this process (the writers and sidecars of bench ingest are goroutines
// here), read from /proc. Only when the server runs on this machine (its
// backend's pid is a postgres process here); otherwise nothing is reported.

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times (100
// on every architecture Go builds mneme for; sysconf is not reachable
// without cgo).
const clockTicks = 100

// CPUShare is one class of processes over a measured span.
type CPUShare struct {
	Class string  `json:"class"`
	Cores float64 `json:"cores"` // CPU seconds / wall seconds: cores kept busy on average
}

// CPUReport is where the CPU went over a span.
type CPUReport struct {
	Seconds float64 `json:"wall_seconds"`
	// MachineCores: the machine's cores busy on average (/proc/stat), of
	// Cores in all.
	MachineCores float64    `json:"machine_busy_cores"`
	Cores        int        `json:"machine_cores"`
	Shares       []CPUShare `json:"by_class"`
}

// serverProcess is what pg_stat_activity says of a server process.
type serverProcess struct {
	User, App, BackendType, Database string
}

// cpuClassifier sorts the server's processes into classes.
type cpuClassifier func(serverProcess) string

// cpuSnapshot is the CPU seconds used so far by each process, the
// machine's busy and total jiffies, and this process's CPU seconds.
type cpuSnapshot struct {
	at          time.Time
	procs       map[int]float64
	class       map[int]string
	busy, total float64
	self        float64
}

// cpuProbe reads snapshots of the server's processes through pool.
type cpuProbe struct {
	pool     *pgxpool.Pool
	classify cpuClassifier
}

// newCPUProbe returns a probe, or nil when the server's processes are not
// readable here (the server runs elsewhere).
func newCPUProbe(ctx context.Context, pool *pgxpool.Pool, classify cpuClassifier) *cpuProbe {
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return nil
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || !strings.HasPrefix(string(comm), "postgres") {
		return nil
	}
	return &cpuProbe{pool: pool, classify: classify}
}

func (p *cpuProbe) snapshot(ctx context.Context) (cpuSnapshot, error) {
	s := cpuSnapshot{at: time.Now(), procs: map[int]float64{}, class: map[int]string{}}
	rows, err := p.pool.Query(ctx, `SELECT pid, coalesce(usename::text, ''), coalesce(application_name, ''), coalesce(backend_type, ''),
		coalesce(datname::text, '') FROM pg_stat_activity`)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var pid int
		var sp serverProcess
		if err := rows.Scan(&pid, &sp.User, &sp.App, &sp.BackendType, &sp.Database); err != nil {
			rows.Close()
			return s, err
		}
		s.class[pid] = p.classify(sp)
	}
	if err := rows.Err(); err != nil {
		return s, err
	}
	for pid := range s.class {
		if t, ok := procCPU(pid); ok {
			s.procs[pid] = t
		}
	}
	s.busy, s.total = machineJiffies()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.self = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	return s, nil
}

// report is the CPU used between two snapshots by class; a process that
// started in between counts whole, one that ended is lost.
func (p *cpuProbe) report(a, b cpuSnapshot, self string) CPUReport {
	wall := b.at.Sub(a.at).Seconds()
	r := CPUReport{Seconds: round2(wall), Cores: runtime.NumCPU()}
	if b.total > a.total {
		r.MachineCores = round2((b.busy - a.busy) / (b.total - a.total) * float64(r.Cores))
	}
	by := map[string]float64{}
	var order []string
	add := func(class string, secs float64) {
		if _, ok := by[class]; !ok {
			order = append(order, class)
		}
		by[class] += secs
	}
	for pid, t := range b.procs {
		add(b.class[pid], t-a.procs[pid])
	}
	add(self, b.self-a.self)
	for _, c := range order {
		r.Shares = append(r.Shares, CPUShare{Class: c, Cores: round2(by[c] / wall)})
	}
	sort.SliceStable(r.Shares, func(i, j int) bool { return r.Shares[i].Cores > r.Shares[j].Cores })
	return r
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// procCPU is a process's user + system CPU seconds so far.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state is field 3, utime 14 and stime 15.
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (u + s) / clockTicks, true
}

// machineJiffies is the machine's busy and total CPU time so far.
func machineJiffies() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		if i >= 8 { // guest times are counted in user already
			break
		}
		total += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy, total
}
