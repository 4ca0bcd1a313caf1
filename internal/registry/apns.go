package registry

import (
	"crypto/tls"
	"log/slog"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/provider/apns"
)

func apnsTransport() Transport {
	return Transport{
		Spec:       builtin(oncepush.TransportAPNs),
		Title:      "APNs",
		NewSection: func() Section { return &APNs{} },
		Fake: func(f *fakepush.Server, p *FakeParams) (Section, error) {
			p8, keyID, teamID := f.APNsKey()
			s := &APNs{KeyID: keyID, TeamID: teamID, Topic: p.Topic, Host: f.URL, CAFile: p.caFile, tls: p.tls}
			var err error
			s.key, s.KeyFile, err = p.credential("apns-key.p8", p8)
			return s, err
		},
	}
}

// APNs configures provider/apns: providers.apns.
type APNs struct {
	KeyFile     string `json:"keyFile"`
	KeyID       string `json:"keyID"`
	TeamID      string `json:"teamID"`
	Topic       string `json:"topic"`
	Environment string `json:"environment,omitempty"`
	Host        string `json:"host,omitempty"`
	PushType    string `json:"pushType,omitempty"`
	CAFile      string `json:"caFile,omitempty"`

	// In memory instead of the files (FakeParams without Dir).
	key []byte
	tls *tls.Config
}

// Provider implements Section.
func (c *APNs) Provider(env Env) (oncepush.Provider, error) {
	key := c.key
	if key == nil {
		var err error
		if key, err = readFile("keyFile", c.KeyFile, "the .p8 signing key (AuthKey_<keyID>.p8)"); err != nil {
			return nil, err
		}
	}
	tlsConfig, err := tlsConfig(c.tls, c.CAFile)
	if err != nil {
		return nil, err
	}
	return newProvider(apns.New(apns.Config{Key: key, KeyID: c.KeyID, TeamID: c.TeamID, Topic: c.Topic, Environment: c.Environment,
		Host: c.Host, PushType: c.PushType, TLSConfig: tlsConfig, Clock: env.Clock, Logger: env.Logger}))
}

// LogValue implements slog.LogValuer.
func (c *APNs) LogValue() slog.Value {
	return slog.GroupValue(slog.String("key_file", c.KeyFile), slog.String("key_id", c.KeyID),
		slog.String("team_id", c.TeamID), slog.String("topic", c.Topic), slog.String("environment", c.Environment),
		slog.String("host", c.Host), slog.String("push_type", c.PushType), slog.String("ca_file", c.CAFile))
}
