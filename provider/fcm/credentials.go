package fcm

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/oncepush/oncepush/provider/internal/rsakey"
)

// LoadServiceAccount reads a Google service-account key file (the JSON
// downloaded from IAM → Service accounts → Keys) for Config.ServiceAccountJSON.
// New checks its contents.
func LoadServiceAccount(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fcm: read the service-account key file: %w", err)
	}
	return b, nil
}

// serviceAccount is the part of a service-account key file FCM needs.
type serviceAccount struct {
	Type         string `json:"type"`
	ProjectID    string `json:"project_id"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	ClientEmail  string `json:"client_email"`
	TokenURI     string `json:"token_uri"`
}

// LogValue implements slog.LogValuer: the account's identity, never its key.
func (a *serviceAccount) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("project_id", a.ProjectID),
		slog.String("client_email", a.ClientEmail),
		slog.String("private_key", "[redacted]"),
	)
}

// parseServiceAccount checks a key file and says what is wrong with it. Its
// errors never quote the file, which holds a private key.
func parseServiceAccount(b []byte) (*serviceAccount, error) {
	if len(b) == 0 {
		return nil, errors.New("ServiceAccountJSON is empty: set it to the contents of the service-account key file (LoadServiceAccount reads one)")
	}
	var a serviceAccount
	if err := json.Unmarshal(b, &a); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("the service-account key is not JSON (syntax error at byte %d): use the key file downloaded from IAM → Service accounts → Keys", syn.Offset)
		}
		return nil, errors.New("the service-account key is not a JSON object of strings: use the key file downloaded from IAM → Service accounts → Keys")
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"type", a.Type},
		{"project_id", a.ProjectID},
		{"private_key_id", a.PrivateKeyID},
		{"private_key", a.PrivateKey},
		{"client_email", a.ClientEmail},
		{"token_uri", a.TokenURI},
	} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the service-account key lacks %s", strings.Join(missing, ", "))
	}
	if a.Type != "service_account" {
		return nil, fmt.Errorf("the key file's type is %q, want \"service_account\" (a user or external-account credential cannot send FCM messages)", a.Type)
	}
	if u, err := url.Parse(a.TokenURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("the service-account key's token_uri is not an https URL")
	}
	if _, err := parseRSAKey(a.PrivateKey); err != nil {
		return nil, fmt.Errorf("the service-account key's private_key: %w", err)
	}
	return &a, nil
}

// parseRSAKey decodes the key file's PEM private key, so a key that cannot
// sign is refused by New instead of failing every send.
func parseRSAKey(pemKey string) (*rsa.PrivateKey, error) {
	k, err := rsakey.Parse(pemKey)
	var other *rsakey.NotRSAError
	if errors.As(err, &other) {
		return nil, fmt.Errorf("a %s key; Google service accounts sign with RSA (RS256)", other.Kind)
	}
	return k, err
}
