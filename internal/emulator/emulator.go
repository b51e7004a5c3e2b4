// Package emulator is the common ground of the test-support packages that give tests a local emulator of a
// cloud service (store/s3blob/s3test, store/sqsqueue/sqstest, functions/internal/emutest): finding the
// emulator's binary, starting it on a free loopback port with a temporary directory and waiting until it
// answers, sharing one started emulator between the tests of a test binary, and skipping a test that has
// none, or failing it when WAYPOST_REQUIRE_EMULATORS is set (scripts/test sets it after starting
// scripts/emulators).
package emulator

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRequire makes a missing emulator a test failure instead of a skip (see Missing).
const EnvRequire = "WAYPOST_REQUIRE_EMULATORS"

// startTimeout is how long Start waits for a started emulator to accept connections.
const startTimeout = 15 * time.Second

// FindBinary returns the path of the executable name: the value of the environment variable envVar when
// it is set (taken as is), else name found in PATH, else name in the bin directory of each $GOPATH entry
// ($HOME/go when GOPATH is unset); "" when there is none.
func FindBinary(name, envVar string) string {
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Missing skips t with why, or fails it with why when WAYPOST_REQUIRE_EMULATORS is set. why says which
// emulator is missing and how to get one.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) != "" {
		t.Fatalf("%s (and %s is set, so this is a failure)", why, EnvRequire)
	}
	t.Skip(why)
}

// FreePort returns a loopback address (127.0.0.1:port) with a port that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreeAddr is FreePort for a test: it fails t when no port can be had.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Spec describes an emulator for Start.
type Spec struct {
	// Name is the emulator's short name: its temporary directory is named "waypost-<Name>-*" and its
	// output goes to <Name>.log there.
	Name string
	// Bin is the path of its executable (see FindBinary); NewShared sets it from its lookup, replacing any given.
	Bin string
	// Args returns its command-line arguments for listening on addr (127.0.0.1 and a port), given its
	// temporary directory dir, into which it may write what the emulator needs (a configuration, a data
	// root). Nil means no arguments.
	Args func(dir string, addr netip.AddrPort) ([]string, error)
	// Env is added to the test process's environment for the emulator.
	Env []string
}

// startInstalled starts the emulator binary called s.Name (found by FindBinary with binEnv), for a
// test-support package whose endpointEnv names no running emulator. It returns the process, or the reason
// there is none.
func startInstalled(s Spec, endpointEnv, binEnv string) (*Process, string) {
	bin := FindBinary(s.Name, binEnv)
	if bin == "" {
		return nil, fmt.Sprintf("%s is not set and no %s binary was found (PATH, $GOPATH/bin, %s)", endpointEnv, s.Name, binEnv)
	}
	s.Bin = bin
	p, err := Start(s)
	if err != nil {
		return nil, fmt.Sprintf("%s is not set and starting %s failed: %v", endpointEnv, bin, err)
	}
	return p, ""
}

// Process is an emulator Start started. On Linux it is killed when the test process dies without
// stopping it.
type Process struct {
	// Addr is the loopback address (127.0.0.1:port) it listens on.
	Addr string
	// Dir is its temporary directory, also its working directory; Stop removes it.
	Dir string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start creates a temporary directory, picks a free loopback port, runs the emulator there (output to its
// log file) and waits up to 15 s until it accepts TCP connections. On failure it stops what it started and
// the error includes the emulator's log.
func Start(s Spec) (_ *Process, err error) {
	dir, err := os.MkdirTemp("", "waypost-"+s.Name+"-")
	if err != nil {
		return nil, err
	}
	p := &Process{Dir: dir}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	if p.Addr, err = FreePort(); err != nil {
		return nil, err
	}
	ap, err := netip.ParseAddrPort(p.Addr)
	if err != nil {
		return nil, err
	}
	var args []string
	if s.Args != nil {
		if args, err = s.Args(dir, ap); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(dir, s.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.Bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	setPdeathsig(cmd)
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("not listening on %s after %v: %s", p.Addr, startTimeout, strings.TrimSpace(string(log)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the emulator, waits for it and removes its directory. It may be called more than once, and
// on a nil Process.
func (p *Process) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
	if p.Dir != "" {
		_ = os.RemoveAll(p.Dir)
		p.Dir = ""
	}
}

// Shared is an emulator shared by all the tests of a test binary: looked up (and, if need be, started)
// once, on first use, and stopped by Stop, typically from TestMain after m.Run.
//
// A test-support package keeps its Shared in a package-level variable: its tests call a Lookup or Require
// with no handle to pass around, and the emulator has to outlive each test (a t.Cleanup would stop it after
// the first), so the process-wide state lives here, guarded by a sync.Once and a mutex.
type Shared[E any] struct {
	spec                Spec
	endpointEnv, binEnv string
	describe            func(endpoint string, started bool) (E, string)

	once sync.Once
	env  E
	why  string

	mu   sync.Mutex
	proc *Process
}

// NewShared returns the Shared emulator s of a test-support package. On first use it takes the running
// emulator whose base URL the environment variable endpointEnv names (scripts/emulators sets it), or else
// starts the binary s.Name, found by FindBinary with binEnv. describe turns the base URL into the emulator's
// description, or says why it cannot; started reports that this test binary started the emulator (at
// http://127.0.0.1:port).
func NewShared[E any](s Spec, endpointEnv, binEnv string, describe func(endpoint string, started bool) (E, string)) *Shared[E] {
	return &Shared[E]{spec: s, endpointEnv: endpointEnv, binEnv: binEnv, describe: describe}
}

// lookup returns the emulator's description, the process it started (nil when the environment named a
// running one), or the reason there is no emulator.
func (s *Shared[E]) lookup() (E, *Process, string) {
	if ep := os.Getenv(s.endpointEnv); ep != "" {
		e, why := s.describe(ep, false)
		return e, nil, why
	}
	p, why := startInstalled(s.spec, s.endpointEnv, s.binEnv)
	if p == nil {
		var none E
		return none, nil, why
	}
	e, why := s.describe("http://"+p.Addr, true)
	if why != "" {
		p.Stop()
		return e, nil, why
	}
	return e, p, ""
}

// Get returns the emulator, or the reason there is none, looking it up on the first call.
func (s *Shared[E]) Get() (E, string) {
	s.once.Do(func() {
		var p *Process
		s.env, p, s.why = s.lookup()
		s.mu.Lock()
		s.proc = p
		s.mu.Unlock()
	})
	return s.env, s.why
}

// Stop stops the emulator Get started, if any; it does nothing otherwise.
func (s *Shared[E]) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	p.Stop()
}

// Main is the body of a TestMain: it runs the tests, stops the emulator and exits with the tests' code.
func (s *Shared[E]) Main(m *testing.M) {
	code := m.Run()
	s.Stop()
	os.Exit(code)
}
