package server

// Route is a route of a server's table, as tests see it.
type Route struct {
	Method, Path string
	// Scope is the scope a key needs; "" for a route that asks for no key.
	Scope string
}

// RoutesOf returns the table s registered its handlers from.
func RoutesOf[TTx any](s *Server[TTx]) []Route {
	out := make([]Route, 0, len(s.served))
	for _, r := range s.served {
		out = append(out, Route{Method: r.method, Path: r.path, Scope: r.scope})
	}
	return out
}

// The answers' shapes, as the server writes them, for the tests to read
// answers with. That the tests share them proves nothing about the wire: every
// exchange of the tests is checked against the OpenAPI document, whose
// schemas require every property and allow no other.
type (
	SendAnswer         = sendAnswer
	NotificationView   = notificationView
	DeliveryView       = deliveryView
	AttemptView        = attemptView
	DeliveryPage       = deliveryPage
	DeviceView         = deviceView
	DevicePage         = devicePage
	Preferences        = preferencesBody
	QuietHours         = quietHours
	CampaignView       = campaignView
	CampaignTotals     = campaignTotals
	CampaignNotWritten = campaignNotWritten
	CampaignCancel     = campaignCancel
	CampaignPage       = campaignPage
	PageAnswer         = pageAnswer
)

// ActivityView is GET /v1/activity.
type ActivityView = activityView

// ActivityTransport is a transport's part of GET /v1/activity.
type ActivityTransport = transportView
