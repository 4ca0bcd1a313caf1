package oncepush

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"
)

// Defaults of Config, named so that documentation and code cannot drift.
const (
	BatchSizeDefault              = 100
	WorkersDefault                = 2
	ConcurrentSendsDefault        = 256
	PipelineDepthDefault          = 4
	RunBudgetDefault              = 10 * time.Second
	SendTimeoutDefault            = 15 * time.Second
	MaxAttemptsDefault            = 6
	BackoffMinDefault             = 15 * time.Second
	BackoffMaxDefault             = time.Hour
	MessageLifetimeDefault        = 24 * time.Hour
	RetentionDefault              = 7 * 24 * time.Hour
	MaxDevicesPerRecipientDefault = 10
	CleanupIntervalDefault        = 10 * time.Minute
	PollIntervalDefault           = time.Second
	CampaignIntervalDefault       = time.Second
	CampaignBatchDefault          = 1000
	CampaignMaxTriesDefault       = 5
	SendGroupsDefault             = 4
)

// Category configures one declared notification category.
type Category struct {
	// Ambiguity overrides Config.Ambiguity for this category's messages.
	Ambiguity AmbiguityPolicy `json:"ambiguity,omitempty"`
}

// Config configures a Client. The zero value of every field means its default.
//
// The json tags name the settings of the server's configuration file (its
// "engine" section), which decodes into a Config directly, durations written
// as strings such as "10s"; fields tagged "-" are not settings.
type Config struct {
	// Providers serve the transports; at most one per transport. A device whose
	// transport has no provider is settled as rejected with a text that says so.
	// A provider that implements ClockUser is given Clock, when set.
	Providers []Provider `json:"-"`

	// Transports are the transports the client knows: their token rules,
	// payload limits and reserved data keys (see TransportSpec). A device,
	// provider or unregistration naming another transport is refused. Nil
	// means BuiltinTransports(); add a transport with
	// append(BuiltinTransports(), spec).
	Transports []TransportSpec `json:"-"`

	// Eligibility decides at claim time who receives what. Nil sends to everyone.
	Eligibility Eligibility `json:"-"`

	// RecipientDeleters take part in DeleteRecipient: each deletes what its
	// owner keeps about the recipient (the server's preferences, say) in the
	// transaction that deletes the engine's rows, in order. Default: none.
	RecipientDeleters []RecipientDeleter `json:"-"`

	// Categories, when not nil, declares the categories a send may name (an
	// unknown one is refused) and their settings.
	Categories map[string]Category `json:"-"`

	// BatchSize is how many deliveries one claim takes. Default 100.
	BatchSize int `json:"batchSize,omitempty"`
	// Workers is how many runs one client drives at once. Default 2: one claims
	// and records while another's sends are in flight.
	Workers int `json:"workers,omitempty"`
	// ConcurrentSends bounds the sends in flight per transport of the whole
	// client — every run of every worker shares one window — so a process
	// killed leaves at most this many requests per transport with no
	// answer. It is also the number of unfinished pairs below which a run
	// claims its next batch while earlier ones are still sending. Default 256.
	ConcurrentSends int `json:"concurrentSends,omitempty"`
	// PipelineDepth is how many batches one run has sending or recording at
	// once: it claims the next while earlier ones are in flight. 1 claims
	// only once the previous batch is recorded. Default 4, at most 64.
	PipelineDepth int `json:"pipelineDepth,omitempty"`
	// SendGroups is how many groups of concurrent Send and SendToDevices
	// calls one client writes at once, each group in one transaction with
	// one commit; calls that arrive while that many are being written wait
	// and form the next group. Default SendGroupsDefault (4), or 1 with a
	// driver that lets one transaction write at a time
	// (driver.SingleWriter: SQLite), where more groups would only wait for
	// the write lock, and be smaller.
	SendGroups int `json:"sendGroups,omitempty"`
	// RunBudget bounds a run: no send starts after it, and the run ends. Default 10 s.
	RunBudget time.Duration `json:"runBudget,omitempty"`
	// SendTimeout bounds one provider call. Default 15 s.
	SendTimeout time.Duration `json:"sendTimeout,omitempty"`
	// Lease is how long a claim owns its deliveries. Default RunBudget +
	// 2×SendTimeout + 1 min; it must exceed RunBudget + SendTimeout.
	Lease time.Duration `json:"lease,omitempty"`
	// MaxAttempts is the number of retryable failures after which a delivery
	// ends (failed, or sent if some device accepted). Default 6.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// BackoffMin and BackoffMax bound the retry delay, which doubles from the
	// minimum at each attempt, ±20 % jitter. Defaults 15 s and 1 h. A provider's
	// Retry-After wins when longer.
	BackoffMin time.Duration `json:"backoffMin,omitempty"`
	BackoffMax time.Duration `json:"backoffMax,omitempty"`
	// MessageLifetime is the default lifetime of a message. Default 1 day.
	MessageLifetime time.Duration `json:"messageLifetime,omitempty"`
	// Retention is how long finished deliveries (and their dedup keys) are kept.
	// Default 7 days.
	Retention time.Duration `json:"retention,omitempty"`
	// MaxDevicesPerRecipient is how many most recently registered devices a
	// recipient keeps. Default 10.
	MaxDevicesPerRecipient int `json:"maxDevicesPerRecipient,omitempty"`
	// CleanupInterval is how often a started client tries to run cleanup (one
	// process at a time does). Default 10 min.
	CleanupInterval time.Duration `json:"cleanupInterval,omitempty"`
	// CampaignInterval is how often a started client looks for campaign
	// work (a scheduled campaign due, an expansion to go on with) when it
	// has found none. Default 1 s.
	CampaignInterval time.Duration `json:"campaignInterval,omitempty"`
	// CampaignBatch is how many recipients one expansion batch writes
	// deliveries for, in one transaction. Default 1000, at most 10000.
	CampaignBatch int `json:"campaignBatch,omitempty"`
	// CampaignMaxTries is how many expansion tries in a row may fail (a
	// crashed process's try counts) before the campaign is interrupted: by
	// the step whose failed try was the last, or, for a try that never
	// ended, by the next step a Lease after it began. Default 5.
	CampaignMaxTries int `json:"campaignMaxTries,omitempty"`
	// CampaignCeilings bound, per transport, how many device submissions of
	// campaign deliveries every process together starts in a minute, so a
	// large campaign stays under the provider's quota (FCM's default project
	// quota is 600,000 a minute; going over earns QUOTA_EXCEEDED for the rest
	// of the minute, which pauses transactional sends too). Transactional
	// sends neither count nor wait: leave them the rest of the quota. Each
	// minute is cut into up to 60 windows whose allowances sum to the
	// ceiling (D96). A ceiling must be at least MaxDevicesPerRecipient, the
	// most submissions one delivery can need. Default: none.
	CampaignCeilings map[Transport]int `json:"campaignCeilings,omitempty"`
	// PollInterval is how often idle workers look for due work without a wake-up
	// (scheduled sends, retries, expired leases). Default 1 s.
	PollInterval time.Duration `json:"pollInterval,omitempty"`
	// Ambiguity is the default ambiguity policy. Default AmbiguityResend.
	Ambiguity AmbiguityPolicy `json:"ambiguity,omitempty"`

	// Observer receives the engine's events (metrics). Default: none.
	Observer Observer `json:"-"`

	// Clock, when set, replaces the database's clock for scheduling, leases,
	// expiry and backoff (tests), and is handed to the providers that
	// implement ClockUser. Nil: the database's now().
	Clock Clock `json:"-"`
	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger `json:"-"`
	// ID names this client in logs and locks. Default host-pid-random.
	ID string `json:"-"`
}

