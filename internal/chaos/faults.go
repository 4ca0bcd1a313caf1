//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// injector starts the workers and injects the faults of one phase.
type injector struct {
	h        *harness
	p        plan
	fake     *fake
	api      *api
	pg       *cluster // nil: no PostgreSQL restart
	database string
	cfg      string
	owners   map[string]string // token, as the fake records it → recipient

	start  time.Time // when the faults began
	clocks *clocks   // the clock scenario; nil in the others
	disk   *disk     // the disk scenario; nil in the others

	mu          sync.Mutex
	rng         *rand.Rand
	slots       []*slot
	faults      []Fault
	workers     []*proc // every worker process started, for their logs
	harnErr     []Violation
	stopFor     time.Duration
	stopStalled bool // the stopped worker held every other process up
	pgDown      time.Duration
	// refusedStarts counts worker starts that exited at once, their
	// database unreachable (a PostgreSQL restart).
	refusedStarts int
	*scenarioState
}

// restartWait bounds how long the harness starts a process again while its
// database is down.
const restartWait = 2 * time.Minute

// slot is one of the N worker processes; a killed one is started again in
// its slot.
type slot struct {
	name string
	proc *proc
	busy bool // stopped, or being killed and started again: not a victim
}

// victimWait bounds the wait for a worker with requests held at the fake.
const victimWait = 5 * time.Second

// startWorker starts (or starts again) the worker of slot i and waits until
// it is working. A worker refuses to start while its database is down
// ('work' exits 1 when it cannot reach it, for its supervisor to start it
// again): during a PostgreSQL restart the harness is that supervisor, and
// tries again for up to restartWait.
func (inj *injector) startWorker(ctx context.Context, i int) error {
	name := fmt.Sprintf("%s-worker-%d", inj.p.driver, i)
	var p *proc
	for deadline := time.Now().Add(restartWait); ; {
		var err error
		if p, err = inj.h.ps.start(name, inj.h.bin, []string{"work", "--database", inj.workerDatabase(), "--config", inj.cfg, "--log-format", "json"}, nil); err != nil {
			return err
		}
		_, err = p.waitFor(ctx, p.Stderr, "that it is working", 60*time.Second, func(s string) (string, bool) {
			return "", strings.Contains(s, `"msg":"oncepush working"`)
		})
		if err == nil {
			break
		}
		if !p.Exited() || time.Now().After(deadline) {
			return err
		}
		inj.mu.Lock()
		inj.refusedStarts++
		inj.mu.Unlock()
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	for len(inj.slots) <= i {
		inj.slots = append(inj.slots, &slot{})
	}
	inj.slots[i].name, inj.slots[i].proc, inj.slots[i].busy = name, p, false
	inj.workers = append(inj.workers, p)
	return nil
}

// run injects faults until the chaos is over: the plan's time has passed
// and its targets are met, or twice the time has passed.
func (inj *injector) run(ctx context.Context, w *workload) error {
	start := time.Now()
	inj.start = start
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	goFault := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && fctx.Err() == nil {
				errs <- err
				stop()
			}
		}()
	}
	at := func(frac float64) time.Time { return start.Add(time.Duration(float64(inj.p.chaos) * frac)) }

	goFault(func() error { // worker kills, one every killEvery
		for inj.p.killEvery > 0 {
			if err := sleep(fctx, inj.p.killEvery); err != nil {
				return nil
			}
			if err := inj.revive(fctx); err != nil {
				return err
			}
			if err := inj.killWorker(fctx); err != nil {
				return err
			}
		}
		return nil
	})
	goFault(func() error { return inj.runScenario(fctx, start) })
	if inj.clocks != nil {
		goFault(func() error { return inj.stepClocks(fctx) })
	}
	if inj.disk != nil {
		goFault(func() error { return inj.fillCycles(fctx) })
	}
	for i := range inj.p.stops {
		goFault(func() error {
			if err := sleepUntil(fctx, at(float64(i+1)/float64(inj.p.stops+1)-0.1)); err != nil {
				return nil
			}
			return inj.stopWorker(fctx)
		})
	}
	for i := range inj.p.apiKills {
		goFault(func() error {
			if err := sleepUntil(fctx, at(float64(i+1)/float64(inj.p.apiKills+1))); err != nil {
				return nil
			}
			return inj.killAPI(fctx)
		})
	}
	for i := range inj.p.pgRestarts {
		goFault(func() error {
			if err := sleepUntil(fctx, at(float64(i+1)/float64(inj.p.pgRestarts+1)+0.05)); err != nil {
				return nil
			}
			return inj.restartPostgres(fctx)
		})
	}

	// Awaited: the plan's time, and its targets (sends, kills) or its limit.
	var err error
	for {
		elapsed := time.Since(start)
		met := int(w.requests.Load()) >= inj.p.minSends && inj.count(faultKill) >= inj.p.minKills
		if elapsed >= inj.p.maxChaos || (elapsed >= inj.p.chaos && met) {
			break
		}
		select {
		case err = <-errs:
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			break
		}
	}
	stop()
	wg.Wait()
	return err
}

