package main

import (
	"path/filepath"
	"testing"
)

// The README's run command must keep working.
func TestQuickstartRuns(t *testing.T) {
	if err := run(filepath.Join(t.TempDir(), "quickstart.db"), false); err != nil {
		t.Fatal(err)
	}
}
