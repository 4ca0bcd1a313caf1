package server

import (
	"reflect"
	"slices"
	"testing"

	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/internal/openapitest"
	"github.com/oncepush/oncepush/internal/strictjson"
)

// The request structs' json and api tags are what decode enforces; they must
// say what the OpenAPI document says: the same property names, the same
// required ones, null allowed in the same places.
func TestRequestTypesMirrorTheDocument(t *testing.T) {
	t.Parallel()
	spec, err := openapitest.Load(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	schemas := spec.Document()["components"].(map[string]any)["schemas"].(map[string]any)
	for name, typ := range map[string]reflect.Type{
		"NotificationRequest":    reflect.TypeFor[notificationRequest](),
		"DeviceRequest":          reflect.TypeFor[deviceRequest](),
		"DeviceAddress":          reflect.TypeFor[deviceAddress](),
		"UnregisterRequest":      reflect.TypeFor[unregisterRequest](),
		"PreferencesRequest":     reflect.TypeFor[preferencesBody](),
		"QuietHours":             reflect.TypeFor[quietHours](),
		"CampaignRequest":        reflect.TypeFor[campaignRequest](),
		"CampaignMessageRequest": reflect.TypeFor[campaignMessage](),
		"DeviceFilter":           reflect.TypeFor[deviceFilter](),
		"CampaignRecipients":     reflect.TypeFor[recipientsRequest](),
		"CampaignSchedule":       reflect.TypeFor[scheduleRequest](),
	} {
		schema := schemas[name].(map[string]any)
		if schema["additionalProperties"] != false {
			t.Errorf("%s: the document allows additional properties; decode refuses them", name)
		}
		props := schema["properties"].(map[string]any)
		var required []string
		for _, r := range asList(schema["required"]) {
			required = append(required, r.(string))
		}
		fields := strictjson.Fields(typ)
		var docNames, goNames []string
		for p := range props {
			docNames = append(docNames, p)
		}
		for _, f := range fields {
			goNames = append(goNames, f.Name)
			prop, ok := props[f.Name].(map[string]any)
			if !ok {
				continue
			}
			if got, want := f.Required, slices.Contains(required, f.Name); got != want {
				t.Errorf("%s.%s: api:\"required\" is %v, the document's required says %v", name, f.Name, got, want)
			}
			if got, want := f.Nullable, allowsNull(prop); got != want {
				t.Errorf("%s.%s: api:\"nullable\" is %v, the document allows null: %v", name, f.Name, got, want)
			}
		}
		slices.Sort(docNames)
		slices.Sort(goNames)
		if !slices.Equal(docNames, goNames) {
			t.Errorf("%s: the document's properties are %v, the Go type's %v", name, docNames, goNames)
		}
	}
}

// allowsNull reads a property schema's "type": [..., "null"] or a oneOf/anyOf
// branch {"type": "null"}.
func allowsNull(prop map[string]any) bool {
	if ts, ok := prop["type"].([]any); ok && slices.Contains(ts, any("null")) {
		return true
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		for _, b := range asList(prop[key]) {
			if m, ok := b.(map[string]any); ok && m["type"] == "null" {
				return true
			}
		}
	}
	return false
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
