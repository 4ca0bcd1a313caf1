// Package failpoint kills the process at named steps of the delivery path, so
// crash tests can stop a worker exactly there. It is compiled in only with the
// build tag oncepush_failpoints; without it Hit does nothing and costs nothing.
//
// With the tag, ONCEPUSH_FAILPOINT names the step at which the process sends
// itself SIGKILL the first time it gets there:
//
//	claim-committed  a claim that leased deliveries has committed; nothing sent
//	answered         every send of the batch has its answer; nothing recorded
//	recorded         the batch's record has committed
//	campaign-batch   a campaign expansion batch has run its statements (the
//	                 deliveries written, the cursor moved) and not committed
//
// ONCEPUSH_FAILPOINT_AFTER=k lets the process pass the step k times and kills
// it at the (k+1)th: a test that needs k campaign batches committed before
// the one that dies sets it.
package failpoint

// Steps of the delivery path, in order, then of a campaign's expansion.
const (
	ClaimCommitted = "claim-committed"
	Answered       = "answered"
	Recorded       = "recorded"
	CampaignBatch  = "campaign-batch"
)
