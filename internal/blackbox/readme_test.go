package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/internal/child"
)

// testREADMEWalkthrough runs the README's walk-through with the fake
// providers, as a newcomer would paste it into a shell — with the built
// binary for `go run ./cmd/oncepush`, a temporary directory for
// /tmp/oncepush-demo and free ports for the fixed ones — and checks that it
// ends as the README says: one delivery sent, its FCM, APNs and Web Push
// devices each accepted once, with the provider's id.
func testREADMEWalkthrough(t *testing.T, bin string) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the README's walk-through needs curl, which is not on PATH: install it (Debian: apt-get install curl)")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(readme, []byte("<!-- walkthrough:begin")), bytes.Index(readme, []byte("<!-- walkthrough:end -->"))
	if begin < 0 || end < begin {
		t.Fatal("README.md has no walkthrough:begin … walkthrough:end section")
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(readme[begin:end], -1) {
		script.Write(m[1])
	}
	r := strings.NewReplacer("go run ./cmd/oncepush", bin, "/tmp/oncepush-demo", t.TempDir()+"/demo",
		"127.0.0.1:8443", freeAddr(t), "127.0.0.1:8081", freeAddr(t))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", r.Replace(script.String()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walk-through failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), child.Tail(stderr.String(), 4000))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var history struct {
		Deliveries []delivery
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &history); err != nil || len(history.Deliveries) != 1 {
		t.Fatalf("the walk-through's last answer is not one delivery (%v):\n%s", err, stdout.String())
	}
	d := history.Deliveries[0]
	accepted := map[string]bool{}
	for _, a := range d.Devices {
		if a.State == "accepted" && a.Submissions == 1 && a.ProviderID != "" {
			accepted[string(a.Transport)] = true
		}
	}
	if d.Status != "sent" || len(d.Devices) != 3 || !accepted["fcm"] || !accepted["apns"] || !accepted["webpush"] {
		t.Fatalf("the walk-through ended with %+v; want sent, FCM, APNs and Web Push each accepted once", d)
	}
}

// freeAddr is a loopback address with a port nobody listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
