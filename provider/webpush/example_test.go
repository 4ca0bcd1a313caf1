package webpush_test

import (
	"fmt"
	"log"

	"github.com/oncepush/oncepush/provider/webpush"
)

// GenerateVAPIDKeys makes the key pair once; the private key goes into the
// server's configuration, the public key into the web page that subscribes.
func ExampleGenerateVAPIDKeys() {
	publicKey, privateKey, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		log.Fatal(err)
	}
	// base64url without padding: a 65-byte point and a 32-byte scalar.
	fmt.Println(len(publicKey), len(privateKey))
	// Output: 87 43
}

func ExampleNew() {
	p, err := webpush.New(webpush.Config{
		// RFC 8291's example key, for the example only: use your own from
		// GenerateVAPIDKeys, and keep it secret.
		VAPIDPrivateKey: "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw",
		VAPIDSubject:    "mailto:push-ops@example.com",
		// AllowedHosts left empty: the browsers' push services.
	})
	if err != nil {
		log.Fatal(err)
	}
	// The web page passes this to PushManager.subscribe as applicationServerKey.
	fmt.Println(p.VAPIDPublicKey())
	// Output: BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8
}
