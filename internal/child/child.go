// Package child runs the oncepush binary's processes for the harnesses
// that drive it from the outside (internal/blackbox's tests, the chaos
// harness): a process whose output can be waited on while it grows, that
// dies with its parent, and whose end is observed once, by one goroutine.
package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Output is a child's stdout or stderr, readable while it grows: copied to
// a file when it has one, and its first bytes (all, or up to a bound) kept
// in memory to be waited on.
type Output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	file    io.Writer
	keep    int
	changed chan struct{} // closed and replaced at every write
}

// NewOutput is an output copied to file (nil: none) that keeps its first
// keep bytes in memory (0: all of it).
func NewOutput(file io.Writer, keep int) *Output {
	return &Output{file: file, keep: keep, changed: make(chan struct{})}
}

func (o *Output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.file != nil {
		_, _ = o.file.Write(b)
	}
	switch room := o.keep - o.buf.Len(); {
	case o.keep == 0:
		o.buf.Write(b)
	case room > 0:
		o.buf.Write(b[:min(room, len(b))])
	}
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

// String is what the output kept so far.
func (o *Output) String() string {
	s, _ := o.Snapshot()
	return s
}

// Snapshot is what the output kept so far, and a channel closed at its next
// write.
func (o *Output) Snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String(), o.changed
}

// Env is this process's environment without the ONCEPUSH_ variables a
// developer's shell may hold — a child reads only what it is given — plus
// extra (KEY=value).
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCEPUSH_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Process is a started child.
type Process struct {
	Name           string
	Cmd            *exec.Cmd
	Stdout, Stderr *Output
	Started        time.Time
	done           chan struct{} // closed once the process has exited and been reaped
	err            error         // Wait's result, once done
}

// Start starts cmd, its output in stdout and stderr, tied to this process's
// life (DieWithParent). onExit, when not nil, runs once it has been reaped
// (to close a log file, say).
func Start(name string, cmd *exec.Cmd, stdout, stderr *Output, onExit func()) (*Process, error) {
	p := &Process{Name: name, Cmd: cmd, Stdout: stdout, Stderr: stderr, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.Started = time.Now()
	go func() {
		p.err = cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

func (p *Process) String() string { return fmt.Sprintf("%s (pid %d)", p.Name, p.Pid()) }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended (exec.Cmd.Wait's result); valid once Done.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to end.
func (p *Process) Wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s still running after %s", p, d)
	}
}

// ExitCode is the exit code of an ended process: -1 when a signal ended it,
// with ok false when it did not end by exiting at all (it could not be
// waited for).
func (p *Process) ExitCode() (code int, ok bool) {
	var ee *exec.ExitError
	switch err := p.Err(); {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		return ee.ExitCode(), true
	}
	return -1, false
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, p, err)
	}
	return nil
}

// Kill sends SIGKILL (after a SIGCONT, so that a stopped process sees it
// now) and waits up to ten seconds for the process to be reaped.
func (p *Process) Kill() error {
	if p.Exited() {
		return nil
	}
	resume(p.Cmd.Process)
	if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.Wait(10 * time.Second)
}

// ErrExited is WaitFor's error when the process ended before it printed
// what was waited for.
var ErrExited = errors.New("exited")

// WaitFor waits until match accepts what the process wrote to out, and
// returns what match extracted. It fails (wrapping ErrExited) if the
// process ends first, if d passes, or when ctx ends.
func (p *Process) WaitFor(ctx context.Context, out *Output, what string, d time.Duration, match func(string) (string, bool)) (string, error) {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		s, changed := out.Snapshot()
		if v, ok := match(s); ok {
			return v, nil
		}
		select {
		case <-changed:
		case <-p.done:
			if v, ok := match(out.String()); ok {
				return v, nil
			}
			return "", fmt.Errorf("%s %w (%v) before printing %s", p, ErrExited, p.err, what)
		case <-timeout.C:
			return "", fmt.Errorf("%s printed no %s in %s", p, what, d)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Tail is the last n bytes of s, marked as cut when they are not all of it.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
