package fold

import "testing"

func TestReplace(t *testing.T) {
	t.Parallel()
	const tok = "0a1b2c3d4e5f"
	for _, tc := range []struct{ in, want string }{
		{"no such token 0a1b2c3d4e5f", "no such token X"},
		{"no such token 0A1B2C3D4E5F", "no such token X"},
		{"0a1B2c3D4e5F and 0A1B2C3D4E5F", "X and X"},
		{"\xff0A1B2C3D4E5F\xfe", "\xffX\xfe"}, // invalid UTF-8 stays where it was
		{"nothing here", "nothing here"},
		{"at 0A1B2C3D4E5F and 0a1B2c3D4e5F.", "at X and X."},
		{"\xff\xfe0A1b2c3d4e5f\xffé", "\xff\xfeX\xffé"},
		{"0a1b2c3d4e5", "0a1b2c3d4e5"},
		{"", ""},
	} {
		if got := Replace(tc.in, tok, "X"); got != tc.want {
			t.Errorf("Replace(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Replace("abc", "", "X"); got != "abc" {
		t.Errorf("an empty secret replaced: %q", got)
	}
}
