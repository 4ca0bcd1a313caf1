package api

import "time"

// The deliveries' wire format: what GET /v1/notifications/{id}/deliveries
// and GET /v1/recipients/{recipient}/deliveries answer (the document's
// Delivery, DeviceAttempt and DeliveryPage), for the server that encodes it
// and for Go clients that decode it.

// Delivery is one recipient's delivery of a notification, with every
// device's ledger row.
type Delivery struct {
	ID             int64  `json:"id"`
	NotificationID int64  `json:"notificationId"`
	Recipient      string `json:"recipient"`
	OncepushID     string `json:"oncepushId"`
	DedupeKey      string `json:"dedupeKey"`
	// Type and Title are the notification's, so that a recipient's history
	// says what each delivery was.
	Type  string `json:"type"`
	Title string `json:"title"`
	// Status is pending, sent, failed, ambiguous, skipped, no_devices,
	// expired or canceled.
	Status string `json:"status"`
	// Attempts counts the runs that tried and must try again.
	Attempts int `json:"attempts"`
	// NextAttemptAt is set while the delivery is pending.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	// LastError is why it is not (yet) sent, in the provider's words, or
	// why it ended without a send ("skipped: …", "expired: …", "canceled").
	LastError  string     `json:"lastError"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	// MayHaveReachedTwice is true when a device may have received this
	// delivery more than once: it was sent again after an answer was lost
	// (a device's ReachedAtMost is 2 or more). A retry after a refusal is
	// not a second copy.
	MayHaveReachedTwice bool            `json:"mayHaveReachedTwice"`
	Devices             []DeviceAttempt `json:"devices"`
}

// DeviceAttempt is the ledger row of one (delivery, device) pair.
type DeviceAttempt struct {
	DeviceID  int64  `json:"deviceId"`
	Transport string `json:"transport"`
	// State is pending, sending, accepted, invalid, retry, rejected or
	// ambiguous.
	State string `json:"state"`
	// Submissions counts the calls to the provider; Ambiguous those whose
	// answer was lost.
	Submissions int `json:"submissions"`
	Ambiguous   int `json:"ambiguous"`
	// ReachedAtMost counts the submissions that may have reached the
	// device: each whose answer was lost, and the one accepted or still in
	// flight. 0: the device has not got it; 2 or more: it may have it twice.
	ReachedAtMost int `json:"reachedAtMost"`
	// ProviderID is the provider's id of the accepted message.
	ProviderID  string     `json:"providerId"`
	Error       string     `json:"error"`
	FirstSentAt *time.Time `json:"firstSentAt"`
	LastSentAt  *time.Time `json:"lastSentAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
}

// DeliveryPage is a page of deliveries; NextCursor is nil on the last.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextCursor *string    `json:"nextCursor"`
}
