// Package fakeproviders wires oncepush's real provider clients (FCM, APNs, Web
// Push, RuStore) to a pushtest.FakeServer, so a test exercises the real wire
// protocols end to end in a few lines:
//
//	fake := pushtest.NewFakeServerWith(t, &pushtest.FakeOptions{Clock: clock})
//	providers, err := fakeproviders.New(fake, fakeproviders.Options{})
//	client, err := oncepush.NewClient(driver, &oncepush.Config{Providers: providers, Clock: clock})
//
// The providers tell the client's clock (oncepush.ClockUser); give the fake
// the same one and their tokens expire as the test moves it.
//
// Web Push devices must be registered with tokens from
// fake.NewWebPushSubscription(); their endpoints are on the fake's loopback
// address, which the Web Push provider built here is allowed to reach.
//
// The providers are built as `oncepush serve` builds them from a
// configuration file, one for each transport the server speaks, from the
// sections `oncepush fake-providers` prints.
package fakeproviders

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/registry"
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
	// Clock, when set, is the providers' own clock; by default they tell the
	// time of the client they are given to.
	Clock  oncepush.Clock
	Logger *slog.Logger
}

// New returns a provider for every transport, configured against the fake.
func New(fake *pushtest.FakeServer, o Options) ([]oncepush.Provider, error) {
	t := registry.Default()
	sections, err := t.FakeSections(fake, registry.FakeParams{
		Project:   cmp.Or(o.ProjectID, "oncepush-test"),
		Topic:     cmp.Or(o.Topic, "dev.oncepush.test"),
		WebOrigin: o.WebOrigin,
	})
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: %w", err)
	}
	providers, err := t.Providers(sections, registry.Env{Logger: o.Logger, Clock: o.Clock})
	if err != nil {
		return nil, fmt.Errorf("fakeproviders: %w", err)
	}
	return providers, nil
}
