package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncepush/oncepush"
)

// Metrics is the server's Prometheus registry. It is also the engine's
// oncepush.Observer: pass it as Config.Observer.
type Metrics struct {
	reg *prometheus.Registry

	queued     prometheus.Counter
	dedupHits  prometheus.Counter
	finished   *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	ambiguous  *prometheus.CounterVec
	leaseLost  prometheus.Counter
	httpReqs   *prometheus.CounterVec
	httpTime   *prometheus.HistogramVec
	backlog    prometheus.Gauge
	backlogCap prometheus.Gauge
	oldestAge  prometheus.Gauge
	laneDue    *prometheus.GaugeVec
	laneAge    *prometheus.GaugeVec
	readAt     prometheus.Gauge
	readFail   prometheus.Counter
	groupSize  prometheus.Histogram

	// recent counts the last minutes' provider calls for GET /v1/activity.
	recent recentRing
}

var (
	_ oncepush.Observer          = (*Metrics)(nil)
	_ oncepush.SendGroupObserver = (*Metrics)(nil)
)

// NewMetrics registers oncepush's metrics, and the Go and process collectors,
// on a registry of its own.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{reg: reg}
	m.queued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "oncepush_deliveries_queued_total", Help: "Deliveries written by sends.",
	})
	m.dedupHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "oncepush_dedup_hits_total", Help: "Recipients skipped by a send because their dedup key was already used.",
	})
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncepush_deliveries_finished_total", Help: "Deliveries that reached a final status, by status.",
	}, []string{"status"})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncepush_device_attempts_total", Help: "Provider calls, by transport and outcome.",
	}, []string{"transport", "outcome"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "oncepush_provider_latency_seconds", Help: "Time a provider call took, by transport.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15},
	}, []string{"transport"})
	m.ambiguous = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncepush_ambiguous_total",
		Help: "Device attempts that became ambiguous, by transport and cause (lost_answer, abandoned_run).",
	}, []string{"transport", "cause"})
	m.leaseLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "oncepush_lease_lost_total", Help: "Deliveries whose record found their lease taken by another run.",
	})
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncepush_http_requests_total", Help: "HTTP API requests, by route and status code.",
	}, []string{"route", "code"})
	m.httpTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "oncepush_http_request_duration_seconds", Help: "HTTP API request duration, by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	m.backlog = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "oncepush_due_backlog",
		Help: "Pending deliveries due at the last backlog read, counted up to oncepush_due_backlog_cap (at the cap: at least that many).",
	})
	m.backlogCap = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "oncepush_due_backlog_cap", Help: "The most due deliveries a backlog read counts.",
	})
	m.oldestAge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "oncepush_due_oldest_age_seconds", Help: "How long the oldest due delivery had been due at the last backlog read.",
	})
	m.laneDue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "oncepush_lane_due_backlog",
		Help: "Pending deliveries due at the last backlog read, by lane (transactional, campaign), each counted up to oncepush_due_backlog_cap.",
	}, []string{"lane"})
	m.laneAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "oncepush_lane_due_oldest_age_seconds",
		Help: "How long the oldest due delivery of each lane (transactional, campaign) had been due at the last backlog read.",
	}, []string{"lane"})
	m.readAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "oncepush_backlog_read_timestamp_seconds", Help: "When the backlog was last read (Unix time); the backlog gauges are as of then.",
	})
	m.readFail = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "oncepush_backlog_read_errors_total", Help: "Backlog reads that failed.",
	})
	m.groupSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "oncepush_send_group_size", Help: "Sends written in one commit (concurrent sends share one).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})
	for _, c := range []prometheus.Collector{m.queued, m.dedupHits, m.finished, m.attempts, m.latency, m.ambiguous,
		m.leaseLost, m.httpReqs, m.httpTime, m.backlog, m.backlogCap, m.oldestAge, m.laneDue, m.laneAge, m.readAt, m.readFail, m.groupSize,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// Handler serves the metrics as they are: a scrape reads nothing from the
// database (the backlog gauges are set by the process, see
// Server.WatchBacklog), so however often anyone scrapes, the database does
// no more work.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// setBacklog records a backlog read: both lanes together, and each.
func (m *Metrics) setBacklog(b oncepush.Backlog, limit int, at time.Time) {
	m.backlog.Set(float64(b.Due))
	m.backlogCap.Set(float64(limit))
	m.oldestAge.Set(b.OldestAge.Seconds())
	for lane, l := range map[string]oncepush.BacklogLane{"transactional": b.Transactional, "campaign": b.Campaign} {
		m.laneDue.WithLabelValues(lane).Set(float64(l.Due))
		m.laneAge.WithLabelValues(lane).Set(l.OldestAge.Seconds())
	}
	m.readAt.Set(float64(at.UnixNano()) / 1e9)
}

// Registry is the registry, for tests and embedding.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) observeHTTP(route string, code int, d time.Duration) {
	m.httpReqs.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.httpTime.WithLabelValues(route).Observe(d.Seconds())
}

// Queued implements oncepush.Observer.
func (m *Metrics) Queued(queued, duplicates int) {
	m.queued.Add(float64(queued))
	m.dedupHits.Add(float64(duplicates))
}

// SendGroup implements oncepush.SendGroupObserver.
func (m *Metrics) SendGroup(members int) { m.groupSize.Observe(float64(members)) }

// Submitted implements oncepush.Observer.
func (m *Metrics) Submitted(t oncepush.Transport, o oncepush.Outcome, latency time.Duration) {
	m.attempts.WithLabelValues(string(t), o.String()).Inc()
	m.recent.call(t, o)
	m.latency.WithLabelValues(string(t)).Observe(latency.Seconds())
}

// Ambiguous implements oncepush.Observer.
func (m *Metrics) Ambiguous(t oncepush.Transport, recovered bool) {
	cause := "lost_answer"
	if recovered {
		cause = "abandoned_run"
	}
	m.ambiguous.WithLabelValues(string(t), cause).Inc()
	m.recent.ambiguousAttempt(t)
}

// Finished implements oncepush.Observer.
func (m *Metrics) Finished(s oncepush.DeliveryStatus) { m.finished.WithLabelValues(string(s)).Inc() }

// LeaseLost implements oncepush.Observer.
func (m *Metrics) LeaseLost(n int) { m.leaseLost.Add(float64(n)) }
