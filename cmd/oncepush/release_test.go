package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseIsReproducible builds the release twice from two copies of
// the working tree at different paths, committed alike, and compares the
// checksums: the same commit must give the same bytes wherever it is built
// (scripts/release, D164). Then the binary for this machine says the
// version, commit and date the script gave it.
//
// By default it builds this machine's target only, the second time from Go's
// build cache (so it checks the paths and the link, not the compiler).
// ONCEPUSH_TEST_RELEASE_TARGETS=all builds every release target;
// ONCEPUSH_TEST_RELEASE_COLD=1 builds the second copy with an empty build
// cache, compiling everything again (minutes).
func TestReleaseIsReproducible(t *testing.T) {
	// Not in parallel with the other build of the release: the second
	// takes from the build cache what the first compiled.
	tree := workingTree(t)
	host := runtime.GOOS + "/" + runtime.GOARCH
	targets := cmp.Or(os.Getenv("ONCEPUSH_TEST_RELEASE_TARGETS"), host)
	if targets == "all" {
		targets = "" // the script's own list
	}
	var sums [2][]byte
	var out string
	for i := range 2 {
		dir := filepath.Join(t.TempDir(), []string{"one", "another/place"}[i])
		tree.copyTo(t, dir)
		out = filepath.Join(dir, "dist")
		env := []string{"ONCEPUSH_RELEASE_DIR=" + out, "ONCEPUSH_RELEASE_TARGETS=" + targets, "SOURCE_DATE_EPOCH="}
		if i == 1 && os.Getenv("ONCEPUSH_TEST_RELEASE_COLD") == "1" {
			env = append(env, "GOCACHE="+t.TempDir())
		}
		run(t, dir, env, "bash", "scripts/release")
		b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = b
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Fatalf("two builds of one commit differ:\n%s\n%s", sums[0], sums[1])
	}
	t.Logf("SHA256SUMS:\n%s", sums[0])
	if targets != "" && !strings.Contains(targets, host) {
		return
	}
	commit := strings.TrimSpace(string(run(t, filepath.Dir(out), nil, "git", "rev-parse", "HEAD")))
	version := "v0.0.0-20261201000000-" + commit[:12]
	bin := filepath.Join(out, "oncepush-"+version+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	var got struct{ Version, Commit, Date string }
	if err := json.Unmarshal(run(t, out, nil, bin, "version", "--json"), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != version || got.Commit != commit || got.Date != "2026-12-01T00:00:00Z" {
		t.Errorf("version --json: %+v; want %s, %s, 2026-12-01T00:00:00Z", got, version, commit)
	}
}
