//go:build oncepush_failpoints

package wallclock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLoad: an absent file is offset 0; a written offset moves Now by that
// much; every read is acknowledged with its count.
func TestLoad(t *testing.T) {
	t.Cleanup(func() { offset.Store(0) })
	path := filepath.Join(t.TempDir(), "4242")
	ack := func(want string) {
		t.Helper()
		b, err := os.ReadFile(path + ".ack")
		if err != nil || string(b) != want {
			t.Fatalf("ack = %q, %v; want %q", b, err, want)
		}
	}
	off := func() time.Duration { return Now().Sub(time.Now()).Round(time.Second) }

	load(path, 1)
	ack("1")
	if got := off(); got != 0 {
		t.Fatalf("no file: offset %s, want 0", got)
	}
	for i, step := range []time.Duration{-3 * time.Minute, 150 * time.Second, 0} {
		if err := os.WriteFile(path, []byte(step.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		load(path, i+2)
		ack(string(rune('0' + i + 2)))
		if got := off(); got != step {
			t.Fatalf("offset %s written: Now is %s from time.Now", step, got)
		}
		if got := time.Unix(0, Now().UnixNano()).Sub(time.Now()).Round(time.Second); got != step {
			t.Fatalf("offset %s written: the wall reading is %s from time.Now's", step, got)
		}
	}
}
