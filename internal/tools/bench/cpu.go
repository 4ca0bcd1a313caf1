package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ), 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// cpuUse is the CPU time (user + system, in seconds) each part of the
// machine used while a case sent Sends sends (D97).
type cpuUse struct {
	Sends    int     `json:"sends"`
	WallS    float64 `json:"wallS"`
	System   float64 `json:"systemS"`   // serve or gorush
	Database float64 `json:"databaseS"` // the backends of the system's own database (PostgreSQL only)
	Fake     float64 `json:"fakeS"`
	Load     float64 `json:"loadS"`  // this tool
	Other    float64 `json:"otherS"` // the rest of the machine's busy time
	Idle     float64 `json:"idleS"`  // the machine's idle time, every CPU
}

// add sums another run of the same case into u.
func (u *cpuUse) add(v *cpuUse) {
	u.Sends += v.Sends
	u.WallS += v.WallS
	u.System += v.System
	u.Database += v.Database
	u.Fake += v.Fake
	u.Load += v.Load
	u.Other += v.Other
	u.Idle += v.Idle
}

// perSend is seconds of CPU as microseconds per send.
func (u *cpuUse) perSend(s float64) float64 { return s / float64(u.Sends) * 1e6 }

// busy is the CPU every part used, per send, in microseconds.
func (u *cpuUse) busy() float64 {
	return u.perSend(u.System + u.Database + u.Fake + u.Load + u.Other)
}

// cpuParts names the processes of a case: the system under test, the
// fake, and the URL of the system's database when it is one of the local
// PostgreSQL server's (empty otherwise).
type cpuParts struct {
	system, fake int
	database     string
}

// cpuSnapshot is the CPU time used so far by each part.
type cpuSnapshot struct {
	at                       time.Time
	system, fake, load       float64
	database                 map[int]float64 // by pid
	machineBusy, machineIdle float64
}

func (p cpuParts) snapshot(ctx context.Context) (cpuSnapshot, error) {
	s := cpuSnapshot{at: time.Now()}
	var err error
	if s.system, err = procCPU(p.system); err != nil {
		return s, err
	}
	if s.fake, err = procCPU(p.fake); err != nil {
		return s, err
	}
	if p.database != "" {
		if s.database, err = databaseCPU(ctx, p.database); err != nil {
			return s, err
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s, err
	}
	s.load = seconds(ru.Utime) + seconds(ru.Stime)
	s.machineBusy, s.machineIdle, err = machineCPU()
	return s, err
}

// since is the use between an earlier snapshot and s, for sends sends.
func (s cpuSnapshot) since(before cpuSnapshot, sends int) *cpuUse {
	u := &cpuUse{
		Sends: sends, WallS: s.at.Sub(before.at).Seconds(),
		System: s.system - before.system, Database: databaseSince(s.database, before.database),
		Fake: s.fake - before.fake, Load: s.load - before.load,
		Idle: s.machineIdle - before.machineIdle,
	}
	// Processes that came and went (a database backend, a build) are in
	// the machine's busy time only: they are "other", as is the kernel's
	// own work. Never below zero, as the two clocks tick apart.
	u.Other = max(0, s.machineBusy-before.machineBusy-u.System-u.Database-u.Fake-u.Load)
	return u
}

// databaseSince is the CPU the database's processes used between two
// snapshots: each process's growth, or all of its time for one that
// started in between. A process that ended in between took its time with
// it: what it used since the first snapshot is in the machine's busy time,
// so in "other", never a negative share (a server's backends end when it
// stops).
func databaseSince(now, before map[int]float64) float64 {
	var total float64
	for pid, v := range now {
		total += v - before[pid]
	}
	return total
}

func seconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// procCPU is a process's user + system time, from /proc/PID/stat (none
// for pid 0: a part the case does not have).
func procCPU(pid int) (float64, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return statCPU(string(b))
}

// statCPU reads utime and stime (fields 14 and 15) from a /proc/PID/stat
// line; the command (field 2) is in parentheses and may hold spaces.
func statCPU(line string) (float64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command", line)
	}
	f := strings.Fields(line[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %q: %d fields", line, len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat %q: %w", line, err)
		}
		ticks += float64(v)
	}
	return ticks / clockTicks, nil
}

// databaseCPU is the CPU time of the backends connected to the database at
// url, by pid — that database's own, never another's on the same server
// (the test suite's, another benchmark's) nor the server's shared
// processes (checkpointer, WAL writer), which serve every database. The
// connection that asks is left out; a backend that ends between the
// listing and its read is skipped.
func databaseCPU(ctx context.Context, url string) (map[int]float64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("list the database's backends: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil, fmt.Errorf("list the database's backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list the database's backends: %w", err)
	}
	out := make(map[int]float64, len(pids))
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // ended since the listing, or not on this machine
		}
		v, err := statCPU(string(b))
		if err != nil {
			return nil, err
		}
		out[int(pid)] = v
	}
	return out, nil
}

// machineCPU is the machine's busy and idle time over every CPU, from the
// first line of /proc/stat (idle includes waiting for I/O).
func machineCPU() (busy, idle float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user).
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i == 3 || i == 4 {
			idle += float64(v)
		} else {
			busy += float64(v)
		}
	}
	return busy / clockTicks, idle / clockTicks, nil
}