// victim waits until the fake holds requests of a worker that is not busy,
// and picks one such worker: a kill or stop then lands with requests in
// flight. It returns the worker and the requests the fake holds for it, or
// nil if no worker had any within victimWait.
func (inj *injector) victim(ctx context.Context) (*slot, []Receipt, error) {
	deadline := time.Now().Add(victimWait)
	for {
		held, err := inj.fake.held(ctx)
		if err != nil {
			return nil, nil, err
		}
		inj.mu.Lock()
		bySlot := map[int]*slot{}
		var pids []int
		for _, s := range inj.slots {
			if !s.busy && !s.proc.Exited() {
				bySlot[s.proc.Pid()] = s
				pids = append(pids, s.proc.Pid())
			}
		}
		inj.mu.Unlock()
		owners := socketOwners(pids)
		perSlot := map[*slot][]Receipt{}
		for _, r := range held {
			_, port, _ := net.SplitHostPort(r.RemoteAddr)
			n, _ := strconv.Atoi(port)
			pid, ok := owners[n]
			if owners == nil && len(pids) > 0 { // no /proc: any worker may be the one
				pid, ok = pids[0], true
			}
			if s := bySlot[pid]; ok && s != nil {
				perSlot[s] = append(perSlot[s], r)
			}
		}
		if s := inj.pick(perSlot); s != nil {
			return s, perSlot[s], nil
		}
		if time.Now().After(deadline) {
			return nil, nil, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
}

// pick chooses, at random, one of the workers that are not busy and have
// requests held, and marks it busy.
func (inj *injector) pick(perSlot map[*slot][]Receipt) *slot {
	return inj.pickWhere(func(s *slot) bool { return perSlot[s] != nil })
}

// pickWhere picks, at random, a worker that is not busy and for which ok
// holds, and marks it busy; nil if there is none.
func (inj *injector) pickWhere(ok func(*slot) bool) *slot {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	var cands []*slot
	for _, s := range inj.slots { // in slot order, for the seed
		if !s.busy && ok(s) {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	s := cands[inj.rng.IntN(len(cands))]
	s.busy = true
	return s
}

// killWorker SIGKILLs a worker while the fake holds its requests, and
// starts it again.
func (inj *injector) killWorker(ctx context.Context) error {
	s, held, err := inj.victim(ctx)
	if err != nil || s == nil {
		return err
	}
	if err := inj.checkAlive(s); err != nil {
		return err
	}
	inj.record(Fault{Kind: faultKill, At: time.Now(), Target: s.proc.String(), Held: perTransport(held)})
	if err := s.proc.Kill(); err != nil {
		return err
	}
	i := inj.slotIndex(s)
	return inj.startWorker(context.WithoutCancel(ctx), i)
}

// stopWorker SIGSTOPs a worker while the fake holds its requests, for
// longer than its lease, so that other runs recover its deliveries while
// it cannot know; then SIGCONTs it.
func (inj *injector) stopWorker(ctx context.Context) error {
	s, held, err := inj.victim(ctx)
	if err != nil || s == nil {
		return err
	}
	inj.record(Fault{Kind: faultStop, At: time.Now(), Target: s.proc.String(), Held: perTransport(held)})
	if err := s.proc.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stopped := time.Now()
	// At least the lease and two seconds: what is being tested is a worker
	// that wakes after its lease expired. Then, awaited (at most
	// stopRecoveryWait more): the ledger showing that another run took over
	// one of the pairs the fake held for the stopped one (no longer
	// "sending"), so that its work was recovered while it could not know.
	wctx := context.WithoutCancel(ctx)
	_ = sleep(wctx, engineLease+2*time.Second)
	stalled, err := inj.awaitRecovered(wctx, held, stopped.Add(engineLease+stopRecoveryWait))
	if err != nil {
		_ = s.proc.Signal(syscall.SIGCONT)
		return err
	}
	err = s.proc.Signal(syscall.SIGCONT)
	if inj.h.o.verbose {
		fmt.Printf("chaos: %s: SIGCONT %s at %s, stalled %v\n", inj.p.driver, s.proc, time.Now().UTC().Format("15:04:05.000000"), stalled)
	}
	inj.mu.Lock()
	inj.stopFor, inj.stopStalled = time.Since(stopped), stalled
	s.busy = false
	inj.mu.Unlock()
	return err
}

// stopRecoveryWait bounds how long past its lease a worker stays stopped
// while the harness waits for its work to be sent by another.
const stopRecoveryWait = 20 * time.Second

// stallQuiet is how long no request at all reaches the fake before the
// harness takes a stopped worker to be holding everyone up: stopped inside
// a SQLite write transaction, it holds the file's write lock, and no other
// process can claim or record until it runs again.
const stallQuiet = 3 * time.Second

// awaitRecovered polls the ledger of held's pairs until one of them is no
// longer "sending" (another run recovered it), or until the deadline, or
// until no request at all has reached the fake for stallQuiet (it then
// reports the stall: nobody can recover anything).
func (inj *injector) awaitRecovered(ctx context.Context, held []Receipt, deadline time.Time) (stalled bool, err error) {
	st, err := inj.fake.stats(ctx)
	if err != nil {
		return false, err
	}
	received, lastArrival := st.Received, time.Now()
	for time.Now().Before(deadline) {
		for _, r := range held {
			recipient := inj.owners[r.Token]
			ds, err := inj.api.recipientDeliveries(ctx, recipient)
			if err != nil {
				return false, err
			}
			for _, d := range ds {
				if d.OncepushID != r.NotificationID {
					continue
				}
				for _, at := range d.Devices {
					if at.Transport == r.Transport && at.State != "sending" {
						return false, nil
					}
				}
			}
		}
		if st, err = inj.fake.stats(ctx); err != nil {
			return false, err
		}
		if st.Received != received {
			received, lastArrival = st.Received, time.Now()
		} else if time.Since(lastArrival) > stallQuiet {
			return true, nil
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return false, err
		}
	}
	return false, nil
}

// perTransport counts receipts per transport.
func perTransport(rs []Receipt) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.Transport]++
	}
	return m
}

// killAPI SIGKILLs the API while a POST is in flight, and starts it again.
func (inj *injector) killAPI(ctx context.Context) error {
	deadline := time.Now().Add(victimWait)
	for inj.api.inFlight.Load() == 0 { // awaited: a notification POST in flight
		if time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return nil
		}
	}
	p := inj.api.proc.Load()
	if p.Exited() {
		inj.harnessViolation("api exited on its own", fmt.Sprintf("%s exited %d; its log: %s", p, p.exitCode(), p.logPath))
	}
	inj.record(Fault{Kind: faultAPIKill, At: time.Now(), Target: p.String(),
		Held: map[string]int{"posts": int(inj.api.inFlight.Load())}})
	if err := p.Kill(); err != nil {
		return err
	}
	return inj.api.restart(context.WithoutCancel(ctx))
}

