// Package pushtest holds what tests of oncepush and of applications that embed
// it import on purpose: Provider, an in-process fake push provider that records
// every submission and answers what the test programs; Clock, a clock the
// test moves by hand; and FakeServer, the fake FCM, APNs, Web Push, RuStore
// and Huawei Push Kit services that the real provider clients (provider/…) talk to over
// loopback HTTP/2 (pushtest/fakeproviders wires them up). Give the fake and
// the client one Clock and the providers' tokens expire as the test moves it.
package pushtest
