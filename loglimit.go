package oncepush

import (
	"sync"
	"time"
)

// Limits of the outcome log's warn lines: per (line, transport, text), at
// most logBurst lines per logWindow. See docs/architecture.md, "Logs".
const (
	logBurst  = 5
	logWindow = time.Minute
	// logKeysMax bounds the limiter's memory: with more distinct answers in
	// one window than this, the oldest windows are forgotten first.
	logKeysMax = 1024
)

// logLimiter withholds repeated log lines: a provider outage that fails
// every send must not write a line per send.
type logLimiter struct {
	mu   sync.Mutex
	keys map[string]*logWindowState
}

type logWindowState struct {
	start      time.Time
	lines      int // lines let through in the window that began at start
	suppressed int // lines withheld since the last one let through
}

// allow reports whether a line with key may be written at now and, if so,
// how many lines with that key were withheld since the last one written.
func (l *logLimiter) allow(key string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*logWindowState{}
	}
	w := l.keys[key]
	if w == nil {
		if len(l.keys) >= logKeysMax {
			l.forget(now)
		}
		w = &logWindowState{start: now}
		l.keys[key] = w
	}
	if now.Sub(w.start) >= logWindow || now.Before(w.start) {
		w.start, w.lines = now, 0
	}
	if w.lines >= logBurst {
		w.suppressed++
		return false, 0
	}
	w.lines++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}

// forget drops the keys whose window has ended with nothing withheld, and,
// if that is not enough, every key: the cost is at most logBurst more lines
// per answer.
func (l *logLimiter) forget(now time.Time) {
	for k, w := range l.keys {
		if now.Sub(w.start) >= logWindow && w.suppressed == 0 {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= logKeysMax {
		clear(l.keys)
	}
}
