package sqlfile

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema migration.
type Migration struct {
	Version int
	Name    string // the file name without .sql: "001_initial"
	SQL     string
}

// Migrations reads the files NNN_name.sql of dir, in version order, and
// checks that the versions run 1, 2, 3… without gaps: a missing or duplicate
// number would make databases at "the same version" differ.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("sqlfile: migration file %q is not named NNN_name.sql", name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("sqlfile: migration versions must run 1, 2, 3…; found %d at position %d", m.Version, i+1)
		}
	}
	return ms, nil
}
