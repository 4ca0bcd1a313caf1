package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// gateway is a push service of the application's own: it answers an HTTP
// status, and for an accepted push the id it gave it. (Here, a function.)
type gateway func(token, title string) (status int, id string, err error)

// relay is a custom Provider for the FCM transport that hands each
// notification to the gateway. What makes it a good oncepush provider is how
// it classifies every answer: only a proven "not sent" is Unsent, and a
// request that may have been written is maybe-sent, never retried as if it
// had not been.
type relay struct{ send gateway }

func (r *relay) Transport() provider.Transport { return provider.TransportFCM }

func (r *relay) Send(ctx context.Context, s *provider.Submission) provider.Result {
	// The engine may have stopped this send while the process was frozen:
	// ask right before writing anything.
	if err := provider.CheckStart(ctx); err != nil {
		return provider.Result{Outcome: provider.OutcomeRetry, Text: err.Error(), Unsent: true}
	}
	status, id, err := r.send(string(s.Token), s.Title)
	switch {
	case err != nil: // the request may have left: the answer is lost
		return provider.Result{Outcome: provider.OutcomeMaybeSent, Text: err.Error()}
	case status == http.StatusOK:
		return provider.Accepted(id)
	case status == http.StatusNotFound:
		return provider.Result{Outcome: provider.OutcomeInvalidToken, Text: "404 unknown device"}
	case status == http.StatusTooManyRequests:
		return provider.Result{Outcome: provider.OutcomeRetry, Text: "429 slow down", RetryAfter: 30 * time.Second}
	case status >= 500:
		return provider.Result{Outcome: provider.OutcomeRetry, Text: fmt.Sprintf("%d", status)}
	default:
		return provider.Result{Outcome: provider.OutcomeRejected, Text: fmt.Sprintf("%d", status)}
	}
}

// A custom provider implements Transport and Send and classifies every
// answer into an Outcome; the engine does the rest (retries, backoff, the
// ledger). Pass it in oncepush.Config.Providers.
func Example_customProvider() {
	var p provider.Provider = &relay{send: func(token, title string) (int, string, error) {
		switch token {
		case "gone":
			return http.StatusNotFound, "", nil
		case "lost":
			return 0, "", errors.New("read: connection reset by peer")
		}
		return http.StatusOK, "gw-1", nil
	}}
	// A Token prints itself masked (it is a secret); these are made up.
	for _, token := range []provider.Token{"device-a", "gone", "lost"} {
		res := p.Send(context.Background(), &provider.Submission{Token: token, Title: "Hello"})
		fmt.Printf("%s: %s %s%s\n", string(token), res.Outcome, res.ProviderID, res.Text)
	}
	// Output:
	// device-a: accepted gw-1
	// gone: invalid_token 404 unknown device
	// lost: maybe_sent read: connection reset by peer
}
