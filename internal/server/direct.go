package server

import (
	"context"

	"github.com/oncepush/oncepush"
)

// deviceAddress is a device of a direct send: NotificationRequest.devices.
type deviceAddress struct {
	Transport string     `json:"transport" api:"required"`
	Token     tokenField `json:"token" api:"required"`
}

// addressees reads whom the request names: its recipients, or the devices
// of a direct send, exactly one of the two. The send checks them (a direct
// send's devices under their implicit recipients, which its identity,
// Client.RequestHash, is computed over).
func (s *Server[TTx]) addressees(req *notificationRequest) (recipients []string, devices []oncepush.DeviceAddress, err error) {
	switch {
	case req.Recipients != nil && req.Devices != nil:
		return nil, nil, fieldProblem(CodeInvalidField, "devices", "name recipients or devices, not both")
	case req.Devices == nil && req.Recipients == nil:
		return nil, nil, fieldProblem(CodeMissingField, "recipients", "name the recipients, or the devices of a direct send")
	case req.Devices == nil:
		return *req.Recipients, nil, nil
	}
	devices = make([]oncepush.DeviceAddress, len(*req.Devices))
	for i, d := range *req.Devices {
		devices[i] = oncepush.DeviceAddress{Transport: oncepush.Transport(d.Transport), Token: oncepush.Token(d.Token)}
	}
	return nil, devices, nil
}

// send queues the notification: to the recipients, or directly to the
// devices when there are any.
func (s *Server[TTx]) send(ctx context.Context, recipients []string, devices []oncepush.DeviceAddress, msg oncepush.Message, opts *oncepush.SendOptions) (oncepush.SendResult, error) {
	if devices != nil {
		return s.client.SendToDevices(ctx, devices, msg, opts)
	}
	return s.client.Send(ctx, recipients, msg, opts)
}
