package oncepush

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/oncepush/oncepush/driver"
)

// A campaign's audience: whom it is sent to (Audience), which of their
// devices (DeviceFilter), and the rule the expansion and the claim apply to
// each device (audience): the filter, and well-formed tokens only.

// Audience says who a campaign is sent to.
type Audience string

const (
	// AudienceRecipients: the recipients uploaded with AddCampaignRecipients,
	// each to its devices that the filter selects.
	AudienceRecipients Audience = driver.AudienceRecipients
	// AudienceDevices: every registered device the filter selects.
	AudienceDevices Audience = driver.AudienceDevices
)

// DeviceFilter selects devices. An empty list selects every value; a device
// matches when it matches every list given.
type DeviceFilter struct {
	// Transports: any of.
	Transports []Transport `json:"transports,omitempty"`
	// Platforms: any of (Device.Platform, exactly).
	Platforms []string `json:"platforms,omitempty"`
	// Locales: any of; "en" matches "en" and "en-…", "en-GB" only "en-GB"
	// (case-insensitive).
	Locales []string `json:"locales,omitempty"`
	// Tags: all of (Device.Tags).
	Tags []string `json:"tags,omitempty"`
}

// checkFilter validates a filter and returns it in canonical form (tags
// sorted and distinct, locales in lower case).
func (c *clientCore) checkFilter(f DeviceFilter) (DeviceFilter, error) {
	out := DeviceFilter{}
	for name, n := range map[string]int{"filter.transports": len(f.Transports), "filter.platforms": len(f.Platforms), "filter.locales": len(f.Locales)} {
		if n > MaxFilterValues {
			return out, invalid(name, "has %d entries, at most %d", n, MaxFilterValues)
		}
	}
	for i, t := range f.Transports {
		if _, err := c.transports.spec(fmt.Sprintf("filter.transports[%d]", i), t); err != nil {
			return out, err
		}
	}
	for i, p := range f.Platforms {
		if p == "" || len(p) > 32 {
			return out, invalid(fmt.Sprintf("filter.platforms[%d]", i), "must be 1 to 32 bytes")
		}
		if err := checkText(fmt.Sprintf("filter.platforms[%d]", i), p); err != nil {
			return out, err
		}
	}
	for i, l := range f.Locales {
		if l == "" || len(l) > 35 || strings.ContainsAny(l, " \t\n/") {
			return out, invalid(fmt.Sprintf("filter.locales[%d]", i), "%q is not a BCP 47 language tag", l)
		}
		if err := checkText(fmt.Sprintf("filter.locales[%d]", i), l); err != nil {
			return out, err
		}
		out.Locales = append(out.Locales, strings.ToLower(l))
	}
	tags, err := normalizeTags("filter.tags", f.Tags)
	if err != nil {
		return out, err
	}
	out.Transports, out.Platforms, out.Tags = slices.Clone(f.Transports), slices.Clone(f.Platforms), tags
	return out, nil
}

// matches reports whether the filter selects the device.
func (f *DeviceFilter) matches(d *driver.Device) bool {
	if len(f.Transports) > 0 && !slices.Contains(f.Transports, Transport(d.Transport)) {
		return false
	}
	if len(f.Platforms) > 0 && !slices.Contains(f.Platforms, d.Platform) {
		return false
	}
	if len(f.Locales) > 0 {
		loc := strings.ToLower(d.Locale)
		if !slices.ContainsFunc(f.Locales, func(l string) bool { return loc == l || strings.HasPrefix(loc, l+"-") }) {
			return false
		}
	}
	for _, t := range f.Tags {
		if _, found := slices.BinarySearch(d.Tags, t); !found {
			return false
		}
	}
	return true
}

// audience is a campaign message's device rule, as the claim and the
// expansion apply it: the filter, and well-formed tokens only.
type audience struct {
	filter DeviceFilter
}

// parseAudience reads a message's audience column; nil for a message
// that is not a campaign's.
func parseAudience(doc []byte) (*audience, error) {
	if doc == nil {
		return nil, nil
	}
	a := &audience{}
	if err := json.Unmarshal(doc, &a.filter); err != nil {
		return nil, fmt.Errorf("oncepush: read campaign audience: %w", err)
	}
	return a, nil
}

// reaches reports whether the campaign targets the device, and the key of
// its token as its transport makes it canonical: the filter selects it and
// its token is well formed for its transport (a malformed one is never
// sent). Two registrations whose tokens have one key are one device.
func (a *audience) reaches(t *transportTable, d *driver.Device) (key string, ok bool) {
	if !a.filter.matches(d) {
		return "", false
	}
	return wellFormed(t, d)
}

// wellFormed returns the canonical key of the device's token, or false
// when its transport's rules refuse the token.
func wellFormed(t *transportTable, d *driver.Device) (key string, ok bool) {
	if t == nil { // a plan's test rules: tokens taken as stored
		return d.TokenKey, true
	}
	_, key, err := t.normalizeToken(Transport(d.Transport), d.Token)
	return key, err == nil
}

// devices keeps the devices of one recipient that the campaign reaches,
// one per token key: what the claim sends a campaign delivery to.
func (a *audience) devices(t *transportTable, ds []*driver.Device) []*driver.Device {
	var out []*driver.Device
	seen := map[pairKey]bool{}
	for _, d := range ds {
		key, ok := a.reaches(t, d)
		if !ok || seen[pairKey{d.Transport, key}] {
			continue
		}
		seen[pairKey{d.Transport, key}] = true
		out = append(out, d)
	}
	return out
}
