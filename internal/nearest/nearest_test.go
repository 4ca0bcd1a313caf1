package nearest

import "testing"

func TestName(t *testing.T) {
	t.Parallel()
	known := []string{"postgres", "postgresql", "sqlite", "file", "keyID", "keyFile", "teamID", "workers"}
	for _, tc := range []struct {
		word, want string
		ok         bool
	}{
		{"postgress", "postgres", true},
		{"postgre", "postgres", true},
		{"postgresq", "postgres", true}, // as near to both: the first
		{"sqlte", "sqlite", true},
		{"keyId", "keyID", true}, // case alone
		{"keyid", "keyID", true},
		{"kyeID", "keyID", true}, // two neighbours swapped: one edit
		{"workrs", "workers", true},
		{"mysql", "", false},
		{"http", "", false},
		{"fil", "file", true},
		{"f", "", false}, // one letter: anything is two edits away
		{"keyID", "", false},
	} {
		got, ok := Name(tc.word, known)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Name(%q) = %q, %v; want %q, %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"ca", "abc", 3}, {"é", "e", 1}} {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
