package cli

import (
	"cmp"
	"regexp"
	"runtime"
	"runtime/debug"
	"time"
)

// build is what 'oncepush version' says of the binary.
type build struct {
	// Version is the module's version: the release's (Version), the one
	// 'go install …@v1.2.3' fetched, or "dev" for a build of a checkout.
	Version string `json:"version"`
	// Commit is the commit it was built from: the checkout's (go build
	// records it), or the one a pseudo-version names; empty when unknown.
	Commit string `json:"commit,omitempty"`
	// Modified is true for a checkout with changes not committed.
	Modified bool `json:"modified"`
	// Date is when it was built (a release: its SOURCE_DATE_EPOCH), else
	// the commit's time; empty when unknown.
	Date     string `json:"date,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// pseudoVersion is a Go pseudo-version's time and commit
// (v0.0.0-20261208010203-0123456789ab, v1.2.4-0.20261208010203-…), and
// "+dirty" when Go stamped a checkout with changes not committed.
var pseudoVersion = regexp.MustCompile(`[.-](\d{14})-([0-9a-f]{12})(?:\+incompatible)?(\+dirty)?$`)

// buildInfo reads what the build recorded: -ldflags values first, then the
// module version and version control settings Go writes into every
// binary (runtime/debug.ReadBuildInfo).
func buildInfo() build {
	bi, _ := debug.ReadBuildInfo()
	return readBuild(build{Version: Version, Commit: Commit, Date: Date}, bi)
}

// readBuild completes b, the -ldflags values, from bi (nil: none).
func readBuild(b build, bi *debug.BuildInfo) build {
	b.Go, b.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	if bi == nil {
		b.Version = cmp.Or(b.Version, "dev")
		return b
	}
	if v := bi.Main.Version; b.Version == "" && v != "" && v != "(devel)" {
		b.Version = v
	}
	var vcsTime string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = cmp.Or(b.Commit, s.Value)
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	// A module fetched by version has no version control settings; a
	// pseudo-version names its commit and the commit's time.
	if m := pseudoVersion.FindStringSubmatch(b.Version); m != nil && b.Commit == "" {
		b.Commit, b.Modified = m[2], b.Modified || m[3] != ""
		if t, err := time.Parse("20060102150405", m[1]); err == nil {
			vcsTime = t.UTC().Format(time.RFC3339)
		}
	}
	b.Version = cmp.Or(b.Version, "dev")
	b.Date = cmp.Or(b.Date, vcsTime)
	return b
}
