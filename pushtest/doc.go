// Package pushtest holds what tests of oncepush and of applications that embed
// it import on purpose: Provider, an in-process fake push provider that records
// every submission and answers what the test programs, and Clock, a clock the
// test moves by hand.
package pushtest
