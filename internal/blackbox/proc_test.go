package blackbox

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	// The binary is built from these sources: importing them makes go test's
	// cache see a change to any of them, which it would not through 'go build'.
	_ "github.com/oncepush/oncepush/internal/cli"

	"github.com/oncepush/oncepush/internal/child"
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

// proc is a child process of the test. It is killed when the test ends, if
// it has not ended by then.
type proc struct {
	*child.Process
	t *testing.T
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
	cmd := exec.Command(bin, args...)
	cmd.Env = child.Env(env...)
	cp, err := child.Start("oncepush "+args[0], cmd, child.NewOutput(nil, 0), child.NewOutput(nil, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{Process: cp, t: t}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Errorf("%v", err)
		}
		stderr := p.Stderr.String()
		if strings.Contains(stderr, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", p.Name, stderr)
		} else if t.Failed() {
			t.Logf("%s stderr:\n%s", p, child.Tail(stderr, 6000))
		}
	})
	return p
}

// exitCode waits up to d for the process to end and returns its exit code
// (-1 if a signal ended it); it fails the test if the process is still running.
func (p *proc) exitCode(d time.Duration) int {
	p.t.Helper()
	if err := p.Wait(d); err != nil {
		p.t.Fatal(err)
	}
	code, ok := p.ExitCode()
	if !ok {
		p.t.Fatalf("%s: %v", p.Name, p.Err())
	}
	return code
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor waits until match accepts what the process wrote to out, and
// returns what match extracted. The test fails if the process ends first or
// the time runs out.
func (p *proc) waitFor(out *child.Output, what string, match func(string) (string, bool)) string {
	p.t.Helper()
	v, err := p.WaitFor(context.Background(), out, what, startTimeout, match)
	if err != nil {
		p.t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, child.Tail(p.Stdout.String(), 3000), child.Tail(p.Stderr.String(), 3000))
	}
	return v
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
	cmd.Env = child.Env(env...)
	child.DieWithParent(cmd)
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
