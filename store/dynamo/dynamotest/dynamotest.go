// Package dynamotest runs the DynamoDB emulator minidyn (github.com/truora/minidyn, package server) for
// tests on a loopback port: the store under test talks to it through the real AWS SDK client and HTTP, as it
// would to DynamoDB. Other processes (the Lambda bootstraps of the end-to-end test) can use the same URL.
// When WAYPOST_TEST_DYNAMODB_ENDPOINT names a running minidynd (scripts/emulators starts one), each
// emulator is a fresh one of its own there, outside the race-instrumented test binary; otherwise it is served
// in-process.
package dynamotest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	miniserver "github.com/truora/minidyn/server"

	"github.com/waypost/waypost/store/dynamo"
)

// Region and credentials the emulator is addressed with (it does not check signatures).
const (
	Region    = "us-east-1"
	AccessKey = "waypost-test"
	SecretKey = "waypost-test-secret"
)

// EnvEndpoint names the base URL of a running minidynd (./minidynd), which Start then uses.
const EnvEndpoint = "WAYPOST_TEST_DYNAMODB_ENDPOINT"

// Server is a running emulator.
type Server struct {
	// URL is the emulator's base URL: http://127.0.0.1:port for one served in-process, or
	// http://127.0.0.1:port/e/<name> for this server's own emulator on the minidynd of EnvEndpoint.
	URL string
	// Client is an SDK client pointed at it.
	Client *dynamodb.Client
	// RawURL and RawClient reach the emulator without the delays of StartWithLatency (empty and nil
	// otherwise).
	RawURL    string
	RawClient *dynamodb.Client
	srv       *httptest.Server // nil when the emulator is one of minidynd's
	raw       *httptest.Server
	tables    atomic.Int64
}

// Start starts an emulator, empty and of its own (a new name on the minidynd of EnvEndpoint, or in-process);
// Close stops it.
func Start() *Server {
	if base := os.Getenv(EnvEndpoint); base != "" {
		url := strings.TrimSuffix(base, "/") + "/e/" + rand.Text()
		return &Server{URL: url, Client: NewClient(url)}
	}
	srv := httptest.NewServer(miniserver.NewServer())
	return &Server{URL: srv.URL, Client: NewClient(srv.URL), srv: srv}
}

// Latency is a delay added to each request the emulator serves, by kind of operation, to model the round
// trips of DynamoDB in benchmarks (the emulator answers in microseconds). The delay is a sleep before the
// request is served: it costs no CPU, so many requests wait at once as they would on the network.
type Latency struct {
	// Read applies to GetItem, Query and the other reads; Write to PutItem, UpdateItem, DeleteItem and the
	// other non-transactional writes; Transact to TransactWriteItems and TransactGetItems.
	Read, Write, Transact time.Duration
}

// of returns the delay of an operation named by its X-Amz-Target header (DynamoDB_20120810.<Operation>).
func (l Latency) of(target string) time.Duration {
	op := target[strings.LastIndexByte(target, '.')+1:]
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		return l.Transact
	case "GetItem", "Query", "Scan", "BatchGetItem", "DescribeTable":
		return l.Read
	case "CreateTable", "DeleteTable", "UpdateTable":
		return 0
	}
	return l.Write
}

// StartWithLatency starts an emulator whose URL serves each request after the delay of l, and whose
// RawURL and RawClient reach the same tables without delay (for a benchmark's own bookkeeping).
func StartWithLatency(l Latency) *Server {
	h := miniserver.NewServer()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := l.of(r.Header.Get("X-Amz-Target")); d > 0 {
			time.Sleep(d)
		}
		h.ServeHTTP(w, r)
	}))
	raw := httptest.NewServer(h)
	return &Server{URL: slow.URL, Client: NewClient(slow.URL), srv: slow, RawURL: raw.URL, RawClient: NewClient(raw.URL), raw: raw}
}

// New starts an emulator that stops when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Close stops the emulator (minidynd drops it and its tables).
func (s *Server) Close() {
	if s.srv == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.URL, nil); err == nil {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		return
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
	if s.raw != nil {
		s.raw.CloseClientConnections()
		s.raw.Close()
	}
}

// NewClient returns an SDK client for the emulator at url: static test credentials, response checksum
// validation off (minidyn sends no CRC32 header), and enough idle connections kept for many concurrent
// requests (the SDK keeps 10 per host; more concurrent callers would dial a new connection per request).
func NewClient(url string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = 256
		}),
	}, dynamo.ClientOptions(url))
}

// Table creates a fresh, empty table and returns its name.
func (s *Server) Table(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("waypost-test-%d", s.tables.Add(1))
	if err := dynamo.CreateTable(context.Background(), s.Client, name); err != nil {
		t.Fatalf("dynamotest: %v", err)
	}
	return name
}

// Store returns a store on a fresh table. A nil api uses the server's client; tests pass a wrapper of
// s.Client to inject faults or meter requests.
func (s *Server) Store(t testing.TB, api dynamo.API, opts dynamo.Options) *dynamo.Store {
	t.Helper()
	if api == nil {
		api = s.Client
	}
	st, err := dynamo.New(api, s.Table(t), opts)
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
	}
	return st
}
