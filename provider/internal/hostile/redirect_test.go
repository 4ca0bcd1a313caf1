package hostile

import (
	"net/http"
	"testing"

	"github.com/oncepush/oncepush/provider"
)

// TestRedirectsAreNotFollowed: a push service (or anything answering in its
// place) that redirects to an internal address gets no request there, from
// any provider or from FCM's token fetch, whatever the redirect's status;
// the send is not counted as accepted.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			internal := w.internal.URL + "/latest/meta-data/iam/security-credentials/"
			w.answerWith(func(_ provider.Transport, rw http.ResponseWriter, _ *request) {
				rw.Header().Set("Location", internal)
				rw.WriteHeader(status)
			})
			for _, tr := range transports {
				if res := w.send(w.submission(tr)); res.Outcome == provider.OutcomeAccepted {
					t.Errorf("%s: a %d redirect was taken as accepted", tr, status)
				}
			}
			// FCM's token endpoint redirecting (a fresh provider: the
			// first one holds a token).
			w2 := newWorld(t)
			redirect := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				http.Redirect(rw, r, internal, status)
			})
			w2.token.Store(&redirect)
			if res := w2.send(w2.submission(provider.TransportFCM)); res.Outcome == provider.OutcomeAccepted {
				t.Errorf("fcm: a %d redirect of the token endpoint was taken as accepted", status)
			}
			if n := w.internalHits.Load() + w2.internalHits.Load(); n != 0 {
				t.Errorf("the internal service received %d requests", n)
			}
		})
	}
}
