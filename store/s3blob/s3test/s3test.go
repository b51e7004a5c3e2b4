// Package s3test gives tests an S3-compatible endpoint: the one scripts/emulators started (named by
// WAYPOST_TEST_S3_ENDPOINT and friends), or, when none is named and the versitygw binary (v1.8.0, posix
// backend) is installed, one it starts itself on a free loopback port with a temporary root. Without either,
// Require skips the test and says how to get one.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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

var (
	once    sync.Once
	env     Env
	skipWhy string
	proc    *exec.Cmd
	procDir string
	buckets atomic.Int64
)

// Lookup returns the endpoint, starting versitygw if needed, or the reason there is none.
func Lookup() (Env, string) {
	once.Do(func() { env, skipWhy = lookup() })
	return env, skipWhy
}

func lookup() (Env, string) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		e := Env{Endpoint: ep, AccessKey: os.Getenv(EnvAccessKey), SecretKey: os.Getenv(EnvSecretKey), Region: os.Getenv(EnvRegion)}
		if e.Region == "" {
			e.Region = "us-east-1"
		}
		if e.AccessKey == "" || e.SecretKey == "" {
			return Env{}, fmt.Sprintf("%s is set but %s or %s is not", EnvEndpoint, EnvAccessKey, EnvSecretKey)
		}
		return e, ""
	}
	bin := findVersitygw()
	if bin == "" {
		return Env{}, fmt.Sprintf("%s is not set and no versitygw binary was found (PATH, $GOPATH/bin, %s)", EnvEndpoint, EnvVersitygw)
	}
	e, err := start(bin)
	if err != nil {
		return Env{}, fmt.Sprintf("%s is not set and starting %s failed: %v", EnvEndpoint, bin, err)
	}
	return e, ""
}

func findVersitygw() string {
	if p := os.Getenv(EnvVersitygw); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// FreePort returns a loopback address with a port that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func start(bin string) (Env, error) {
	dir, err := os.MkdirTemp("", "waypost-versitygw-")
	if err != nil {
		return Env{}, err
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		return Env{}, err
	}
	addr, err := FreePort()
	if err != nil {
		return Env{}, err
	}
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return Env{}, err
	}
	e := Env{Endpoint: "http://" + addr, AccessKey: "waypost-test", SecretKey: "waypost-test-secret-key", Region: "us-east-1"}
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+e.AccessKey, "ROOT_SECRET_KEY="+e.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return Env{}, err
	}
	logf.Close()
	proc, procDir = cmd, dir
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			Stop()
			log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			return Env{}, fmt.Errorf("not listening on %s after 15 s: %s", addr, strings.TrimSpace(string(log)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops a versitygw this package started and removes its root; it does nothing otherwise.
func Stop() {
	if proc != nil && proc.Process != nil {
		_ = proc.Process.Kill()
		_ = proc.Wait()
		proc = nil
	}
	if procDir != "" {
		_ = os.RemoveAll(procDir)
		procDir = ""
	}
}

// Main is a TestMain for packages that use the endpoint: it runs the tests and stops what it started.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Require returns the endpoint, or skips the test with the reason there is none.
func Require(t testing.TB) Env {
	t.Helper()
	e, why := Lookup()
	if why != "" {
		t.Skipf("no S3 emulator: %s. Run the tests through scripts/test (which starts scripts/emulators), "+
			"or install versitygw: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0", why)
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