// restartPostgres crash-restarts the private cluster, and kills a worker
// while it is down: started again, that worker must wait for its database.
func (inj *injector) restartPostgres(ctx context.Context) error {
	wctx := context.WithoutCancel(ctx)
	start := time.Now()
	inj.record(Fault{Kind: faultPGRestart, At: start, Target: "postgres"})
	if err := inj.pg.crash(wctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var startErr error
	if s := inj.pickAny(); s != nil {
		inj.record(Fault{Kind: faultKill, At: time.Now(), Target: s.proc.String() + ", PostgreSQL down"})
		if err := s.proc.Kill(); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			startErr = inj.startWorker(wctx, inj.slotIndex(s))
		}()
	}
	err := inj.pg.start(wctx)
	inj.mu.Lock()
	inj.pgDown = time.Since(start)
	inj.mu.Unlock()
	wg.Wait()
	if err != nil {
		return err
	}
	return startErr
}

// pickAny picks, at random, a worker that is not busy, and marks it busy.
func (inj *injector) pickAny() *slot {
	return inj.pickWhere(func(s *slot) bool { return !s.proc.Exited() })
}

func (inj *injector) record(f Fault) {
	inj.mu.Lock()
	inj.faults = append(inj.faults, f)
	inj.mu.Unlock()
	if inj.h.o.verbose {
		fmt.Printf("chaos: %s: %s %s at %s (+%s), held %v\n", inj.p.driver, f.Kind, f.Target, f.At.UTC().Format("15:04:05.000000"),
			f.At.Sub(inj.start).Round(time.Millisecond), f.Held)
	}
}

