package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runCLI runs the command line args and returns its exit code and
// output, with no environment.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

func TestFlagsFirst(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("database", "", "")
	fs.Bool("json", false, "")
	for _, tc := range []struct{ in, want []string }{
		{[]string{"ID", "--database", "d.db"}, []string{"--database", "d.db", "--", "ID"}},
		{[]string{"ID", "--database=d.db", "--json"}, []string{"--database=d.db", "--json", "--", "ID"}},
		{[]string{"--json", "ID", "-database", "d.db", "more"}, []string{"--json", "-database", "d.db", "--", "ID", "more"}},
		// "--" ends the flags: what follows is an argument, dash or not.
		{[]string{"--database", "d.db", "--", "-ID", "--json"}, []string{"--database", "d.db", "--", "-ID", "--json"}},
		// A value is the next word, whatever it is, as the flag package reads it.
		{[]string{"--database", "-odd.db", "ID"}, []string{"--database", "-odd.db", "--", "ID"}},
		{[]string{"--database", "--", "ID"}, []string{"--database", "--", "--", "ID"}},
		// A flag the set does not know stays a flag, for Parse to refuse;
		// "-" alone is an argument (standard input, by convention).
		{[]string{"ID", "--nope", "-"}, []string{"--nope", "--", "ID", "-"}},
		{[]string{"--database"}, []string{"--database", "--"}},
		{nil, []string{"--"}},
	} {
		if got := flagsFirst(fs, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Flags are taken after arguments, in every command, as people type them.
func TestFlagsAfterArgumentsKeys(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	code, key, stderr := runCLI(t, "keys", "create", "--name", "ci", "--database", db, "--scope", "send")
	if code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, stderr)
	}
	id := regexp.MustCompile(`opk_[0-9a-f]+`).FindString(stderr)
	if !strings.HasPrefix(strings.TrimSpace(key), id+"_") || id == "" {
		t.Fatalf("keys create printed %q, said %q", key, stderr)
	}
	if code, out, stderr := runCLI(t, "keys", "list", "--database", db); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("keys list: exit %d, %q, %q", code, out, stderr)
	}
	// The argument, then the flag.
	if code, out, stderr := runCLI(t, "keys", "revoke", id, "--database", db); code != 0 || out != "revoked "+id+"\n" {
		t.Fatalf("keys revoke ID --database: exit %d, %q, %q", code, out, stderr)
	}
	// "--" ends the flags: an id that starts with a dash is an id.
	code, _, stderr = runCLI(t, "keys", "revoke", "--database", db, "--", "-x")
	if code != 1 || !strings.Contains(stderr, `no active key "-x"`) {
		t.Fatalf("keys revoke -- -x: exit %d, %q", code, stderr)
	}
	// Help after the argument is help.
	if code, out, _ := runCLI(t, "keys", "revoke", id, "--help"); code != 0 || !strings.Contains(out, "Usage: oncepush keys revoke") {
		t.Fatalf("keys revoke ID --help: exit %d, %q", code, out)
	}
	// A flag before the command is said to be one.
	code, _, stderr = runCLI(t, "keys", "--database", db, "list")
	if code != 2 || !strings.Contains(stderr, "the command comes before its flags") {
		t.Fatalf("keys --database DB list: exit %d, %q", code, stderr)
	}
}

func TestFlagsAfterArgumentsSend(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "send.db")
	code, out, stderr := runCLI(t, "send", "--to", "u_1", "--database", db, "--title", "Hi", "--json")
	if code != 0 {
		t.Fatalf("send: exit %d: %s", code, stderr)
	}
	var res struct{ Queued int }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Queued != 1 {
		t.Fatalf("send printed %q (%v)", out, err)
	}
	// An argument no command takes is named alone, not with the flags
	// after it.
	code, _, stderr = runCLI(t, "send", "u_1", "--title", "Hi", "--database", db)
	if code != 2 || !strings.Contains(stderr, `unexpected argument "u_1" (`) {
		t.Fatalf("send u_1 --title: exit %d, %q", code, stderr)
	}
}

func TestFlagsAfterArgumentsServeAndWork(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "work", "migrate"} {
		code, _, stderr := runCLI(t, cmd, "now", "--log-format", "xml")
		if code != 2 || !strings.Contains(stderr, `unexpected argument "now" (`) {
			t.Errorf("%s now --log-format xml: exit %d, %q", cmd, code, stderr)
		}
		// The flags were read: the value is refused, naming the flag.
		code, _, stderr = runCLI(t, cmd, "--log-format", "xml", "--database", filepath.Join(t.TempDir(), "x.db"))
		if code != 1 || !strings.Contains(stderr, `--log-format: "xml" is neither text nor json`) {
			t.Errorf("%s --log-format xml: exit %d, %q", cmd, code, stderr)
		}
	}
}

func TestFlagsAfterArgumentsVapidAndVersion(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCLI(t, "vapid", "generate", "--json")
	var keys struct{ PublicKey, PrivateKey string }
	if code != 0 || json.Unmarshal([]byte(out), &keys) != nil || keys.PublicKey == "" {
		t.Fatalf("vapid generate --json: exit %d, %q, %q", code, out, stderr)
	}
	code, _, stderr = runCLI(t, "vapid", "generate", "extra", "--json")
	if code != 2 || !strings.Contains(stderr, `unexpected argument "extra" (`) {
		t.Fatalf("vapid generate extra --json: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "version", "extra", "--json")
	if code != 2 || !strings.Contains(stderr, `unexpected argument "extra" (`) {
		t.Fatalf("version extra --json: exit %d, %q", code, stderr)
	}
}

// TestServeSaysEveryProblem: serve refuses a configuration with every
// problem on a line of its own, the providers' beside the file's, before
// it opens the database.
func TestServeSaysEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncepush.json")
	if err := os.WriteFile(cfg, []byte(`{"engine": {"workrs": 2}, "providers": {"rustore": {"projectID": "", "serviceToken": "t"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "never.db")
	code, _, stderr := runCLI(t, "serve", "--config", cfg, "--database", db, "--listen", "127.0.0.1:0")
	want := []string{
		"oncepush serve: --config: " + cfg + ": unknown setting engine.workrs (names are case-sensitive); did you mean engine.workers?",
		"oncepush serve: providers.rustore.projectID: is empty: set it to the push project's id from the RuStore Console",
	}
	if code != 1 || stderr != strings.Join(want, "\n")+"\n" {
		t.Errorf("exit %d:\n%s\nwant:\n%s", code, stderr, strings.Join(want, "\n"))
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("the database was created before the settings were checked")
	}
}
