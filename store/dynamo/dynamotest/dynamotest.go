// Package dynamotest runs the DynamoDB emulator minidyn (github.com/truora/minidyn, package server)
// in-process on a loopback port for tests: the store under test talks to it through the real AWS SDK client
// and HTTP, as it would to DynamoDB. Other processes (the Lambda bootstraps of the end-to-end test) can use
// the same URL.
package dynamotest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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

// Server is a running emulator.
type Server struct {
	// URL is the emulator's base URL (http://127.0.0.1:port).
	URL string
	// Client is an SDK client pointed at it.
	Client *dynamodb.Client
	srv    *httptest.Server
	tables atomic.Int64
}

// Start starts an emulator; Close stops it.
func Start() *Server {
	srv := httptest.NewServer(miniserver.NewServer())
	return &Server{URL: srv.URL, Client: NewClient(srv.URL), srv: srv}
}

// New starts an emulator that stops when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Close stops the emulator.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// NewClient returns an SDK client for the emulator at url: static test credentials, response checksum
// validation off (minidyn sends no CRC32 header).
func NewClient(url string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
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
