package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode: the server binary must not carry test code.
// `oncepush fake-providers` serves the fake providers (internal/fakepush),
// which import no test code; pushtest, which imports the testing package
// (and its flags and runtime hooks) for NewFakeServer, stays out.
func TestBinaryLinksNoTestCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/oncepush/oncepush/internal/fakepush") {
		t.Fatalf("go list -deps listed %d packages, without the fake providers: is this the command's package?\n%s", len(deps), out)
	}
	for _, forbidden := range []string{"testing", "github.com/oncepush/oncepush/pushtest"} {
		if slices.Contains(deps, forbidden) {
			t.Errorf("the oncepush binary links %s", forbidden)
		}
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "testing/") {
			t.Errorf("the oncepush binary links %s", d)
		}
	}
}
