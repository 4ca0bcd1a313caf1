package oncepush_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPackageTableCoversEveryPackage keeps docs/architecture.md's package
// table true: every package of the module has a row, and every row names a
// package that exists.
func TestPackageTableCoversEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	const module = "github.com/oncepush/oncepush"
	var packages []string
	for p := range strings.FieldsSeq(string(out)) {
		packages = append(packages, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
	}
	documented := packageTable(t)
	for _, p := range packages {
		if !slices.Contains(documented, p) {
			t.Errorf("package %q has no row in docs/architecture.md's package table", displayPackage(p))
		}
	}
	for _, p := range documented {
		if !slices.Contains(packages, p) {
			t.Errorf("docs/architecture.md's package table names %q, which is not a package of the module", displayPackage(p))
		}
	}
}

func displayPackage(p string) string {
	if p == "" {
		return "oncepush (root)"
	}
	return p
}

// packageTable reads the first cell of each row of the table under
// "## Packages": the packages it names in backquotes, the root written as
// `oncepush`.
func packageTable(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	quoted := regexp.MustCompile("`([^`]+)`")
	var names []string
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case line == "## Packages":
			in = true
			continue
		case in && strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range quoted.FindAllStringSubmatch(first, -1) {
			if m[1] == "oncepush" {
				names = append(names, "")
			} else {
				names = append(names, m[1])
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal(`docs/architecture.md has no package table under "## Packages"`)
	}
	return names
}

// TestDecisionsIndex keeps docs/decisions.md's index whole: entries in order
// of number, each once in the index with its own title, and each status what
// the later entries' titles say ("(supersedes Dn)", "(amends Dn)";
// "supersedes Dn's …" supersedes part of it).
func TestDecisionsIndex(t *testing.T) {
	b, err := os.ReadFile("docs/decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	entry := regexp.MustCompile(`(?m)^## D(\d+)\. (.+)$`)
	row := regexp.MustCompile(`(?m)^\| D(\d+) \| (.+) \| (.+) \|$`)
	change := regexp.MustCompile(`(supersedes|amends) ([^)]*)`)
	target := regexp.MustCompile(`D(\d+)('s)?`)

	titles := map[string]string{}
	var order []int
	want := map[string][]string{}
	for _, m := range entry.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		if len(order) > 0 && n <= order[len(order)-1] {
			t.Errorf("D%d comes after D%d: entries go in order of number", n, order[len(order)-1])
		}
		order = append(order, n)
		titles[m[1]] = m[2]
		for _, c := range change.FindAllStringSubmatch(m[2], -1) {
			word := map[string]string{"supersedes": "superseded", "amends": "amended"}[c[1]]
			for _, tg := range target.FindAllStringSubmatch(c[2], -1) {
				if tg[2] != "" {
					word = "partly " + word
				}
				want[tg[1]] = append(want[tg[1]], word+" by D"+m[1])
			}
		}
	}
	if len(order) == 0 {
		t.Fatal("docs/decisions.md has no entries")
	}
	indexed := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		d := m[1]
		if indexed[d] {
			t.Errorf("D%s is in the index twice", d)
		}
		indexed[d] = true
		title, ok := titles[d]
		switch {
		case !ok:
			t.Errorf("the index names D%s, which has no entry", d)
			continue
		case m[2] != title:
			t.Errorf("the index calls D%s %q; its entry says %q", d, m[2], title)
		}
		status := "in force"
		if len(want[d]) > 0 {
			status = strings.Join(want[d], "; ")
		}
		if m[3] != status {
			t.Errorf("the index says D%s is %q; the entries say %q", d, m[3], status)
		}
	}
	for d := range titles {
		if !indexed[d] {
			t.Errorf("D%s is not in the index", d)
		}
	}
}
