package oncepush

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/internal/testdb"
)

// plainNumberLen is what PostgreSQL's jsonb makes of a number, byte for
// byte: checked against the database itself, for the literals that are hard
// to get right and for random ones.
func TestPlainNumberLenIsWhatJSONBStores(t *testing.T) {
	t.Parallel()
	literals := []string{"0", "-0", "-0.0", "0.0000", "0e5", "0e-5", "0.0e-5", "0e999999999", "1", "100", "1.0", "0.10",
		"1E5", "1e+5", "1.50e1", "123e-2", "0.001e2", "-1.5e-3", "12.3400e+3", "1e300", "1e-300", "5e-324", "4.9e-324",
		"1.7976931348623157e308", "-1.7976931348623157e308", "9007199254740993", "0.000123e3", "120e-1", "10.00e-2"}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		if rnd.IntN(3) == 0 {
			b.WriteByte('-')
		}
		whole := rnd.IntN(4)
		if whole == 0 {
			b.WriteByte('0')
		} else {
			b.WriteByte(byte('1' + rnd.IntN(9)))
			for range whole - 1 {
				b.WriteByte(byte('0' + rnd.IntN(10)))
			}
		}
		if frac := rnd.IntN(5); frac > 0 {
			b.WriteByte('.')
			for range frac {
				b.WriteByte(byte('0' + rnd.IntN(10)))
			}
		}
		if rnd.IntN(2) == 0 {
			fmt.Fprintf(&b, "%c%d", "eE"[rnd.IntN(2)], rnd.IntN(601)-300)
		}
		literals = append(literals, b.String())
	}
	pool := testdb.Pool(t, testdb.Schema(t), 2)
	rows, err := pool.Query(t.Context(), `SELECT n, length((('[' || n || ']')::jsonb)::text) - 2 FROM unnest($1::text[]) AS n`, literals)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var n string
		var stored int
		if err := rows.Scan(&n, &stored); err != nil {
			t.Fatal(err)
		}
		seen++
		if got := plainNumberLen(n); got != stored {
			t.Errorf("plainNumberLen(%s) = %d; jsonb stores it in %d bytes", n, got, stored)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(literals) {
		t.Fatalf("checked %d of %d literals", seen, len(literals))
	}
}
