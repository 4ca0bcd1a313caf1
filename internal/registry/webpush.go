package registry

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/provider/webpush"
)

func webPushTransport() Transport {
	return Transport{
		Spec:       builtin(oncepush.TransportWebPush),
		Title:      "Web Push",
		NewSection: func() Section { return &WebPush{} },
		Fake: func(f *fakepush.Server, p *FakeParams) (Section, error) {
			_, key, err := webpush.GenerateVAPIDKeys()
			if err != nil {
				return nil, fmt.Errorf("generate a VAPID key: %w", err)
			}
			u, err := url.Parse(f.URL)
			if err != nil {
				return nil, err
			}
			// The fake's subscriptions are on its loopback address.
			return &WebPush{VAPIDPrivateKey: key, VAPIDSubject: "mailto:tests@oncepush.invalid",
				AllowedHosts: []string{u.Host}, AllowLoopback: true, CAFile: p.caFile, tls: p.tls}, nil
		},
	}
}

// WebPush configures provider/webpush: providers.webpush. The private key
// may be given inline or as a file.
type WebPush struct {
	VAPIDPrivateKey     string   `json:"vapidPrivateKey,omitempty"`
	VAPIDPrivateKeyFile string   `json:"vapidPrivateKeyFile,omitempty"`
	VAPIDSubject        string   `json:"vapidSubject"`
	AllowedHosts        []string `json:"allowedHosts,omitempty"`
	AllowLoopback       bool     `json:"allowLoopback,omitempty"`
	AllowPrivate        bool     `json:"allowPrivate,omitempty"`
	CAFile              string   `json:"caFile,omitempty"`

	tls *tls.Config // in memory instead of CAFile (FakeParams without Dir)
}

// Provider implements Section.
func (c *WebPush) Provider(env Env) (oncepush.Provider, error) {
	key, err := secret{"vapidPrivateKey", "vapidPrivateKeyFile", "the VAPID private key ('oncepush vapid generate')"}.value(c.VAPIDPrivateKey, c.VAPIDPrivateKeyFile)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := tlsConfig(c.tls, c.CAFile)
	if err != nil {
		return nil, err
	}
	return newProvider(webpush.New(webpush.Config{VAPIDPrivateKey: key, VAPIDSubject: c.VAPIDSubject, AllowedHosts: c.AllowedHosts,
		AllowLoopback: c.AllowLoopback, AllowPrivate: c.AllowPrivate, TLSConfig: tlsConfig, Clock: env.Clock, Logger: env.Logger}))
}

// LogValue implements slog.LogValuer: the private key given inline shows only
// whether it is set.
func (c *WebPush) LogValue() slog.Value {
	return slog.GroupValue(slog.String("vapid_private_key", redacted(c.VAPIDPrivateKey)),
		slog.String("vapid_private_key_file", c.VAPIDPrivateKeyFile), slog.String("vapid_subject", c.VAPIDSubject),
		slog.Any("allowed_hosts", c.AllowedHosts), slog.Bool("allow_loopback", c.AllowLoopback),
		slog.Bool("allow_private", c.AllowPrivate), slog.String("ca_file", c.CAFile))
}
