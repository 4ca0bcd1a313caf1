package pushtest

// fakeWebPush is the fake WebPush protocol (to be written: issue 3).
type fakeWebPush struct{}

func newFakeWebPush(s *FakeServer) *fakeWebPush { return &fakeWebPush{} }
