package registry

import (
	"crypto/tls"
	"errors"
	"log/slog"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/provider/hms"
)

// hmsTransport is Huawei Push Kit, whose spec is its package's (hms.Spec):
// it is not one of the root package's built-in transports.
func hmsTransport() Transport {
	return Transport{
		Spec:       hms.Spec,
		Title:      "Huawei Push Kit",
		NewSection: func() Section { return &HMS{} },
		Fake: func(f *fakepush.Server, p *FakeParams) (Section, error) {
			s := &HMS{BaseURL: f.URL + "/hms", CAFile: p.caFile, tls: p.tls}
			var err error
			s.key, s.KeyFile, err = p.credential("hms-service-account.json", f.HMSServiceAccount(p.Project))
			return s, err
		},
	}
}

// HMS configures provider/hms: providers.hms.
type HMS struct {
	// KeyFile is the project's service-account key file (JSON).
	KeyFile  string `json:"keyFile"`
	Category string `json:"category,omitempty"`
	BaseURL  string `json:"baseURL,omitempty"`
	CAFile   string `json:"caFile,omitempty"`

	// In memory instead of the files (FakeParams without Dir).
	key []byte
	tls *tls.Config
}

// hmsSettings are the settings that hms.Config's fields come from, for an
// error that names the setting.
var hmsSettings = map[string]string{"KeyJSON": "keyFile", "Category": "category", "BaseURL": "baseURL"}

// Provider implements Section.
func (c *HMS) Provider(env Env) (oncepush.Provider, error) {
	key := c.key
	if key == nil {
		var err error
		if key, err = readFile("keyFile", c.KeyFile, "the Push Kit service account's JSON key file"); err != nil {
			return nil, err
		}
	}
	tlsConfig, err := tlsConfig(c.tls, c.CAFile)
	if err != nil {
		return nil, err
	}
	p, err := hms.New(hms.Config{KeyJSON: key, Category: c.Category, BaseURL: c.BaseURL, TLSConfig: tlsConfig,
		Clock: env.Clock, Logger: env.Logger})
	var ce *hms.ConfigError
	if errors.As(err, &ce) && hmsSettings[ce.Field] != "" {
		what := ""
		if ce.Field == "KeyJSON" {
			what = c.KeyFile + " "
		}
		return nil, settingErr(hmsSettings[ce.Field], "%s%s", what, ce.Problem)
	}
	return newProvider(p, err)
}

// LogValue implements slog.LogValuer.
func (c *HMS) LogValue() slog.Value {
	return slog.GroupValue(slog.String("key_file", c.KeyFile), slog.String("category", c.Category),
		slog.String("base_url", c.BaseURL), slog.String("ca_file", c.CAFile))
}
