package driver_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// released pins, by path below driver/, the sha256 of every migration file a
// build has shipped, and of the frozen copy of engine migration 2 as it
// shipped before the server had migrations of its own. A database records a
// migration's version, not its text, so a shipped migration edited in place
// would leave databases that ran the old text and databases that run the new
// one at "the same version" with different schemas; the upgrade test
// (TestUpgradeKeepsServerRows) also replays migrations 1, 3 and 4 from
// migration/ as the builds before it ran them. A change is a new migration;
// a migration a release ships is added here.
var released = map[string]string{
	"postgres/migration/001_initial.sql":                    "7d829da69eddccc2b961089c2f6410250480b4fc81243d65df212b9440d35fd6",
	"postgres/migration/002_recorded_requests.sql":          "012d35183091597f2d156cc9c8df87876ef8af0adeea89bda3599890d44ded55",
	"postgres/migration/003_pair_identity.sql":              "eca4b3b6599c5168619c1933ad75aae8b773cc940727d4caf5adb2685e28f9c2",
	"postgres/migration/004_record_lives_with_key.sql":      "e96f253971df51c7bb415618f102b25ccefbe89a4bff4b0bc97b1efc57066d4f",
	"postgres/servermigration/001_keys_and_preferences.sql": "8a2d72dca87cd8fac625e175484f0821d2ffd192192ec03b8a918e5e42b91767",
	"postgres/testdata/engine_v4/002_server.sql":            "7890ced4994c109122079db19c2dfd01f9633cbafc42723cdf988f4ba854c639",
	"sqlite/migration/001_initial.sql":                      "1fca743a6a0d69353ee01348b5d363da1e295d8d5303017c5c69800a13ab0644",
	"sqlite/migration/002_recorded_requests.sql":            "2695a57acd8820a1d9e4c320d3a05df8ad4d8e290e96349088d6159cb4a5c2b8",
	"sqlite/migration/003_pair_identity.sql":                "c29220fcdb6ed5d5edc262dcfb97cd66dde304342057081efce8471561700d9f",
	"sqlite/migration/004_record_lives_with_key.sql":        "eb8f16827cae6a12fa7c544bb76414d12dd50017eda5aa8bca9104a90a1d6a2f",
	"sqlite/servermigration/001_keys_and_preferences.sql":   "3553b2354596dd1d061cf8dccc28b26c102281e620a9b7e5b8da09cc470900bf",
	"sqlite/testdata/engine_v4/002_server.sql":              "1eebaa727e2c423df1ac187fd28881cbe84a3e33c2eb066ed2034c43156ea78e",
}

// TestReleasedMigrationsUnchanged: every released migration file is there,
// byte for byte as it shipped.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	t.Parallel()
	for path, want := range released {
		b, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			t.Errorf("released migration %s: %v", path, err)
			continue
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
			t.Errorf("released migration %s changed (sha256 %x, shipped %s); add a new migration instead", path, sum, want)
		}
	}
}
