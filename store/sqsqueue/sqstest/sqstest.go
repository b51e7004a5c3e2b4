// Package sqstest gives tests an SQS-compatible endpoint: the one scripts/emulators started (named by
// WAYPOST_TEST_SQS_ENDPOINT), or, when none is named and the goaws binary (github.com/Admiral-Piett/goaws
// v0.5.4, installed as "goaws") is found, one it starts itself on a free port with a generated
// configuration. Without either, Require skips the test and says how to get one, or fails it when
// WAYPOST_REQUIRE_EMULATORS is set (scripts/test sets it).
//
// goaws does not check request signatures; it listens on every interface (0.0.0.0) of the port it is
// given, and the tests address it on loopback.
package sqstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/waypost/waypost/internal/emulator"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/sqsqueue"
)

// Environment variables.
const (
	// EnvEndpoint names a running endpoint (scripts/emulators prints it).
	EnvEndpoint = "WAYPOST_TEST_SQS_ENDPOINT"
	// EnvGoaws overrides where the goaws binary is looked for.
	EnvGoaws = "WAYPOST_TEST_GOAWS"
	// EnvRequire makes a missing emulator a test failure instead of a skip.
	EnvRequire = emulator.EnvRequire
)

// Region and credentials the emulator is addressed with (it checks no signature).
const (
	Region    = "us-east-1"
	AccessKey = "waypost-test"
	SecretKey = "waypost-test-secret"
	// AccountID is the account of the queue URLs of an emulator started here or by scripts/emulators.
	AccountID = "100010001000"
)

// Env is a reachable SQS-compatible endpoint.
type Env struct {
	Endpoint string // base URL, http://127.0.0.1:port
	Region   string
}

var queues atomic.Int64

// shared is this test binary's endpoint (see emulator.Shared for why it is package state); Main stops it.
var shared = emulator.NewShared(emulator.Spec{
	Name: "goaws",
	Args: func(dir string, addr netip.AddrPort) ([]string, error) {
		cfg := filepath.Join(dir, "goaws.yaml")
		if err := os.WriteFile(cfg, []byte(Config(int(addr.Port()))), 0o600); err != nil {
			return nil, err
		}
		return []string{"-config", cfg, "-loglevel", "warn", "Local"}, nil
	},
}, EnvEndpoint, EnvGoaws, func(endpoint string, _ bool) (Env, string) { return Env{Endpoint: endpoint, Region: Region}, "" })

// Lookup returns the endpoint, starting goaws if needed, or the reason there is none.
func Lookup() (Env, string) { return shared.Get() }

// Config returns a goaws configuration (environment "Local") serving SQS on port with queue URLs on
// 127.0.0.1 and no predefined queue: tests create their own.
func Config(port int) string {
	return fmt.Sprintf(`Local:
  Host: 127.0.0.1
  Port: %d
  AccountId: "%s"
  LogToFile: false
  EnableDuplicates: false
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Queues: []
  Topics: []
`, port, AccountID)
}

// Stop stops a goaws this package started and removes its directory; it does nothing otherwise.
func Stop() { shared.Stop() }

// Main is a TestMain for packages that use the endpoint: it runs the tests and stops what it started.
func Main(m *testing.M) { shared.Main(m) }

// Require returns the endpoint, or skips the test with the reason there is none (fails it under
// WAYPOST_REQUIRE_EMULATORS).
func Require(t testing.TB) Env {
	t.Helper()
	e, why := Lookup()
	if why != "" {
		emulator.Missing(t, "no SQS emulator: "+why+". Run the tests through scripts/test (which starts scripts/emulators), "+
			"or install goaws: go install github.com/Admiral-Piett/goaws/app/cmd@v0.5.4 and copy $(go env GOPATH)/bin/cmd to goaws")
	}
	return e
}

// Client returns an SDK client for the endpoint (static credentials).
func (e Env) Client() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:      e.Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}, sqsqueue.ClientOptions(e.Endpoint))
}

// Queue creates a fresh standard queue and deletes it when the test ends; it returns the queue URL.
func (e Env) Queue(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("waypost-test-%d-%d", os.Getpid(), queues.Add(1))
	c := e.Client()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("sqstest: create queue %s at %s: %v", name, e.Endpoint, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Logf("sqstest: deleting queue %s: %v", name, err)
		}
	})
	return url
}

// Recorder is a reverse proxy in front of an SQS endpoint that keeps the JSON body of every SendMessage
// passing through it and when it passed (before the endpoint saw it), so a test sees exactly what the code
// under test sent over the wire: the delays it asked for, the bodies, the queue URLs.
type Recorder struct {
	// URL is the proxy's base URL: the endpoint to give the code under test.
	URL   string
	sends syncbuf.List[sentMessage]
}

// sentMessage is one SendMessage request a Recorder passed on.
type sentMessage struct {
	body map[string]any
	at   time.Time
}

// NewRecorder starts a Recorder in front of the endpoint target; it is closed when the test ends. A
// SendMessage whose body is not JSON fails the test.
func NewRecorder(t testing.TB, target string) *Recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		if req.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("sqstest: SendMessage body is not JSON: %s", b)
			}
			r.sends.Add(sentMessage{body: m, at: time.Now()})
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Take returns the bodies of the SendMessage requests passed on since the last Take (or TakeTimed), in
// order.
func (r *Recorder) Take() []map[string]any {
	bodies, _ := r.TakeTimed()
	return bodies
}

// TakeTimed is Take with the times the requests passed.
func (r *Recorder) TakeTimed() ([]map[string]any, []time.Time) {
	var bodies []map[string]any
	var at []time.Time
	for _, s := range r.sends.Take() {
		bodies = append(bodies, s.body)
		at = append(at, s.at)
	}
	return bodies, at
}
