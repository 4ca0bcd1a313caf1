package pushtest

// fakeAPNs is the fake APNs protocol (to be written: issue 3).
type fakeAPNs struct{}

func newFakeAPNs(s *FakeServer) *fakeAPNs { return &fakeAPNs{} }
