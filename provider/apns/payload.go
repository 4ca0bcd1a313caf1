package apns

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/oncepush/oncepush/provider"
)

// payload builds the notification's JSON: the aps dictionary, then the
// message data at the top level (oncepush_id among it), oncepush_link and
// oncepush_image. s.Data is read, never changed.
func (p *Provider) payload(s *provider.Submission) ([]byte, error) {
	if _, ok := s.Data["aps"]; ok {
		return nil, errors.New(`data key "aps" is reserved by APNs`)
	}
	doc := make(map[string]any, len(s.Data)+5)
	for k, v := range s.Data {
		doc[k] = v
	}
	aps := map[string]any{}
	if p.pushType == PushTypeBackground {
		// A background notification must not carry an alert; the app gets
		// the text as data and decides what to do with it.
		aps["content-available"] = 1
		if s.Title != "" {
			doc["oncepush_title"] = s.Title
		}
		if s.Body != "" {
			doc["oncepush_body"] = s.Body
		}
	} else {
		alert := map[string]string{}
		if s.Title != "" {
			alert["title"] = s.Title
		}
		if s.Body != "" {
			alert["body"] = s.Body
		}
		aps["alert"] = alert
		aps["sound"] = "default"
		if s.Image != "" {
			// Lets the app's notification service extension fetch the image.
			aps["mutable-content"] = 1
		}
	}
	doc["aps"] = aps
	if s.Link != "" {
		doc["oncepush_link"] = s.Link
	}
	if s.Image != "" {
		doc["oncepush_image"] = s.Image
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<" as \u003c would cost 5 bytes of the 4096
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
