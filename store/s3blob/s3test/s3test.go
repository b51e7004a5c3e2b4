// Package s3test gives tests an S3-compatible endpoint: the one scripts/emulators started (named by
// WAYPOST_TEST_S3_ENDPOINT and friends), or, when none is named and the versitygw binary (v1.8.0, posix
// backend) is installed, one it starts itself on a free loopback port with a temporary root. Without either,
// Require skips the test and says how to get one.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/waypost/waypost/internal/emulator"
)

// Environment variables naming a running endpoint (scripts/emulators prints them).
const (
	EnvEndpoint  = "WAYPOST_TEST_S3_ENDPOINT"
	EnvAccessKey = "WAYPOST_TEST_S3_ACCESS_KEY"
	EnvSecretKey = "WAYPOST_TEST_S3_SECRET_KEY"
	EnvRegion    = "WAYPOST_TEST_S3_REGION"
	// EnvVersitygw overrides where the versitygw binary is looked for.
	EnvVersitygw = "WAYPOST_TEST_VERSITYGW"
)

// Env is a reachable S3-compatible endpoint.
type Env struct {
	Endpoint  string // base URL, http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Region    string
}

var buckets atomic.Int64

// Credentials of a versitygw this package starts.
const (
	startedAccessKey = "waypost-test"
	startedSecretKey = "waypost-test-secret-key"
)

// shared is this test binary's endpoint (see emulator.Shared for why it is package state); Main stops it.
var shared = emulator.NewShared(emulator.Spec{
	Name: "versitygw",
	Args: func(dir string, addr netip.AddrPort) ([]string, error) {
		root := filepath.Join(dir, "root")
		if err := os.Mkdir(root, 0o700); err != nil {
			return nil, err
		}
		return []string{"--port", addr.String(), "--quiet", "posix", root}, nil
	},
	Env: []string{"ROOT_ACCESS_KEY=" + startedAccessKey, "ROOT_SECRET_KEY=" + startedSecretKey},
}, EnvEndpoint, EnvVersitygw, describe)

// lookup returns the endpoint, starting versitygw if needed, or the reason there is none.
func lookup() (Env, string) { return shared.Get() }

// describe completes an endpoint with its credentials and region: those of a versitygw started here, or
// those the environment names with it.
func describe(endpoint string, started bool) (Env, string) {
	if started {
		return Env{Endpoint: endpoint, AccessKey: startedAccessKey, SecretKey: startedSecretKey, Region: "us-east-1"}, ""
	}
	e := Env{Endpoint: endpoint, AccessKey: os.Getenv(EnvAccessKey), SecretKey: os.Getenv(EnvSecretKey), Region: os.Getenv(EnvRegion)}
	if e.Region == "" {
		e.Region = "us-east-1"
	}
	if e.AccessKey == "" || e.SecretKey == "" {
		return Env{}, fmt.Sprintf("%s is set but %s or %s is not", EnvEndpoint, EnvAccessKey, EnvSecretKey)
	}
	return e, ""
}

// Stop stops a versitygw this package started and removes its root; it does nothing otherwise.
func Stop() { shared.Stop() }

// Main is a TestMain for packages that use the endpoint: it runs the tests and stops what it started.
func Main(m *testing.M) { shared.Main(m) }

// explain turns a reason from lookup into the message of a test that has no endpoint: what is missing and
// how to get it.
func explain(why string) string {
	return "no S3 emulator: " + why + ". Run the tests through scripts/test (which starts scripts/emulators), " +
		"or install versitygw: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"
}

// Require returns the endpoint, or skips the test with the reason there is none (fails it under
// WAYPOST_REQUIRE_EMULATORS).
func Require(t testing.TB) Env {
	t.Helper()
	e, why := lookup()
	if why != "" {
		emulator.Missing(t, explain(why))
	}
	return e
}

// Client returns an SDK client for the endpoint (path-style addressing, static credentials).
func (e Env) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       e.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(e.AccessKey, e.SecretKey, ""),
		BaseEndpoint: aws.String(e.Endpoint),
		UsePathStyle: true,
	})
}

// Bucket creates a fresh bucket and removes it (with its objects) when the test ends.
func (e Env) Bucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("waypost-test-%d-%d", os.Getpid(), buckets.Add(1))
	c := e.Client()
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %s at %s: %v", name, e.Endpoint, err)
	}
	t.Cleanup(func() {
		if err := emptyAndDelete(c, name); err != nil {
			t.Logf("s3test: removing bucket %s: %v", name, err)
		}
	})
	return name
}

func emptyAndDelete(c *s3.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			errs = append(errs, err)
			break
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
