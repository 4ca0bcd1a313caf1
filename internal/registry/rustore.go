package registry

import (
	"crypto/tls"
	"log/slog"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/provider/rustore"
)

func ruStoreTransport() Transport {
	return Transport{
		Spec:       builtin(oncepush.TransportRuStore),
		Title:      "RuStore",
		NewSection: func() Section { return &RuStore{} },
		Fake: func(f *fakepush.Server, p *FakeParams) (Section, error) {
			return &RuStore{ProjectID: p.Project, ServiceToken: f.RuStoreToken(), BaseURL: f.URL + "/rustore",
				CAFile: p.caFile, tls: p.tls}, nil
		},
	}
}

// RuStore configures provider/rustore: providers.rustore. The service token
// may be given inline or as a file.
type RuStore struct {
	ProjectID        string `json:"projectID"`
	ServiceToken     string `json:"serviceToken,omitempty"`
	ServiceTokenFile string `json:"serviceTokenFile,omitempty"`
	BaseURL          string `json:"baseURL,omitempty"`
	CAFile           string `json:"caFile,omitempty"`

	tls *tls.Config // in memory instead of CAFile (FakeParams without Dir)
}

// Provider implements Section.
func (c *RuStore) Provider(env Env) (oncepush.Provider, error) {
	token, err := secret{"serviceToken", "serviceTokenFile", "the push project's service token (RuStore Console)"}.value(c.ServiceToken, c.ServiceTokenFile)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := tlsConfig(c.tls, c.CAFile)
	if err != nil {
		return nil, err
	}
	return newProvider(rustore.New(rustore.Config{ProjectID: c.ProjectID, ServiceToken: rustore.ServiceToken(token), BaseURL: c.BaseURL,
		TLSConfig: tlsConfig, Clock: env.Clock, Logger: env.Logger}))
}

// LogValue implements slog.LogValuer: the service token given inline shows
// only whether it is set.
func (c *RuStore) LogValue() slog.Value {
	return slog.GroupValue(slog.String("project_id", c.ProjectID),
		slog.String("service_token", redacted(c.ServiceToken)), slog.String("service_token_file", c.ServiceTokenFile),
		slog.String("base_url", c.BaseURL), slog.String("ca_file", c.CAFile))
}
