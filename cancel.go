package oncepush

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncepush/oncepush/driver"
)

// CancelResult says what CancelMessage ended.
type CancelResult struct {
	// Canceled is the number of the message's deliveries that ended canceled.
	Canceled int
	// InFlight is how many of them had a submission in flight: handed, or
	// about to be handed, to a provider by a run. Those sends may still reach
	// their devices; their answers are recorded on the deliveries' devices.
	InFlight int
}

// ErrCampaignMessage: the message is a campaign's; CancelMessage refuses it
// (a *CampaignMessageError names the campaign). Cancel the campaign.
var ErrCampaignMessage = errors.New("oncepush: the message is a campaign's: cancel the campaign")

// CampaignMessageError is ErrCampaignMessage with the campaign's id.
type CampaignMessageError struct {
	MessageID, CampaignID int64
}

func (e *CampaignMessageError) Error() string {
	return fmt.Sprintf("oncepush: message %d is campaign %d's: cancel the campaign (CancelCampaign), which stops its expansion too",
		e.MessageID, e.CampaignID)
}

// Is makes errors.Is(err, ErrCampaignMessage) hold.
func (e *CampaignMessageError) Is(target error) bool { return target == ErrCampaignMessage }

// CancelMessage ends every pending delivery of the message canceled, those
// a run holds included. Once it returns, no new submission of the message
// starts, in this process or any other: a run marks a device sending only
// while its delivery is pending, and the ledger counts a marked device as
// submitted. Deliveries already final keep their status, so canceling twice,
// or a message that is done, cancels nothing. ErrNotFound: no such message
// (or its deliveries are gone). A campaign's message is refused with a
// *CampaignMessageError (ErrCampaignMessage), nothing canceled: its
// campaign would go on writing deliveries of it, so CancelCampaign is what
// stops it (D100). See docs/architecture.md, "Cancel".
func (c *Client[TTx]) CancelMessage(ctx context.Context, id int64) (CancelResult, error) {
	var res *driver.MessageCancelResult
	err := c.againOnConflict(ctx, "cancel message", func() (err error) {
		res, err = c.driver.Exec().MessageCancel(ctx, &driver.MessageCancelParams{Now: c.now(), MessageID: id})
		return err
	})
	if err != nil {
		return CancelResult{}, fmt.Errorf("oncepush: cancel message %d: %w", id, err)
	}
	if res.CampaignID != 0 {
		return CancelResult{}, &CampaignMessageError{MessageID: id, CampaignID: res.CampaignID}
	}
	for range res.Canceled {
		c.obs.Finished(StatusCanceled)
	}
	return CancelResult{Canceled: res.Canceled, InFlight: res.InFlight}, nil
}
