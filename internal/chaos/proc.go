//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outputKeep is how much of a child's output the harness keeps in memory to
// wait on (the start-up lines); the log file has all of it.
const outputKeep = 1 << 20

// output is a child's stdout or stderr: written to its log file, and the
// first outputKeep bytes kept to be waited on while it grows.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	file    io.Writer
	changed chan struct{} // closed and replaced at every write
}

func newOutput(file io.Writer) *output { return &output{file: file, changed: make(chan struct{})} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.file.Write(b)
	if room := outputKeep - o.buf.Len(); room > 0 {
		o.buf.Write(b[:min(room, len(b))])
	}
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

func (o *output) snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String(), o.changed
}

// proc is a child process of the harness. Every child dies with the harness
// (Pdeathsig on Linux) and is killed by procs.killAll on the way out.
type proc struct {
	name           string
	cmd            *exec.Cmd
	logPath        string
	stdout, stderr *output
	done           chan struct{} // closed once the process has exited and been reaped
	err            error         // Wait's result, once done
	started        time.Time
}

// procs tracks every child, to kill what is still running at exit.
type procs struct {
	mu   sync.Mutex
	all  []*proc
	logs string // directory for the children's log files
	seq  int
	env  []string // added to every child's environment (setEnv)
}

// setEnv adds env to the environment of every child started from now on.
func (ps *procs) setEnv(env []string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.env = env
}

// start runs bin with args, its output in a log file named after name.
// as, when not nil, runs it as another user (PostgreSQL refuses root).
func (ps *procs) start(name, bin string, args []string, as *syscall.Credential) (*proc, error) {
	ps.mu.Lock()
	ps.seq++
	env := append(childEnv(), ps.env...)
	logPath := filepath.Join(ps.logs, fmt.Sprintf("%03d-%s.log", ps.seq, strings.ReplaceAll(name, "/", "-")))
	ps.mu.Unlock()
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, logPath: logPath, done: make(chan struct{})}
	p.stdout, p.stderr = newOutput(f), newOutput(f)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = env
	dieWithParent(p.cmd, as)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.started = time.Now()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// killAll kills every child still running and waits for it, bounded.
func (ps *procs) killAll() {
	ps.mu.Lock()
	all := append([]*proc(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range all {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must see its SIGKILL now
			_ = p.cmd.Process.Kill()
		}
	}
	for _, p := range all {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) String() string { return fmt.Sprintf("%s (pid %d)", p.name, p.pid()) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, p, err)
	}
	return nil
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.wait(10 * time.Second)
}

// wait waits up to d for the process to end.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s still running after %s", p, d)
	}
}

// exitCode is the exit code of an ended process (-1 when a signal ended it).
func (p *proc) exitCode() int {
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// waitFor waits until match accepts what the process wrote to out, and
// returns what match extracted; it fails if the process ends first or d
// passes.
func (p *proc) waitFor(ctx context.Context, out *output, what string, d time.Duration, match func(string) (string, bool)) (string, error) {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		s, changed := out.snapshot()
		if v, ok := match(s); ok {
			return v, nil
		}
		select {
		case <-changed:
		case <-p.done:
			s, _ := out.snapshot()
			if v, ok := match(s); ok {
				return v, nil
			}
			return "", fmt.Errorf("%s exited (%v) before printing %s; its log: %s", p, p.err, what, p.logPath)
		case <-timeout.C:
			return "", fmt.Errorf("%s printed no %s in %s; its log: %s", p, what, d, p.logPath)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// childEnv is the harness's environment without the ONCEPUSH_ variables a
// developer's shell may hold: a child reads only what the harness gives it.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCEPUSH_") {
			env = append(env, kv)
		}
	}
	return env
}
