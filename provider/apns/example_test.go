package apns_test

import (
	"context"
	"fmt"
	"log"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/apns"
	"github.com/oncepush/oncepush/pushtest"
)

// A provider pointed at the fake APNs of package pushtest, as in an
// integration test. In production, leave Host and TLSConfig unset and read
// the key with ReadKeyFile.
func ExampleNew() {
	fake, err := pushtest.StartFakeServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	key, keyID, teamID := fake.APNsKey()

	p, err := apns.New(apns.Config{
		Key:       key,
		KeyID:     keyID,
		TeamID:    teamID,
		Topic:     "com.example.app",
		Host:      fake.URL,
		TLSConfig: fake.TLSConfig(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	res := p.Send(context.Background(), &provider.Submission{
		SubmissionID: "1b4e28ba-2fa1-51d2-883f-0016d3cca427",
		Token:        "8f1d0e6a1c3b5d7f9e2a4c6e8b0d2f4a6c8e0a2b4d6f8a0c2e4a6b8d0f2a4c6e",
		Title:        "Your order shipped",
		Data:         map[string]string{"oncepush_id": "0123456789abcdef0123456789abcdef"},
	})
	fmt.Println(res.Outcome, res.ProviderID)
	// Output: accepted 1b4e28ba-2fa1-51d2-883f-0016d3cca427
}
