package fakepush

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/provider"
)

func TestFakeRuStoreRequiresServiceToken(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	send := func(bearer string) (int, string) {
		t.Helper()
		return postBearer(t, fake, "/rustore/v1/projects/p1/messages:send", bearer,
			`{"message":{"token":"device-1","data":{"oncepush_id":"n1"},"notification":{"title":"T"}}}`)
	}
	if status, body := send("not-the-token"); status != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHENTICATED") {
		t.Errorf("wrong service token: %d %s, want 401", status, body)
	}
	if fake.Count() != 0 {
		t.Fatal("a refused request was recorded")
	}
	if status, body := send(fake.RuStoreToken()); status != http.StatusOK || body != "{}" {
		t.Fatalf("valid send: %d %s, want 200 {}", status, body)
	}
	reqs := fake.RequestsFor(provider.TransportRuStore)
	if len(reqs) != 1 || reqs[0].Token != "device-1" || reqs[0].NotificationID != "n1" {
		t.Fatalf("recorded %+v", reqs)
	}
}
