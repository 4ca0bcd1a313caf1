package pushtest

// fakeFCM is the fake FCM protocol (to be written: issue 3).
type fakeFCM struct{}

func newFakeFCM(s *FakeServer) *fakeFCM { return &fakeFCM{} }
