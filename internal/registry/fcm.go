package registry

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/provider/fcm"
)

func fcmTransport() Transport {
	return Transport{
		Spec:       builtin(oncepush.TransportFCM),
		Title:      "FCM",
		NewSection: func() Section { return &FCM{} },
		Fake: func(f *fakepush.Server, p *FakeParams) (Section, error) {
			s := &FCM{BaseURL: f.URL + "/fcm", WebOrigin: p.WebOrigin, CAFile: p.caFile, tls: p.tls}
			var err error
			s.serviceAccount, s.ServiceAccountFile, err = p.credential("fcm-service-account.json", f.FCMServiceAccount(p.Project))
			return s, err
		},
	}
}

// FCM configures provider/fcm: providers.fcm.
type FCM struct {
	ServiceAccountFile string `json:"serviceAccountFile"`
	// TokenURI replaces the service account's token_uri (a fake OAuth server).
	TokenURI  string `json:"tokenURI,omitempty"`
	BaseURL   string `json:"baseURL,omitempty"`
	WebOrigin string `json:"webOrigin,omitempty"`
	// CAFile is a PEM file of certificate authorities to trust instead of the
	// system's (the fake providers' certificate).
	CAFile string `json:"caFile,omitempty"`

	// In memory instead of the files (FakeParams without Dir).
	serviceAccount []byte
	tls            *tls.Config
}

// Provider implements Section.
func (c *FCM) Provider(env Env) (oncepush.Provider, error) {
	sa := c.serviceAccount
	if sa == nil {
		var err error
		if sa, err = readFile("serviceAccountFile", c.ServiceAccountFile, "the service account's JSON key file"); err != nil {
			return nil, err
		}
	}
	if c.TokenURI != "" {
		var err error
		if sa, err = replaceTokenURI(sa, c.TokenURI); err != nil {
			return nil, settingErr("serviceAccountFile", "%v", err)
		}
	}
	tlsConfig, err := tlsConfig(c.tls, c.CAFile)
	if err != nil {
		return nil, err
	}
	return newProvider(fcm.New(fcm.Config{ServiceAccountJSON: sa, BaseURL: c.BaseURL, WebOrigin: c.WebOrigin,
		TLSConfig: tlsConfig, Clock: env.Clock, Logger: env.Logger}))
}

// LogValue implements slog.LogValuer.
func (c *FCM) LogValue() slog.Value {
	return slog.GroupValue(slog.String("service_account_file", c.ServiceAccountFile),
		slog.String("token_uri", c.TokenURI), slog.String("base_url", c.BaseURL), slog.String("web_origin", c.WebOrigin),
		slog.String("ca_file", c.CAFile))
}

func replaceTokenURI(sa []byte, uri string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(sa, &m); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	m["token_uri"] = uri
	return json.Marshal(m)
}
