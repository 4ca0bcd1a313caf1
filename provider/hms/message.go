package hms

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/fcmv1"
)

// The push-type header's values oncepush sends: a message with a title or a
// body is a notification (alert), one with neither is a background message
// that wakes the app with its data. Push Kit's other kinds (1 widget
// update, 2 voice, 7 live view, 10 in-app call) carry payloads of their own
// that a oncepush message does not describe.
const (
	PushTypeAlert      = "0"
	PushTypeBackground = "6"
)

// DataLinkKey is the data key that carries the message's link: a HarmonyOS
// notification opens the app (clickAction.actionType 0) with the data, and
// the app opens the link itself.
const DataLinkKey = "oncepush_link"

// sendRequest is the body of POST /v3/{projectId}/messages:send.
type sendRequest struct {
	Payload     payload      `json:"payload"`
	PushOptions *pushOptions `json:"pushOptions,omitempty"`
	Target      target       `json:"target"`
}

// payload is push-type 0's notification, or push-type 6's extraData.
type payload struct {
	Notification *notification `json:"notification,omitempty"`
	ExtraData    string        `json:"extraData,omitempty"`
}

type notification struct {
	Category    string      `json:"category,omitempty"`
	Title       string      `json:"title"`
	Body        string      `json:"body"`
	Image       string      `json:"image,omitempty"`
	ClickAction clickAction `json:"clickAction"`
}

type clickAction struct {
	// ActionType 0 opens the app's home page, which reads Data.
	ActionType int               `json:"actionType"`
	Data       map[string]string `json:"data,omitempty"`
}

type pushOptions struct {
	// TTL is how long Push Kit keeps the message for an offline device, in
	// seconds.
	TTL int64 `json:"ttl"`
}

type target struct {
	Token []string `json:"token"`
}

// buildMessage turns a submission into the request body and its push-type,
// or a rejected Result for a message too large to send.
func (p *Provider) buildMessage(s *provider.Submission) (body []byte, pushType string, res provider.Result) {
	// s.Data is shared by every device of the delivery: copy before adding.
	data := maps.Clone(s.Data)
	if s.Link != "" {
		if data == nil {
			data = map[string]string{}
		}
		data[DataLinkKey] = s.Link
	}
	var req sendRequest
	if s.Title != "" || s.Body != "" || s.Image != "" {
		pushType = PushTypeAlert
		req.Payload.Notification = &notification{Category: p.category, Title: s.Title, Body: s.Body, Image: s.Image,
			ClickAction: clickAction{ActionType: 0, Data: data}}
	} else {
		pushType = PushTypeBackground
		if len(data) > 0 {
			b, err := json.Marshal(data)
			if err != nil { // a map of strings: cannot happen
				return nil, "", rejected("encode the data: %v", err)
			}
			req.Payload.ExtraData = string(b)
		}
	}
	if !s.ExpiresAt.IsZero() {
		// Push Kit refuses a message whose expiry is already past
		// (80100004); one that expires now is kept for a second.
		req.PushOptions = &pushOptions{TTL: max(fcmv1.TTLSeconds(p.clock.Now(), s.ExpiresAt, MaxTTL), 1)}
	}
	// Push Kit's limit counts the body without the device token.
	req.Target.Token = []string{""}
	measured, err := json.Marshal(req)
	if err != nil {
		return nil, "", rejected("encode the message: %v", err)
	}
	if n := len(measured); n > MaxPayload {
		return nil, "", rejected("payload too large: the message is %d bytes encoded (without the token), Push Kit takes at most %d", n, MaxPayload)
	}
	req.Target.Token[0] = string(s.Token)
	body, err = json.Marshal(req)
	if err != nil {
		return nil, "", rejected("encode the message: %v", err)
	}
	return body, pushType, provider.Result{}
}

func rejected(format string, args ...any) provider.Result {
	return provider.Result{Outcome: provider.OutcomeRejected, Text: fmt.Sprintf(format, args...)}
}
