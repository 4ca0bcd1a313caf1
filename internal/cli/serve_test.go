package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeSaysWhereTheConsoleIs: the line that says the server serves
// holds the console's URL, which answers, as does the address itself.
func TestServeSaysWhereTheConsoleIs(t *testing.T) {
	t.Parallel()
	logR, logW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer logR.Close()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	exited := make(chan int, 1)
	go func() {
		defer logW.Close()
		exited <- Main(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json",
			"--database", filepath.Join(t.TempDir(), "serve.db")}, io.Discard, logW, func(string) string { return "" })
	}()
	var line struct{ Msg, Listen, Console string }
	for sc := bufio.NewScanner(logR); sc.Scan(); {
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "oncepush serving" {
			break
		}
	}
	if line.Msg != "oncepush serving" {
		t.Fatalf("serve exited (%d) without saying it serves", <-exited)
	}
	if line.Console != "http://"+line.Listen+"/console/" {
		t.Errorf("console %q, listening on %q", line.Console, line.Listen)
	}
	get := func(u string) string {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
		}
		return string(b)
	}
	get(line.Console)
	if home := get("http://" + line.Listen + "/"); !strings.Contains(home, `"console":"/console/"`) {
		t.Errorf("GET /: %s", home)
	}
	go func() { _, _ = io.Copy(io.Discard, logR) }() // the shutdown's lines
	stop()
	if code := <-exited; code != 0 {
		t.Errorf("serve exited %d after the signal", code)
	}
}

func TestConsoleURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/console/",
		"0.0.0.0:8080":   "http://localhost:8080/console/",
		"[::]:9000":      "http://localhost:9000/console/",
		"[::1]:9000":     "http://[::1]:9000/console/",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := consoleURL(tcp); got != want {
			t.Errorf("consoleURL(%s) = %q, want %q", addr, got, want)
		}
	}
}
