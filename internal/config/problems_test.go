package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestEveryProblemAtOnce: a file with several mistakes is refused with one
// problem each, all of them in one go, each named by its path as written,
// with the setting meant for a name that is a near miss.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `{
		"listn": "127.0.0.1:7000",
		"log": {"level": "loud", "fromat": "json"},
		"http": {"maxBodyBytes": "big"},
		"engine": {"workrs": 4, "BatchSize": 10, "runBudget": "soon", "lease": "30s"},
		"providers": {"fmc": {}, "apns": {"keyId": "ABC"}},
		"categories": {"news": {"ambiguty": "resend"}}
	}`)
	_, err := Load(Flags{Config: file, Listen: "nowhere"}, env(nil))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%v: not Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Setting+" @"+e.Path+" | "+strings.TrimPrefix(e.Problem, file+": "))
	}
	want := []string{
		"--config @listn | unknown setting listn (names are case-sensitive); did you mean listen?",
		"--config @log.fromat | unknown setting log.fromat (names are case-sensitive); did you mean log.format?",
		"--config @http.maxBodyBytes | http.maxBodyBytes: must be a number, not a string",
		"--config @engine.BatchSize | unknown setting engine.BatchSize (names are case-sensitive); did you mean engine.batchSize?",
		"--config @engine.runBudget | engine.runBudget: \"soon\" is not a duration such as \"10s\" or \"1h30m\"",
		"--config @engine.workrs | unknown setting engine.workrs (names are case-sensitive); did you mean engine.workers?",
		"--config @providers.apns.keyId | unknown setting providers.apns.keyId (names are case-sensitive); did you mean providers.apns.keyID?",
		"--config @providers.fmc | providers.fmc: is not a transport: the transports are fcm, apns, webpush, rustore, hms; did you mean providers.fcm?",
		"--config @categories.news.ambiguty | unknown setting categories.news.ambiguty (names are case-sensitive); did you mean categories.news.ambiguity?",
		// What was written well is checked too, and what flags give.
		"--listen @ | \"nowhere\" is not host:port (address nowhere: missing port in address)",
		"log.level @ | \"loud\" is not one of debug, info, warn, error",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// One line each.
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("%d lines for %d problems:\n%s", n, len(want), err)
	}
}

// TestProviderProblemsNameTheSettings: an incomplete provider section is
// named as the file writes it (providers.apns.keyID), not by the provider
// library's Go field (Config.KeyID), and every section's problem is said.
func TestProviderProblemsNameTheSettings(t *testing.T) {
	t.Parallel()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	key := writeConfig(t, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	st, err := Load(Flags{Config: writeConfig(t, `{"providers": {
		"apns": {"keyFile": "`+key+`", "keyID": "", "teamID": "TEAM123456", "topic": "dev.example.app"},
		"rustore": {"projectID": "", "serviceToken": "t"},
		"fcm": {"serviceAccountFile": "/nonexistent/sa.json"}}}`)}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.BuildProviders(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%v: not Errors", err)
	}
	var settings []string
	for _, e := range errs {
		settings = append(settings, e.Setting)
		if strings.Contains(e.Problem, "Config.") {
			t.Errorf("%s names a Go field: %s", e.Setting, e.Problem)
		}
	}
	if want := []string{"providers.fcm.serviceAccountFile", "providers.apns.keyID", "providers.rustore.projectID"}; !slices.Equal(settings, want) {
		t.Errorf("settings %q, want %q\n%v", settings, want, err)
	}
}
