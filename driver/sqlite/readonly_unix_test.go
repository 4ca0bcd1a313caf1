//go:build linux || darwin

package sqlite_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/oncepush/oncepush/driver/sqlite"
)

const readOnlyEnv = "ONCEPUSH_SQLITE_READONLY_DIRS"

// TestOpenRefusesReadOnly: a file the process cannot write, or a directory in
// which it cannot create the database or its -wal and -shm files, is refused
// with ErrReadOnly, and the directory is left as it was. Permissions do not bind
// root, so as root the checks run in a child process as the user nobody.
func TestOpenRefusesReadOnly(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	roDir := filepath.Join(base, "ro") // no writing here
	rwDir := filepath.Join(base, "rw") // writing allowed, but its database is read-only
	for _, d := range []string{roDir, rwDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(roDir, "mine.db"), filepath.Join(rwDir, "theirs.db")} {
		drv, err := sqlite.Open(t.Context(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drv.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := drv.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // let TempDir remove them
		os.Chmod(roDir, 0o755)
		os.Chmod(filepath.Join(rwDir, "theirs.db"), 0o644)
	})

	if os.Geteuid() != 0 {
		// mine.db stays writable in a directory that is not; theirs.db is not
		// writable in a directory that is.
		chmod(t, roDir, 0o555)
		chmod(t, rwDir, 0o777)
		chmod(t, filepath.Join(rwDir, "theirs.db"), 0o444)
		checkReadOnly(t, roDir, rwDir)
		return
	}

	// As root: hand mine.db to nobody, leave the rest root's, and run the
	// checks as nobody from a copy of this test binary it can execute.
	const nobody = 65534
	if err := os.Chown(filepath.Join(roDir, "mine.db"), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	chmod(t, rwDir, 0o777)
	chmod(t, filepath.Dir(base), 0o755) // t.TempDir's parent is private to us
	chmod(t, base, 0o755)
	binDir := filepath.Join(base, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "sqlite.test")
	copyFile(t, bin)
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^TestOpenRefusesReadOnlyAsChild$", "-test.v", "-test.count=1")
	cmd.Dir = binDir
	cmd.Env = append(os.Environ(), readOnlyEnv+"="+roDir+string(os.PathListSeparator)+rwDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Skipf("cannot run a child process as nobody to check permissions as root: %v", err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenRefusesReadOnlyAsChild") {
		t.Fatalf("the checks run as nobody failed (%v):\n%s", err, out)
	}
}

// TestOpenRefusesReadOnlyAsChild is TestOpenRefusesReadOnly's child process.
func TestOpenRefusesReadOnlyAsChild(t *testing.T) {
	dirs := filepath.SplitList(os.Getenv(readOnlyEnv))
	if len(dirs) != 2 {
		t.Skip("run by TestOpenRefusesReadOnly")
	}
	checkReadOnly(t, dirs[0], dirs[1])
}

func checkReadOnly(t *testing.T, roDir, rwDir string) {
	for _, tc := range []struct{ name, dir, file string }{
		{"writable file in a read-only directory", roDir, "mine.db"},
		{"new file in a read-only directory", roDir, "new.db"},
		{"read-only file", rwDir, "theirs.db"},
	} {
		before := dirState(t, tc.dir)
		drv, err := sqlite.Open(t.Context(), filepath.Join(tc.dir, tc.file), nil)
		if err == nil {
			drv.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if !errors.Is(err, sqlite.ErrReadOnly) {
			t.Errorf("%s: Open: %v, want ErrReadOnly", tc.name, err)
		}
		sameState(t, tc.name, before, dirState(t, tc.dir))
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the running test binary to dst, executable by everyone.
func copyFile(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
