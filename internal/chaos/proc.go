//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oncepush/oncepush/internal/child"
)

// outputKeep is how much of a child's output the harness keeps in memory to
// wait on (the start-up lines); the log file has all of it.
const outputKeep = 1 << 20

// proc is a child process of the harness, its output in a log file. Every
// child dies with the harness (child.DieWithParent) and is killed by
// procs.killAll on the way out.
type proc struct {
	*child.Process
	logPath string
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
	env := child.Env(ps.env...)
	logPath := filepath.Join(ps.logs, fmt.Sprintf("%03d-%s.log", ps.seq, strings.ReplaceAll(name, "/", "-")))
	ps.mu.Unlock()
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	if as != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as}
	}
	out := child.NewOutput(f, outputKeep)
	cp, err := child.Start(name, cmd, out, child.NewOutput(f, outputKeep), func() { f.Close() })
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{Process: cp, logPath: logPath}
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	return p, nil
}

// killAll kills every child still running and waits for it, bounded.
func (ps *procs) killAll() {
	ps.mu.Lock()
	all := append([]*proc(nil), ps.all...)
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { _ = p.Kill() }) // each bounded to ten seconds
	}
	wg.Wait()
}

// exitCode is the exit code of an ended process (-1 when a signal ended it).
func (p *proc) exitCode() int {
	code, _ := p.ExitCode()
	return code
}

// waitFor waits until match accepts what the process wrote to out, and
// returns what match extracted; it fails, naming the process's log, if the
// process ends first or d passes.
func (p *proc) waitFor(ctx context.Context, out *child.Output, what string, d time.Duration, match func(string) (string, bool)) (string, error) {
	v, err := p.WaitFor(ctx, out, what, d, match)
	if err != nil && ctx.Err() == nil {
		return "", fmt.Errorf("%w; its log: %s", err, p.logPath)
	}
	return v, err
}
