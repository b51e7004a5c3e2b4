// Package prom is the Prometheus recorder of `waypost serve` (prometheus/client_golang): request latency
// histograms per operation and outcome, store commit latency and size, and group-commit batch size, plus
// the Go runtime and process collectors, served in the Prometheus text format by Handler.
package prom

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/waypost/waypost/internal/metrics"
)

// Recorder is a metrics.Recorder over its own Prometheus registry.
type Recorder struct {
	reg        *prometheus.Registry
	requests   *prometheus.HistogramVec
	commits    *prometheus.HistogramVec
	commitOps  prometheus.Histogram
	batches    prometheus.Histogram
	batchTimes prometheus.Histogram
}

var _ metrics.Recorder = (*Recorder)(nil)

// Latency buckets: 100 µs to 10 s, for both requests and commits (a group commit waits for one fsync).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// New returns a recorder with its metrics registered.
func New() *Recorder {
	r := &Recorder{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "waypost", Name: "request_duration_seconds",
			Help:    "Time to serve one operation (HTTP or MCP), by operation and outcome (ok or the error code).",
			Buckets: latencyBuckets}, []string{"operation", "outcome"}),
		commits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "waypost", Subsystem: "store", Name: "commit_duration_seconds",
			Help:    "Time of one store transaction, from the domain's call to its answer, by outcome (ok, condition_failed, error).",
			Buckets: latencyBuckets}, []string{"outcome"}),
		commitOps: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "waypost", Subsystem: "store", Name: "commit_ops",
			Help:    "Operations (puts, deletes, checks) in one store transaction.",
			Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 100}}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "waypost", Subsystem: "store", Name: "batch_transactions",
			Help:    "Transactions carried by one durable write of the embedded store (group commit: one journal fsync).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
		batchTimes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "waypost", Subsystem: "store", Name: "batch_duration_seconds",
			Help:    "Time of one durable write of the embedded store (group commit), sync included.",
			Buckets: latencyBuckets}),
	}
	r.reg.MustRegister(r.requests, r.commits, r.commitOps, r.batches, r.batchTimes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Registry returns the registry, for more collectors.
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Request records one served operation.
func (r *Recorder) Request(operation, outcome string, d time.Duration) {
	r.requests.WithLabelValues(operation, outcome).Observe(d.Seconds())
}

// Commit records one store transaction.
func (r *Recorder) Commit(outcome string, ops int, d time.Duration) {
	r.commits.WithLabelValues(outcome).Observe(d.Seconds())
	r.commitOps.Observe(float64(ops))
}

// Batch records one group commit.
func (r *Recorder) Batch(transactions int, d time.Duration) {
	r.batches.Observe(float64(transactions))
	r.batchTimes.Observe(d.Seconds())
}

// Handler serves the metrics in the Prometheus text exposition format (GET /metrics).
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}
