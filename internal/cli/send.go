package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/config"
)

// sendFlags are the values of 'oncepush send'.
type sendFlags struct {
	to                                  scopeList
	title, body, typ, data, link, image string
	category, dedupeKey, scheduledAt    string
	ttl, ambiguity                      string
	asJSON                              bool
}

// sendFlagNames are the flags for the library's field names, so that an
// error names what the operator typed.
var sendFlagNames = map[string]string{
	"recipients": "--to", "title": "--title", "body": "--body", "type": "--type", "data": "--data",
	"link": "--link", "image": "--image", "category": "--category", "dedupKey": "--dedupe-key",
	"lifetime": "--ttl", "ambiguity": "--ambiguity",
}

// send queues one notification through the library and prints what it
// queued. It does not deliver.
func send(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	f := commonFlags(fs)
	var s sendFlags
	fs.Var(&s.to, "to", "recipients, repeatable or comma-separated (required)")
	fs.StringVar(&s.title, "title", "", "title (title or body is required)")
	fs.StringVar(&s.body, "body", "", "body text")
	fs.StringVar(&s.typ, "type", "", "notification type, such as invoice.paid")
	fs.StringVar(&s.data, "data", "", "data as a JSON object, such as '{\"invoice\":\"inv_2201\"}'")
	fs.StringVar(&s.link, "link", "", "in-app path a tap opens, such as /invoices/inv_2201")
	fs.StringVar(&s.image, "image", "", "https URL of an image")
	fs.StringVar(&s.category, "category", "", "category (preferences and ambiguity policy)")
	fs.StringVar(&s.dedupeKey, "dedupe-key", "", "dedup key: the same key to the same recipient queues once")
	fs.StringVar(&s.scheduledAt, "scheduled-at", "", "first send time, RFC 3339 (default now)")
	fs.StringVar(&s.ttl, "ttl", "", "how long after the scheduled time it may still be sent, such as 1h (default: engine.messageLifetime)")
	fs.StringVar(&s.ambiguity, "ambiguity", "", "resend or at-most-once (default: the category's, else engine.ambiguity)")
	fs.BoolVar(&s.asJSON, "json", false, "print the answer as JSON {id, queued, duplicates, duplicate}")
	if err := parse(fs, e, args); err != nil {
		return err
	}
	msg, opts, err := s.message()
	if err != nil {
		return err
	}

	st, db, err := open(ctx, e, f, true)
	if err != nil {
		return err
	}
	defer db.Close()
	cfg := st.ClientConfig()
	cfg.Logger = st.Logger(e.logFile)
	stk, err := db.Assemble(cfg, nil)
	if err != nil {
		return &config.Error{Setting: "engine", Problem: err.Error()}
	}
	// A recorded request, as the API's and with the same identity: the same
	// send again, from here or over HTTP, answers the first answer; a
	// different one under the key is refused.
	opts.RecordRequest = opts.DedupKey != ""
	res, err := stk.Client.Send(ctx, s.to, msg, opts)
	if errors.Is(err, oncepush.ErrDedupConflict) {
		return &config.Error{Setting: "--dedupe-key", Problem: "was used before for a different notification; use a new key for a new notification"}
	}
	if err != nil {
		return flagError(err)
	}
	return printSendResult(e.stdout, res, s.asJSON)
}

// message builds the library's input from the flags; what the library does
// not parse itself (JSON, times, durations) is checked here, naming the flag.
func (s *sendFlags) message() (oncepush.Message, *oncepush.SendOptions, error) {
	msg := oncepush.Message{Type: s.typ, Title: s.title, Body: s.body, Link: s.link, Image: s.image}
	opts := &oncepush.SendOptions{
		DedupKey: s.dedupeKey, Category: s.category, Ambiguity: oncepush.AmbiguityPolicy(s.ambiguity),
	}
	if s.data != "" {
		data, err := decodeObject(s.data)
		if err != nil {
			return msg, nil, &config.Error{Setting: "--data", Problem: err.Error()}
		}
		msg.Data = data
	}
	if s.scheduledAt != "" {
		t, err := time.Parse(time.RFC3339Nano, s.scheduledAt)
		if err != nil {
			return msg, nil, &config.Error{Setting: "--scheduled-at", Problem: fmt.Sprintf("%q is not an RFC 3339 time such as 2026-01-05T09:00:00Z", s.scheduledAt)}
		}
		opts.ScheduledAt = t
	}
	if s.ttl != "" {
		d, err := time.ParseDuration(s.ttl)
		if err != nil || d <= 0 {
			return msg, nil, &config.Error{Setting: "--ttl", Problem: fmt.Sprintf("%q is not a positive duration such as 1h or 30m", s.ttl)}
		}
		opts.Lifetime = d
	}
	return msg, opts, nil
}

// decodeObject decodes a JSON object, keeping numbers as written.
func decodeObject(s string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object, such as {\"invoice\":\"inv_2201\"}")
	}
	return obj, nil
}

var indexedField = regexp.MustCompile(`^(\w+)\[(\d+)\]$`)

// flagError gives a library validation error the flag's name.
func flagError(err error) error {
	var ve *oncepush.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	field, problem := ve.Field, ve.Message
	if m := indexedField.FindStringSubmatch(field); m != nil {
		i, _ := strconv.Atoi(m[2])
		field, problem = m[1], fmt.Sprintf("recipient %d: %s", i+1, problem)
	}
	if name, ok := sendFlagNames[field]; ok {
		return &config.Error{Setting: name, Problem: problem}
	}
	return err
}

func printSendResult(w io.Writer, res oncepush.SendResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"id": res.MessageID, "queued": res.Queued, "duplicates": res.Duplicates, "duplicate": res.Replayed})
	}
	id := strconv.FormatInt(res.MessageID, 10)
	if res.MessageID == 0 {
		id = "none (every recipient was a duplicate)"
	}
	duplicate := "false"
	if res.Replayed {
		duplicate = "true (the same send was made before with this dedupe key: this is its answer, and nothing new was queued)"
	}
	_, err := fmt.Fprintf(w, "id: %s\nqueued: %d\nduplicates: %d\nduplicate: %s\n", id, res.Queued, res.Duplicates, duplicate)
	return err
}
