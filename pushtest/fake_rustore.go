package pushtest

// fakeRuStore is the fake RuStore protocol (to be written: issue 3).
type fakeRuStore struct{}

func newFakeRuStore(s *FakeServer) *fakeRuStore { return &fakeRuStore{} }
