package metrics

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// EMFNamespace is the CloudWatch namespace of Waypost's metrics.
const EMFNamespace = "Waypost"

// EMF metric names (CloudWatch). infra's dashboard graphs them. Dimensions are few on purpose: CloudWatch
// bills every combination of dimension values as one custom metric (docs/aws-cost.md). The request count
// per operation is RequestLatency's sample count; the outcome (the error code) is a property of each
// document, searchable in the log, not a dimension.
const (
	EMFRequestLatency  = "RequestLatency"  // ms, dimensions Function, Operation
	EMFRequestErrors   = "RequestErrors"   // count of requests that failed, dimension Function
	EMFCommitLatency   = "CommitLatency"   // ms, dimension Function
	EMFCommitOps       = "CommitOps"       // operations per transaction, dimension Function
	EMFCommitConflicts = "CommitConflicts" // transactions refused by a condition, dimension Function
	EMFCommitErrors    = "CommitErrors"    // transactions the store failed, dimension Function
)

// maxEMFValues is how many values one metric may carry in one EMF document (CloudWatch's limit).
const maxEMFValues = 100

// EMF is a Recorder that writes CloudWatch embedded metric format documents, one JSON line each, to a
// writer (the Lambda function's standard output, which is its log). Measurements are gathered in memory
// and written by Flush, which the Lambda runtime wrapper calls after every invocation, so an invocation
// adds a few log lines and no API call. It is safe for concurrent use.
type EMF struct {
	mu       sync.Mutex
	w        io.Writer
	function string
	now      func() time.Time
	requests map[[2]string]*emfSeries // (operation, outcome)
	commits  map[string]*emfSeries    // outcome
}

type emfSeries struct {
	latency []float64
	ops     []float64
	count   int
}

// NewEMF returns an EMF recorder of the named function writing to w.
func NewEMF(w io.Writer, function string) *EMF {
	return &EMF{w: w, function: function, now: time.Now, requests: map[[2]string]*emfSeries{}, commits: map[string]*emfSeries{}}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Request records one served operation.
func (e *EMF) Request(operation, outcome string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.requests[[2]string{operation, outcome}]
	if s == nil {
		s = &emfSeries{}
		e.requests[[2]string{operation, outcome}] = s
	}
	s.count++
	if len(s.latency) < maxEMFValues {
		s.latency = append(s.latency, ms(d))
	}
}

// Commit records one store transaction.
func (e *EMF) Commit(outcome string, ops int, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.commits[outcome]
	if s == nil {
		s = &emfSeries{}
		e.commits[outcome] = s
	}
	s.count++
	if len(s.latency) < maxEMFValues {
		s.latency = append(s.latency, ms(d))
		s.ops = append(s.ops, float64(ops))
	}
}

// Batch is not published on AWS (DynamoDB has no group commit).
func (e *EMF) Batch(int, time.Duration) {}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Flush writes what was recorded since the last Flush, one document per operation and outcome and one
// per commit outcome, and forgets it. A latency array holds at most 100 values (CloudWatch's limit; the
// first ones of the invocation), counts are exact. A write error is returned (the measurements are
// dropped).
func (e *EMF) Flush() error {
	e.mu.Lock()
	requests, commits := e.requests, e.commits
	e.requests, e.commits = map[[2]string]*emfSeries{}, map[string]*emfSeries{}
	ts := e.now().UnixMilli()
	e.mu.Unlock()
	var docs []map[string]any
	keys := make([][2]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	for _, k := range keys {
		s := requests[k]
		doc := map[string]any{"Function": e.function, "Operation": k[0], "Outcome": k[1], EMFRequestLatency: s.latency}
		directives := []emfDirective{
			{Namespace: EMFNamespace, Dimensions: [][]string{{"Function", "Operation"}}, Metrics: []emfMetric{{EMFRequestLatency, "Milliseconds"}}},
		}
		if k[1] != OutcomeOK {
			doc[EMFRequestErrors] = s.count
			directives = append(directives, emfDirective{Namespace: EMFNamespace, Dimensions: [][]string{{"Function"}},
				Metrics: []emfMetric{{EMFRequestErrors, "Count"}}})
		}
		doc["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: directives}
		docs = append(docs, doc)
	}
	outcomes := make([]string, 0, len(commits))
	for k := range commits {
		outcomes = append(outcomes, k)
	}
	sort.Strings(outcomes)
	for _, o := range outcomes {
		s := commits[o]
		doc := map[string]any{"Function": e.function, "Outcome": o, EMFCommitLatency: s.latency, EMFCommitOps: s.ops}
		metrics := []emfMetric{{EMFCommitLatency, "Milliseconds"}, {EMFCommitOps, "Count"}}
		switch o {
		case CommitCondition:
			doc[EMFCommitConflicts] = s.count
			metrics = append(metrics, emfMetric{EMFCommitConflicts, "Count"})
		case CommitError:
			doc[EMFCommitErrors] = s.count
			metrics = append(metrics, emfMetric{EMFCommitErrors, "Count"})
		}
		doc["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{
			{Namespace: EMFNamespace, Dimensions: [][]string{{"Function"}}, Metrics: metrics}}}
		docs = append(docs, doc)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	enc := json.NewEncoder(e.w)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	return nil
}