func (inj *injector) count(kind string) int {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	n := 0
	for _, f := range inj.faults {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

func (inj *injector) faultList() []Fault {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	return append([]Fault(nil), inj.faults...)
}

func (inj *injector) slotIndex(s *slot) int {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	for i, x := range inj.slots {
		if x == s {
			return i
		}
	}
	return -1
}

func (inj *injector) harnessViolation(kind, detail string) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	inj.harnErr = append(inj.harnErr, Violation{Kind: kind, Detail: detail})
}

// slotsNow is a copy of the worker slots, taken under the lock.
func (inj *injector) slotsNow() []*slot {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	return append([]*slot(nil), inj.slots...)
}

// checkAlive notes a worker that ended without being killed: a crash of its own.
func (inj *injector) checkAlive(s *slot) error {
	if s.proc.Exited() {
		inj.harnessViolation("worker exited on its own", fmt.Sprintf("%s exited %d; its log: %s", s.proc, s.proc.exitCode(), s.proc.logPath))
	}
	return nil
}

// revive starts again, noting it, a worker that ended without being killed.
func (inj *injector) revive(ctx context.Context) error {
	slots := inj.slotsNow()
	for i, s := range slots {
		inj.mu.Lock()
		crashed := !s.busy && s.proc.Exited()
		inj.mu.Unlock()
		if crashed {
			_ = inj.checkAlive(s)
			if err := inj.startWorker(context.WithoutCancel(ctx), i); err != nil {
				return err
			}
		}
	}
	return nil
}

// allWorking makes sure that every worker runs once the faults are over (a
// worker that ended on its own is noted and started again) and that the API
// answers.
func (inj *injector) allWorking(ctx context.Context) error {
	slots := inj.slotsNow()
	for i, s := range slots {
		if s.proc.Exited() {
			_ = inj.checkAlive(s)
			if err := inj.startWorker(ctx, i); err != nil {
				return err
			}
		}
	}
	if p := inj.api.proc.Load(); p.Exited() {
		inj.harnessViolation("api exited on its own", fmt.Sprintf("%s exited %d; its log: %s", p, p.exitCode(), p.logPath))
		return inj.api.restart(ctx)
	}
	return nil
}

// stopWorkers sends SIGTERM to every worker: each must finish and exit 0.
func (inj *injector) stopWorkers() []Violation {
	slots := inj.slotsNow()
	for _, s := range slots {
		_ = s.proc.Signal(syscall.SIGTERM)
	}
	for _, s := range slots {
		if err := s.proc.Wait(45 * time.Second); err != nil {
			// SIGQUIT: Go writes every goroutine's stack to the log, to
			// show what held it.
			_ = s.proc.Signal(syscall.SIGQUIT)
			_ = s.proc.Wait(10 * time.Second)
			inj.harnessViolation("worker did not stop on SIGTERM", err.Error()+"; its goroutines (SIGQUIT) are in its log: "+s.proc.logPath)
			_ = s.proc.Kill()
			continue
		}
		if code := s.proc.exitCode(); code != 0 {
			inj.harnessViolation("worker exit code on SIGTERM", fmt.Sprintf("%s exited %d; its log: %s", s.proc, code, s.proc.logPath))
		}
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	return append([]Violation(nil), inj.harnErr...)
}

// killWorkers kills whatever workers are left (on an early return).
func (inj *injector) killWorkers() {
	slots := inj.slotsNow()
	for _, s := range slots {
		_ = s.proc.Signal(syscall.SIGCONT)
		_ = s.proc.Kill()
	}
}

// countLogLines counts the workers' log lines containing s.
func (inj *injector) countLogLines(s string) int {
	inj.mu.Lock()
	workers := append([]*proc(nil), inj.workers...)
	inj.mu.Unlock()
	n := 0
	for _, p := range workers {
		f, err := os.Open(p.logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), s) && json.Valid(sc.Bytes()) {
				n++
			}
		}
		f.Close()
	}
	return n
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	return sleep(ctx, time.Until(t))
}