// Validate reports what NewClient would refuse in cfg, without a driver.
func (cfg *Config) Validate() error {
	_, err := cfg.withDefaults()
	return err
}

// withDefaults returns a copy of cfg with defaults applied, or an error that says
// which setting to fix.
func (cfg *Config) withDefaults() (*Config, error) {
	c := *cfg
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.ConcurrentSends = cmp.Or(c.ConcurrentSends, ConcurrentSendsDefault)
	c.PipelineDepth = cmp.Or(c.PipelineDepth, PipelineDepthDefault)
	c.RunBudget = cmp.Or(c.RunBudget, RunBudgetDefault)
	c.SendTimeout = cmp.Or(c.SendTimeout, SendTimeoutDefault)
	c.Lease = cmp.Or(c.Lease, c.RunBudget+2*c.SendTimeout+time.Minute)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.BackoffMin = cmp.Or(c.BackoffMin, BackoffMinDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.MessageLifetime = cmp.Or(c.MessageLifetime, MessageLifetimeDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.MaxDevicesPerRecipient = cmp.Or(c.MaxDevicesPerRecipient, MaxDevicesPerRecipientDefault)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, CleanupIntervalDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.CampaignInterval = cmp.Or(c.CampaignInterval, CampaignIntervalDefault)
	c.CampaignBatch = cmp.Or(c.CampaignBatch, CampaignBatchDefault)
	c.CampaignMaxTries = cmp.Or(c.CampaignMaxTries, CampaignMaxTriesDefault)
	c.Ambiguity = cmp.Or(c.Ambiguity, AmbiguityResend)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.ID = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "oncepush"), os.Getpid(), hex.EncodeToString(b[:]))
	}

	positive := []struct {
		name string
		v    int64
	}{
		{"BatchSize", int64(c.BatchSize)}, {"Workers", int64(c.Workers)},
		{"ConcurrentSends", int64(c.ConcurrentSends)}, {"PipelineDepth", int64(c.PipelineDepth)},
		{"RunBudget", int64(c.RunBudget)},
		{"SendTimeout", int64(c.SendTimeout)}, {"Lease", int64(c.Lease)},
		{"MaxAttempts", int64(c.MaxAttempts)}, {"BackoffMin", int64(c.BackoffMin)},
		{"BackoffMax", int64(c.BackoffMax)}, {"MessageLifetime", int64(c.MessageLifetime)},
		{"Retention", int64(c.Retention)}, {"MaxDevicesPerRecipient", int64(c.MaxDevicesPerRecipient)},
		{"CleanupInterval", int64(c.CleanupInterval)}, {"PollInterval", int64(c.PollInterval)},
		{"SendGroups", int64(c.SendGroups)}, {"CampaignInterval", int64(c.CampaignInterval)},
		{"CampaignBatch", int64(c.CampaignBatch)}, {"CampaignMaxTries", int64(c.CampaignMaxTries)},
	}
	for _, p := range positive {
		if p.v < 0 {
			return nil, fmt.Errorf("oncepush: Config.%s must not be negative", p.name)
		}
	}
	switch {
	case c.BatchSize > 10000:
		return nil, fmt.Errorf("oncepush: Config.BatchSize %d is above 10000", c.BatchSize)
	case c.CampaignBatch > 10000:
		return nil, fmt.Errorf("oncepush: Config.CampaignBatch %d is above 10000", c.CampaignBatch)
	case c.PipelineDepth > 64:
		return nil, fmt.Errorf("oncepush: Config.PipelineDepth %d is above 64", c.PipelineDepth)
	case c.Lease <= c.RunBudget+c.SendTimeout:
		return nil, fmt.Errorf("oncepush: Config.Lease (%s) must exceed RunBudget + SendTimeout (%s), or a healthy run could lose its lease", c.Lease, c.RunBudget+c.SendTimeout)
	case c.BackoffMax < c.BackoffMin:
		return nil, fmt.Errorf("oncepush: Config.BackoffMax (%s) is below BackoffMin (%s)", c.BackoffMax, c.BackoffMin)
	case c.MessageLifetime > MaxLifetime:
		return nil, fmt.Errorf("oncepush: Config.MessageLifetime is longer than %s", MaxLifetime)
	case !c.Ambiguity.valid():
		return nil, fmt.Errorf("oncepush: Config.Ambiguity %q is neither %q nor %q", c.Ambiguity, AmbiguityResend, AmbiguityAtMostOnce)
	}
	for name, cat := range c.Categories {
		if cat.Ambiguity != "" && !cat.Ambiguity.valid() {
			return nil, fmt.Errorf("oncepush: Config.Categories[%q].Ambiguity %q is neither %q nor %q", name, cat.Ambiguity, AmbiguityResend, AmbiguityAtMostOnce)
		}
	}
	for i, d := range c.RecipientDeleters {
		if d == nil {
			return nil, fmt.Errorf("oncepush: Config.RecipientDeleters[%d] is nil", i)
		}
	}
	if c.Transports == nil {
		c.Transports = BuiltinTransports()
	} else {
		c.Transports = slices.Clone(c.Transports) // the client's own, whatever the caller does with theirs
	}
	transports, err := newTransportTable(c.Transports)
	if err != nil {
		return nil, err
	}
	for _, t := range slices.Sorted(maps.Keys(c.CampaignCeilings)) {
		n := c.CampaignCeilings[t]
		if _, err := transports.spec("transport", t); err != nil {
			return nil, fmt.Errorf("oncepush: Config.CampaignCeilings names unknown transport %q (the transports are %s)", t, transports.list)
		}
		if n < c.MaxDevicesPerRecipient {
			return nil, fmt.Errorf("oncepush: Config.CampaignCeilings[%q] %d is below MaxDevicesPerRecipient (%d), the most submissions one delivery can need", t, n, c.MaxDevicesPerRecipient)
		}
	}
	c.CampaignCeilings = maps.Clone(c.CampaignCeilings)
	seen := map[Transport]bool{}
	for i, p := range c.Providers {
		if p == nil {
			return nil, fmt.Errorf("oncepush: Config.Providers[%d] is nil", i)
		}
		t := p.Transport()
		if _, err := transports.spec("transport", t); err != nil {
			return nil, fmt.Errorf("oncepush: Config.Providers[%d] serves unknown transport %q (the transports are %s)", i, t, transports.list)
		}
		if seen[t] {
			return nil, fmt.Errorf("oncepush: Config.Providers has two providers for %q", t)
		}
		seen[t] = true
	}
	return &c, nil
}
