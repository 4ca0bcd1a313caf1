// Package fakeproviders wires oncepush's real provider clients (FCM, APNs, Web
// Push, RuStore, and Huawei Push Kit when asked) to a pushtest.FakeServer, so
// a test exercises the real wire protocols end to end in a few lines:
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
// configuration file, from the sections `oncepush fake-providers` prints:
// by default one for each of the client's built-in transports. Huawei Push
// Kit is not one; ask for it with Options.Transports, and give the client
// the same list:
//
//	specs := append(oncepush.BuiltinTransports(), hms.Spec)
//	providers, err := fakeproviders.New(fake, fakeproviders.Options{Transports: specs})
//	client, err := oncepush.NewClient(driver, &oncepush.Config{Transports: specs, Providers: providers})
package fakeproviders

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/registry"
	"github.com/oncepush/oncepush/pushtest"
)

// Options adjust the providers.
type Options struct {
	// ProjectID is the FCM, RuStore and Push Kit project; default
	// "oncepush-test".
	ProjectID string
	// Topic is the APNs topic; default "dev.oncepush.test".
	Topic string
	// WebOrigin is FCM's web link origin; default none.
	WebOrigin string
	// Clock, when set, is the providers' own clock; by default they tell the
	// time of the client they are given to.
	Clock  oncepush.Clock
	Logger *slog.Logger
	// Transports are the transports to make providers for, each one the
	// server speaks; default oncepush.BuiltinTransports().
	Transports []oncepush.TransportSpec
}

// New returns a provider for every transport of o.Transports, configured
// against the fake.
func New(fake *pushtest.FakeServer, o Options) ([]oncepush.Provider, error) {
	specs := o.Transports
	if specs == nil {
		specs = oncepush.BuiltinTransports()
	}
	var t registry.Table
	for _, s := range specs {
		i := slices.IndexFunc(registry.Default(), func(row registry.Transport) bool { return row.Spec.Name == s.Name })
		if i < 0 {
			return nil, fmt.Errorf("fakeproviders: the server speaks no transport %q", s.Name)
		}
		t = append(t, registry.Default()[i])
	}
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
