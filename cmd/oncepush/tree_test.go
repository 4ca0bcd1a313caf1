package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkout is the module's working tree as git sees it: the files it
// tracks and those it does not ignore, so that what is tested is what is
// being changed, committed or not.
type checkout struct {
	root  string
	files []string // slash-separated, relative to root
}

// workingTree is the checkout this test runs in.
//
// The tests that use it build the whole command with trimmed paths, which
// Go's build cache holds apart from the test builds: minutes on two cores
// the first time. They run when ONCEPUSH_TEST_RELEASE=1, which
// scripts/test sets for a step of their own.
func workingTree(t *testing.T) *checkout {
	t.Helper()
	if os.Getenv("ONCEPUSH_TEST_RELEASE") != "1" {
		t.Skip("builds the release; set ONCEPUSH_TEST_RELEASE=1 to run it (scripts/test does)")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the module's files are unknown", err)
	}
	c := &checkout{root: root}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		// A file deleted but not yet staged is listed; it is not there.
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			c.files = append(c.files, f)
		}
	}
	return c
}

// copyTo copies the tree's files into dir, modes kept, and commits them in
// a new repository with a fixed author, committer and time, so that two
// copies are the same commit wherever they are.
func (c *checkout) copyTo(t *testing.T, dir string) {
	t.Helper()
	for _, f := range c.files {
		src, dst := filepath.Join(c.root, f), filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=oncepush", "GIT_AUTHOR_EMAIL=release@oncepush.invalid", "GIT_AUTHOR_DATE=2026-12-01T00:00:00Z",
		"GIT_COMMITTER_NAME=oncepush", "GIT_COMMITTER_EMAIL=release@oncepush.invalid", "GIT_COMMITTER_DATE=2026-12-01T00:00:00Z")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"commit", "-q", "--no-gpg-sign", "-m", "the working tree under test"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func copyFile(src, dst string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// run runs a command in dir with env added to the process's, failing the
// test with its output if it fails; it returns its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}
