package cli

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "oncepush ") || !strings.Contains(out, "\ncommit ") ||
		!strings.Contains(out, "\nbuilt ") || !strings.Contains(out, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Fatalf("version: exit %d, %q, %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "version", "--json")
	var b map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b["version"] == "" || b["go"] != runtime.Version() {
		t.Fatalf("version --json: exit %d, %q, %q", code, out, stderr)
	}
}

func TestReadBuild(t *testing.T) {
	t.Parallel()
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name string
		ld   build
		bi   *debug.BuildInfo
		want build
	}{
		{"no build information", build{}, nil, build{Version: "dev"}},
		{"a checkout: go build", build{},
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123abcd", "2026-12-08T01:02:03Z", "true")},
			build{Version: "dev", Commit: "0123abcd", Modified: true, Date: "2026-12-08T01:02:03Z"}},
		{"go install …@v1.2.3", build{}, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, build{Version: "v1.2.3"}},
		{"go install …@commit: a pseudo-version", build{},
			&debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261208010203-0123456789ab"}},
			build{Version: "v0.0.0-20261208010203-0123456789ab", Commit: "0123456789ab", Date: "2026-12-08T01:02:03Z"}},
		{"after a tag", build{},
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261208010203-0123456789ab+dirty"}},
			build{Version: "v1.2.4-0.20261208010203-0123456789ab+dirty", Commit: "0123456789ab", Modified: true, Date: "2026-12-08T01:02:03Z"}},
		{"a release: scripts/release", build{Version: "v1.3.0", Commit: "fedcba98", Date: "2026-12-01T00:00:00Z"},
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("fedcba98", "2026-11-30T10:00:00Z", "false")},
			build{Version: "v1.3.0", Commit: "fedcba98", Date: "2026-12-01T00:00:00Z"}},
	} {
		tc.want.Go, tc.want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
		if got := readBuild(tc.ld, tc.bi); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
