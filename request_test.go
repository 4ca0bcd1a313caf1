package oncepush_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/pushtest"
)

// SendOptions.RecordRequest is SendOptions.RequestHash with the identity
// Client.RequestHash gives, computed by the send itself: a request recorded
// one way replays the other, whatever the spelling, and a different
// notification under the key is refused — for sends to recipients and
// direct sends alike.
func TestRecordRequestRecordsRequestHashsIdentity(t *testing.T) {
	ctx := t.Context()
	drv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncepush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	if _, err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := oncepush.NewClient(drv, &oncepush.Config{Providers: []oncepush.Provider{pushtest.NewProvider(oncepush.TransportFCM)}})
	if err != nil {
		t.Fatal(err)
	}
	msg := oncepush.Message{Type: "order.shipped", Title: "Shipped"}
	recorded := func(key string) *oncepush.SendOptions {
		return &oncepush.SendOptions{DedupKey: key, RecordRequest: true}
	}

	first, err := c.Send(ctx, []string{"alice", "bob"}, msg, recorded("k1"))
	if err != nil || first.Replayed || first.Queued != 2 {
		t.Fatalf("first send: %+v, %v", first, err)
	}
	// The same request spelled otherwise: recipients reordered and one
	// twice, the default policy written out.
	again := recorded("k1")
	again.Ambiguity = c.Config().Ambiguity
	res, err := c.Send(ctx, []string{"bob", "alice", "bob"}, msg, again)
	if err != nil || !res.Replayed || res.MessageID != first.MessageID {
		t.Fatalf("the same request again: %+v, %v; want the first answer replayed", res, err)
	}
	// RequestHash's identity is the one RecordRequest recorded.
	h, err := c.RequestHash([]string{"alice", "bob"}, msg, oncepush.SendOptions{DedupKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Send(ctx, []string{"alice", "bob"}, msg, &oncepush.SendOptions{DedupKey: "k1", RequestHash: h}); err != nil || !res.Replayed {
		t.Fatalf("with RequestHash's identity: %+v, %v; want a replay", res, err)
	}
	other := msg
	other.Title = "Delivered"
	if _, err := c.Send(ctx, []string{"alice", "bob"}, other, recorded("k1")); !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("another notification under the key: %v, want ErrDedupConflict", err)
	}

	// A direct send's identity is over its devices' implicit recipients.
	devices := []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: "fcm-token-direct-0001"}}
	d1, err := c.SendToDevices(ctx, devices, msg, recorded("k2"))
	if err != nil || d1.Replayed || d1.Queued != 1 {
		t.Fatalf("direct send: %+v, %v", d1, err)
	}
	implicit, err := c.DeviceRecipients(devices)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := c.RequestHash(implicit, msg, oncepush.SendOptions{DedupKey: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.SendToDevices(ctx, devices, msg, &oncepush.SendOptions{DedupKey: "k2", RequestHash: hd}); err != nil || !res.Replayed || res.MessageID != d1.MessageID {
		t.Fatalf("the direct send again with RequestHash's identity: %+v, %v; want a replay", res, err)
	}

	// Refused before anything is written: no key, or an identity of the
	// caller's as well.
	for name, opts := range map[string]*oncepush.SendOptions{
		"no key":     {RecordRequest: true},
		"two hashes": {DedupKey: "k3", RecordRequest: true, RequestHash: h},
	} {
		var verr *oncepush.ValidationError
		if _, err := c.Send(ctx, []string{"alice"}, msg, opts); !errors.As(err, &verr) || verr.Field != "dedupKey" {
			t.Errorf("%s: %v, want a ValidationError naming dedupKey", name, err)
		}
	}
}
