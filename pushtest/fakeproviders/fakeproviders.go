// Package fakeproviders wires oncepush's real provider clients (FCM, APNs, Web
// Push, RuStore) to a pushtest.FakeServer, so a test exercises the real wire
// protocols end to end in a few lines:
//
//	fake := pushtest.NewFakeServer(t)
//	providers, err := fakeproviders.New(fake, fakeproviders.Options{Clock: clock})
//	client, err := oncepush.NewClient(driver, &oncepush.Config{Providers: providers})
//
// Web Push devices must be registered with tokens from
// fake.NewWebPushSubscription(); their endpoints are on the fake's loopback
// address, which the Web Push provider built here is allowed to reach.
package fakeproviders

import (
	"fmt"
	"log/slog"
	"net/url"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/provider/apns"
	"github.com/oncepush/oncepush/provider/fcm"
	"github.com/oncepush/oncepush/provider/rustore"
	"github.com/oncepush/oncepush/provider/webpush"
	"github.com/oncepush/oncepush/pushtest"
)

// Options adjust the providers.
type Options struct {
	// ProjectID is the FCM and RuStore project; default "oncepush-test".
	ProjectID string
	// Topic is the APNs topic; default "dev.oncepush.test".
	Topic string
	// WebOrigin is FCM's web link origin; default none.
	WebOrigin string
	Clock     oncepush.Clock
	Logger    *slog.Logger
}

// New returns the four providers, configured against the fake.
func New(fake *pushtest.FakeServer, o Options) ([]oncepush.Provider, error) {
	if o.ProjectID == "" {
		o.ProjectID = "oncepush-test"
	}
	if o.Topic == "" {
		o.Topic = "dev.oncepush.test"
	}
	tlsConfig := fake.TLSConfig()
	f, err := fcm.New(fcm.Config{
		ServiceAccountJSON: fake.FCMServiceAccount(o.ProjectID), BaseURL: fake.URL + "/fcm",
		WebOrigin: o.WebOrigin, TLSConfig: tlsConfig, Clock: o.Clock, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: fcm: %w", err)
	}
	key, keyID, teamID := fake.APNsKey()
	a, err := apns.New(apns.Config{
		Key: key, KeyID: keyID, TeamID: teamID, Topic: o.Topic, Host: fake.URL,
		TLSConfig: tlsConfig, Clock: o.Clock, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: apns: %w", err)
	}
	_, vapidKey, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: vapid: %w", err)
	}
	u, err := url.Parse(fake.URL)
	if err != nil {
		return nil, err
	}
	w, err := webpush.New(webpush.Config{
		VAPIDPrivateKey: vapidKey, VAPIDSubject: "mailto:tests@oncepush.invalid",
		AllowedHosts: []string{u.Hostname()}, AllowLoopback: true,
		TLSConfig: tlsConfig, Clock: o.Clock, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: webpush: %w", err)
	}
	r, err := rustore.New(rustore.Config{
		ProjectID: o.ProjectID, ServiceToken: rustore.ServiceToken(fake.RuStoreToken()),
		BaseURL: fake.URL + "/rustore", TLSConfig: tlsConfig, Clock: o.Clock, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: rustore: %w", err)
	}
	return []oncepush.Provider{f, a, w, r}, nil
}
