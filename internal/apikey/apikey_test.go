package apikey

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestNewParseHash(t *testing.T) {
	t.Parallel()
	for range 1000 { // ids never hold the separator, whatever the random bytes
		k, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if k.ID() == "" {
			t.Fatalf("key %s has no id", k.ID())
		}
	}
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(string(k)); err != nil {
		t.Fatalf("Parse(New()) = %v", err)
	}
	if !strings.HasPrefix(k.ID(), "opk_") || len(k.ID()) != 12 {
		t.Fatalf("ID = %q", k.ID())
	}
	other, _ := New()
	if bytes.Equal(k.Hash(), other.Hash()) || k.ID() == other.ID() {
		t.Fatal("two keys collide")
	}
	for _, bad := range []string{"", "opk_", "opk_short_x", string(k) + "x", "xyz_" + string(k)[4:]} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestKeyLogsRedacted(t *testing.T) {
	t.Parallel()
	k, _ := New()
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", slog.Any("key", k))
	fmt.Fprintf(&buf, "%s %v", k, k)
	secret := string(k)[len(k.ID())+1:]
	if strings.Contains(buf.String(), secret) {
		t.Fatalf("secret leaked: %s", buf.String())
	}
}

func TestScopes(t *testing.T) {
	t.Parallel()
	if s, err := ParseScopes(nil); err != nil || !slices.Equal(s, []string{ScopeSend, ScopeDevices, ScopeRead}) {
		t.Fatalf("default scopes %v, %v", s, err)
	}
	// A key made without --scope cannot start a campaign (D85).
	if s, _ := ParseScopes(nil); Allows(s, ScopeCampaigns) {
		t.Fatal("the default scopes allow campaigns")
	}
	if s, err := ParseScopes([]string{"campaigns", "read"}); err != nil || !Allows(s, ScopeCampaigns) || Allows(s, ScopeSend) {
		t.Fatalf("ParseScopes(campaigns, read) = %v, %v", s, err)
	}
	if !Allows([]string{ScopeAdmin}, ScopeCampaigns) {
		t.Fatal("admin does not allow campaigns")
	}
	if _, err := ParseScopes([]string{"send", "root"}); err == nil {
		t.Fatal("unknown scope accepted")
	}
	if !Allows([]string{"admin"}, "send") || Allows([]string{"read"}, "send") || !Allows([]string{"send"}, "send") {
		t.Fatal("Allows is wrong")
	}
}
