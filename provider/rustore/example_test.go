package rustore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/rustore"
	"github.com/oncepush/oncepush/pushtest"
)

// A provider wired to the fake RuStore server: one device accepts, the other
// token is dead.
func Example() {
	fake, err := pushtest.StartFakeServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	p, err := rustore.New(rustore.Config{
		ProjectID:    "my-project",
		ServiceToken: rustore.ServiceToken(fake.RuStoreToken()),
		BaseURL:      fake.URL + "/rustore",
		TLSConfig:    fake.TLSConfig(),
	})
	if err != nil {
		log.Fatal(err)
	}
	fake.Program(provider.TransportRuStore, "removed-app-token",
		pushtest.RuStoreError(404, "NOT_FOUND", "Requested entity was not found."))

	for _, token := range []provider.Token{"live-app-token", "removed-app-token"} {
		res := p.Send(context.Background(), &provider.Submission{
			Token: token,
			Title: "Заказ принят",
		})
		if res.Outcome == provider.OutcomeAccepted {
			fmt.Println(res.Outcome) // RuStore answers {}: no message id
		} else {
			fmt.Println(res.Outcome, res.Text)
		}
	}
	// Output:
	// accepted
	// invalid_token 404 NOT_FOUND: Requested entity was not found.
}
