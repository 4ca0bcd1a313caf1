package fakepush

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/oncepush/oncepush/provider"
)

// fakeRuStore is the fake RuStore (VK Push) send API under /rustore. It
// accepts one service token, RuStoreToken, for every project.
type fakeRuStore struct {
	s     *Server
	token string
}

// rustore is the server's RuStore state.
func (s *Server) rustore() *fakeRuStore { return s.speaks[provider.TransportRuStore].(*fakeRuStore) }

func newFakeRuStore(s *Server) *fakeRuStore {
	f := &fakeRuStore{s: s, token: rand.Text() + rand.Text()}
	s.mux.HandleFunc("POST /rustore/v1/projects/{project}/messages:send", f.send)
	return f
}

// RuStoreToken returns the service token the fake RuStore API accepts (any
// other bearer is answered 401 UNAUTHENTICATED and not recorded).
func (s *Server) RuStoreToken() string { return s.rustore().token }

// RuStoreError is a RuStore error answer {"error": {"code", "message",
// "status"}}, for example:
//
//	pushtest.RuStoreError(404, "NOT_FOUND", "Requested entity was not found.")
func RuStoreError(status int, statusName, message string) Answer {
	return Answer{Status: status, Body: rustoreErrorBody(status, statusName, message)}
}

func rustoreErrorBody(code int, status, message string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "status": status}})
	return string(b)
}

func rustoreRefuse(w http.ResponseWriter, code int, status, message string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, rustoreErrorBody(code, status, message))
}

// rustoreSendRequest is the body of messages:send as far as the fake checks
// it; unknown fields are refused so a misspelt field shows in tests.
type rustoreSendRequest struct {
	Message *struct {
		Token        string            `json:"token"`
		Data         map[string]string `json:"data"`
		Notification *v1Notification   `json:"notification"`
		Android      *struct {
			TTL          string          `json:"ttl"`
			Notification json.RawMessage `json:"notification"`
		} `json:"android"`
	} `json:"message"`
}

// send is POST /rustore/v1/projects/{project}/messages:send.
func (f *fakeRuStore) send(w http.ResponseWriter, r *http.Request) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(bearer), []byte(f.token)) != 1 {
		rustoreRefuse(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Invalid service token.")
		return
	}
	var req rustoreSendRequest
	body, ok := readV1Send(w, r, &req, func(message string) {
		rustoreRefuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", message)
	}, "Invalid JSON payload: ")
	if !ok {
		return
	}
	m := req.Message
	switch {
	case m == nil:
		rustoreRefuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "message is required")
		return
	case m.Token == "":
		rustoreRefuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "message.token is required")
		return
	case m.Android != nil && m.Android.TTL != "" && !protoDuration.MatchString(m.Android.TTL):
		rustoreRefuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("invalid message.android.ttl %q", m.Android.TTL))
		return
	}
	f.s.serve(w, r, Request{
		Transport:      provider.TransportRuStore,
		Token:          m.Token,
		NotificationID: m.Data["oncepush_id"],
		Payload:        body,
		Header:         r.Header,
	}, func(w http.ResponseWriter, _ int64) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, "{}")
	})
}
