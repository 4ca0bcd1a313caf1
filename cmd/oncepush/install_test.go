package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// installVersion is the version the working tree is served as.
const installVersion = "v0.0.1-install.test"

// TestGoInstall installs the command as the README says, 'go install
// github.com/oncepush/oncepush/cmd/oncepush@latest', into an empty module
// cache, with the working tree served as the module's only version from a
// file:// module proxy (module zip format, golang.org/x/mod/zip) and the
// dependencies from this machine's module cache (then the Go proxy): no
// repository is reached. The binary says the version it was installed at.
func TestGoInstall(t *testing.T) {
	// Not in parallel with the other build of the release: the second
	// takes from the build cache what the first compiled.
	tree := workingTree(t)
	gomodcache := strings.TrimSpace(string(run(t, ".", nil, "go", "env", "GOMODCACHE")))
	proxy := t.TempDir()
	serveModule(t, tree, proxy)

	work := t.TempDir() // outside any module
	cache := filepath.Join(work, "modcache")
	gobin := filepath.Join(work, "bin")
	// The module cache is read-only; only go can remove it.
	t.Cleanup(func() {
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = append(os.Environ(), "GOMODCACHE="+cache)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go clean -modcache: %v\n%s", err, out)
		}
	})
	env := []string{
		"GOMODCACHE=" + cache, "GOBIN=" + gobin, "GOWORK=off",
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(gomodcache, "cache", "download")) + ",https://proxy.golang.org",
		// The module served here is in no checksum database; its
		// dependencies are checked against its go.sum.
		"GONOSUMDB=github.com/oncepush/oncepush",
		// As the release builds (trimmed paths, no cgo), so that packages
		// compiled for it are taken from the build cache.
		"GOFLAGS=-trimpath", "CGO_ENABLED=0",
	}
	run(t, work, env, "go", "install", "github.com/oncepush/oncepush/cmd/oncepush@latest")

	var got struct{ Version string }
	out := run(t, work, nil, filepath.Join(gobin, "oncepush"+exeSuffix()), "version", "--json")
	if err := json.Unmarshal(out, &got); err != nil || got.Version != installVersion {
		t.Fatalf("the installed binary says %s (%v); want version %s", out, err, installVersion)
	}
}

// serveModule writes the tree as the module's one version into dir, laid
// out as a module proxy (go help goproxy): the list, the .info, the .mod
// and the .zip.
func serveModule(t *testing.T, tree *checkout, dir string) {
	t.Helper()
	const path = "github.com/oncepush/oncepush"
	at := filepath.Join(dir, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(tree.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"list":                   installVersion + "\n",
		installVersion + ".info": fmt.Sprintf(`{"Version":%q,"Time":"2026-12-01T00:00:00Z"}`, installVersion),
		installVersion + ".mod":  string(gomod),
	} {
		if err := os.WriteFile(filepath.Join(at, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []zip.File
	for _, f := range tree.files {
		files = append(files, treeFile{root: tree.root, path: f})
	}
	z, err := os.Create(filepath.Join(at, installVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := zip.Create(z, module.Version{Path: path, Version: installVersion}, files); err != nil {
		t.Fatalf("module zip: %v", err)
	}
}

// treeFile is a file of the working tree, for zip.Create.
type treeFile struct{ root, path string }

func (f treeFile) Path() string                 { return f.path }
func (f treeFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs()) }
func (f treeFile) Open() (io.ReadCloser, error) { return os.Open(f.abs()) }
func (f treeFile) abs() string                  { return filepath.Join(f.root, filepath.FromSlash(f.path)) }

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}
