package fcm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/fcmv1"
)

// The FCM HTTP v1 request body, as much of it as oncepush sends.
type sendRequest struct {
	Message message `json:"message"`
}

type message struct {
	Token        string            `json:"token"`
	Notification *notification     `json:"notification,omitempty"`
	Data         map[string]string `json:"data,omitempty"`
	Android      *androidConfig    `json:"android,omitempty"`
	APNs         *apnsConfig       `json:"apns,omitempty"`
	Webpush      *webpushConfig    `json:"webpush,omitempty"`
}

type notification struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	Image string `json:"image,omitempty"`
}

type androidConfig struct {
	CollapseKey string `json:"collapse_key,omitempty"`
	Priority    string `json:"priority"`
	TTL         string `json:"ttl,omitempty"`
}

type apnsConfig struct {
	Headers map[string]string `json:"headers"`
}

type webpushConfig struct {
	Headers    map[string]string  `json:"headers,omitempty"`
	FCMOptions *webpushFCMOptions `json:"fcm_options,omitempty"`
}

type webpushFCMOptions struct {
	Link string `json:"link"`
}

// DataLinkKey is the data key that carries Submission.Link to the app.
const DataLinkKey = "oncepush_link"

// buildMessage turns a submission into the request body. A message FCM would
// refuse for its size or its data keys gives a Result (rejected) instead:
// it is never sent.
func (p *Provider) buildMessage(s *provider.Submission) ([]byte, provider.Result) {
	m := message{Token: string(s.Token)}
	if s.Title != "" || s.Body != "" || s.Image != "" {
		m.Notification = &notification{Title: s.Title, Body: s.Body, Image: s.Image}
	}
	// s.Data is shared by every device of the delivery: copy before adding.
	if len(s.Data) > 0 || s.Link != "" {
		m.Data = make(map[string]string, len(s.Data)+1)
		for k, v := range s.Data {
			if reservedDataKey(k) {
				return nil, rejected(fmt.Sprintf("data key %q is reserved by FCM (from, message_type, google…, gcm…)", k))
			}
			m.Data[k] = v
		}
		if s.Link != "" {
			m.Data[DataLinkKey] = s.Link
		}
	}
	if n := fcmv1.PayloadSize(m.Notification, m.Data); n > MaxPayload {
		return nil, rejected(fmt.Sprintf("payload too large: notification and data are %d bytes encoded, FCM accepts at most %d", n, MaxPayload))
	}

	m.Android = &androidConfig{CollapseKey: s.CollapseID, Priority: "high"}
	apnsHeaders := map[string]string{"apns-priority": "10"}
	webHeaders := map[string]string{"Urgency": "high"}
	if s.CollapseID != "" {
		apnsHeaders["apns-collapse-id"] = s.CollapseID
		webHeaders["Topic"] = s.CollapseID
	}
	if !s.ExpiresAt.IsZero() {
		secs := strconv.FormatInt(fcmv1.TTLSeconds(p.clock.Now(), s.ExpiresAt, MaxTTL), 10)
		m.Android.TTL = secs + "s"
		webHeaders["TTL"] = secs
		apnsHeaders["apns-expiration"] = strconv.FormatInt(s.ExpiresAt.Unix(), 10)
	}
	m.APNs = &apnsConfig{Headers: apnsHeaders}
	m.Webpush = &webpushConfig{Headers: webHeaders}
	if p.webOrigin != "" && s.Link != "" {
		m.Webpush.FCMOptions = &webpushFCMOptions{Link: p.webOrigin + s.Link}
	}

	b, err := json.Marshal(sendRequest{Message: m})
	if err != nil { // map[string]string and strings: cannot happen
		return nil, rejected("encode the message: " + err.Error())
	}
	return b, provider.Result{}
}

// reservedDataKey reports the data keys FCM refuses.
func reservedDataKey(k string) bool {
	k = strings.ToLower(k)
	return k == "from" || k == "message_type" || strings.HasPrefix(k, "google") || strings.HasPrefix(k, "gcm")
}

func rejected(text string) provider.Result {
	return provider.Result{Outcome: provider.OutcomeRejected, Text: text}
}
