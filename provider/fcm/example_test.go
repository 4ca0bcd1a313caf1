package fcm_test

import (
	"context"
	"fmt"
	"log"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/fcm"
	"github.com/oncepush/oncepush/pushtest"
)

// A provider wired to the fake FCM server: one device accepts, the other
// token is no longer registered.
func Example() {
	fake, err := pushtest.StartFakeServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	p, err := fcm.New(fcm.Config{
		ServiceAccountJSON: fake.FCMServiceAccount("my-project"),
		BaseURL:            fake.URL + "/fcm",
		TLSConfig:          fake.TLSConfig(),
	})
	if err != nil {
		log.Fatal(err)
	}
	fake.Program(provider.TransportFCM, "uninstalled-app-token",
		pushtest.FCMError(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"))

	for _, token := range []provider.Token{"live-app-token", "uninstalled-app-token"} {
		res := p.Send(context.Background(), &provider.Submission{
			Token: token,
			Title: "Your order shipped",
		})
		if res.Outcome == provider.OutcomeAccepted {
			fmt.Println(res.Outcome, res.ProviderID)
		} else {
			fmt.Println(res.Outcome, res.Text)
		}
	}
	// Output:
	// accepted projects/my-project/messages/1
	// invalid_token 404 UNREGISTERED: Requested entity was not found.
}
