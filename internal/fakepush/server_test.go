package fakepush

import "testing"

// startServer starts a fake server for the test and closes it when the test
// ends, as pushtest.NewFakeServer does.
func startServer(t *testing.T) *Server {
	t.Helper()
	s, err := Start(nil)
	if err != nil {
		t.Fatalf("start fake server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}
