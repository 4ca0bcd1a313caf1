package blackbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	// The binary is built from these sources: importing them makes go test's
	// cache see a change to any of them, which it would not through 'go build'.
	_ "github.com/oncepush/oncepush/internal/cli"
)

// Timeouts of the harness.
const (
	startTimeout = 30 * time.Second // a process prints what we wait for
	waitTimeout  = 30 * time.Second // deliveries reach their final state
	runTimeout   = 60 * time.Second // a one-shot command ends
)

// build compiles the oncepush command into a directory of the test (the
// parent of every test that runs it, so the binary outlives them all), with
// -race when the tests themselves run under the race detector.
func build(t *testing.T) string {
	t.Helper()
	var args []string
	if raceEnabled {
		args = append(args, "-race")
	}
	return buildWith(t, args...)
}

// buildWith compiles the oncepush command with extra go build flags.
func buildWith(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "oncepush")
	args := append([]string{"build", "-o", bin}, flags...)
	args = append(args, "github.com/oncepush/oncepush/cmd/oncepush")
	start := time.Now()
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built %s in %s (flags %v)", bin, time.Since(start).Round(time.Millisecond), flags)
	return bin
}

// output is a process's stdout or stderr, readable while it grows.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(b)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *output) snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String(), o.changed
}

// proc is a child process of the test. It is killed when the test ends, if
// it has not ended by then.
type proc struct {
	t              *testing.T
	name           string
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan struct{} // closed when the process has exited
	err            error         // Wait's result, once done
}

// start runs bin with args. The process is killed (and waited for) in
// t.Cleanup; its stderr is logged when the test failed, and a data race it
// reports fails the test.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, bin, nil, args...)
}

// startEnv is start with extra environment variables (KEY=value).
func startEnv(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: "oncepush " + args[0], stdout: newOutput(), stderr: newOutput(), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = childEnv(env)
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		stderr := p.stderr.String()
		if strings.Contains(stderr, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", p.name, stderr)
		} else if t.Failed() {
			t.Logf("%s (pid %d) stderr:\n%s", p.name, p.cmd.Process.Pid, tail(stderr, 6000))
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode waits up to d for the process to end and returns its exit code
// (-1 if a signal ended it); it fails the test if the process is still running.
func (p *proc) exitCode(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s still running after %s", p.name, d)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	default:
		p.t.Fatalf("%s: %v", p.name, p.err)
		return -1
	}
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// waitFor waits until match accepts what the process wrote to out, and
// returns what match extracted. The test fails if the process ends first or
// the time runs out.
func (p *proc) waitFor(out *output, what string, match func(string) (string, bool)) string {
	p.t.Helper()
	timeout := time.After(startTimeout)
	for {
		s, changed := out.snapshot()
		if v, ok := match(s); ok {
			return v
		}
		select {
		case <-changed:
		case <-p.done:
			s := out.String()
			if v, ok := match(s); ok {
				return v
			}
			p.t.Fatalf("%s exited (%v) before printing %s\nstdout:\n%s\nstderr:\n%s", p.name, p.err, what,
				tail(p.stdout.String(), 3000), tail(p.stderr.String(), 3000))
		case <-timeout:
			p.t.Fatalf("%s printed no %s in %s\nstdout:\n%s\nstderr:\n%s", p.name, what, startTimeout,
				tail(p.stdout.String(), 3000), tail(p.stderr.String(), 3000))
		}
	}
}

// result is what a one-shot command did.
type result struct {
	code           int
	stdout, stderr string
}

// run runs a command to its end.
func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return runEnv(t, bin, nil, args...)
}

// runEnv runs a command to its end with variables added to its environment.
func runEnv(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = childEnv(env)
	dieWithTest(cmd)
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Errorf("oncepush %s reported a data race:\n%s", args[0], r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("oncepush %s: %v\nstderr:\n%s", strings.Join(args, " "), err, r.stderr)
	}
	return r
}

// runOK runs a command that must succeed, and returns its stdout.
func runOK(t *testing.T, bin string, args ...string) string {
	t.Helper()
	r := run(t, bin, args...)
	if r.code != 0 {
		t.Fatalf("oncepush %s: exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// childEnv is the test's environment without the ONCEPUSH_ variables a
// developer's shell may hold (a child must read only what the test gives it),
// plus extra.
func childEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCEPUSH_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
