// Package wallclock is the process's wall clock, where the engine reads one
// when no oncepush.Clock is configured: the SQLite driver's "now" for every
// statement (leases, due times, backoff, timestamps), the providers' time
// source (JWT iat and exp, TTL headers, Retry-After dates) and the server's
// (its activity counts, a send's schedule checked against now). PostgreSQL
// statements read the database's now() instead and never come here, and
// neither do the run budget and lease bounds, which are measured on the
// monotonic clock (time.Now's reading compared with time.Now's).
//
// Now is time.Now. Built with the tag oncepush_failpoints (test builds
// only, as package failpoint), a harness can step it to test what a clock
// step does to a running process — without touching the machine's clock,
// which other processes share:
//
//	ONCEPUSH_CLOCK_DIR=dir  the file dir/<pid> holds an offset, a Go duration
//	                        ("-3m", "90s"; absent: 0); Now is time.Now plus
//	                        it. The process reads the file as it starts and
//	                        again on each SIGUSR1, and after each read writes
//	                        dir/<pid>.ack: how many reads it has made, so the
//	                        harness knows when a step has taken effect.
//
// An offset moves the monotonic reading along with the wall reading, so two
// readings on either side of a step differ by the step even where Go would
// compare monotonic readings: a harsher step than the kernel's, which leaves
// the monotonic clock alone.
package wallclock
