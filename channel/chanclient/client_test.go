package chanclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/chanservice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "test-secret-0123456789abcdef"

// implementations returns both API implementations over one service each.
func implementations(t *testing.T) map[string]func(t *testing.T) (chanclient.API, *chanservice.Service) {
	return map[string]func(t *testing.T) (chanclient.API, *chanservice.Service){
		"http": func(t *testing.T) (chanclient.API, *chanservice.Service) {
			svc, err := chanservice.New(secret, channel.Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(svc)
			c, err := chanclient.New(srv.URL+"/", secret)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				c.CloseIdleConnections()
				srv.Close()
			})
			return c, svc
		},
		"in-process": func(t *testing.T) (chanclient.API, *chanservice.Service) {
			svc, err := chanservice.New(secret, channel.Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return chanclient.NewInProcess(svc), svc
		},
	}
}

// TestAPI runs the same checks against the HTTP client and the in-process
// implementation.
func TestAPI(t *testing.T) {
	for implName, newAPI := range implementations(t) {
		t.Run(implName, func(t *testing.T) {
			api, svc := newAPI(t)
			ctx := context.Background()
			hub := svc.HubFor("sp_1")
			sc := hub.NewScope(ctx)
			defer sc.End()
			names := []string{"feed", ".", "..", "a:b_c-d.e", strings.Repeat("z", 64)}
			handles := map[string]string{}
			for _, name := range names {
				h, err := sc.Subscribe(name)
				if err != nil {
					t.Fatal(err)
				}
				handles[name] = h
			}
			for _, name := range names {
				if n, err := api.Count(ctx, "sp_1", name); err != nil || n != 1 {
					t.Fatalf("Count(%q) = %d, %v; want 1", name, n, err)
				}
				text := "msg for " + name + " 收"
				if n, err := api.Publish(ctx, "sp_1", name, text); err != nil || n != 1 {
					t.Fatalf("Publish(%q) = %d, %v; want 1", name, n, err)
				}
				st, got, err := sc.Wait(ctx, handles[name], time.Second)
				if err != nil || st != channel.StatusMessage || got != text {
					t.Fatalf("Wait(%q) = %d %q %v", name, st, got, err)
				}
			}
			if n, err := api.Publish(ctx, "sp_1", "feed", strings.Repeat("x", 65536)); err != nil || n != 1 {
				t.Fatalf("Publish(65536 bytes) = %d, %v", n, err)
			}
			if n, err := api.Publish(ctx, "sp_other", "feed", "x"); err != nil || n != 0 {
				t.Fatalf("Publish(other space) = %d, %v; want 0", n, err)
			}
			if n, err := api.Close(ctx, "sp_1", "feed", "收摊"); err != nil || n != 1 {
				t.Fatalf("Close = %d, %v; want 1", n, err)
			}
			if st, _, _ := sc.Wait(ctx, handles["feed"], time.Second); st != channel.StatusMessage {
				t.Fatalf("queued message not delivered before end: %d", st)
			}
			if st, reason, _ := sc.Wait(ctx, handles["feed"], time.Second); st != channel.StatusEnded || reason != "收摊" {
				t.Fatalf("Wait after Close = %d %q", st, reason)
			}
			if n, err := api.Count(ctx, "sp_1", "feed"); err != nil || n != 0 {
				t.Fatalf("Count after Close = %d, %v", n, err)
			}

			// Errors wrap the same sentinels in both implementations.
			errTests := []struct {
				desc string
				call func() (int, error)
				want error
			}{
				{"bad name", func() (int, error) { return api.Publish(ctx, "sp_1", "a b", "m") }, channel.ErrInvalidName},
				{"empty name", func() (int, error) { return api.Count(ctx, "sp_1", "") }, channel.ErrInvalidName},
				{"long name", func() (int, error) { return api.Count(ctx, "sp_1", strings.Repeat("n", 65)) }, channel.ErrInvalidName},
				{"slash in name", func() (int, error) { return api.Publish(ctx, "sp_1", "a/b", "m") }, channel.ErrInvalidName},
				{"text too large", func() (int, error) { return api.Publish(ctx, "sp_1", "feed", strings.Repeat("x", 65537)) }, channel.ErrTextTooLarge},
				{"reason too large", func() (int, error) { return api.Close(ctx, "sp_1", "feed", strings.Repeat("r", 1025)) }, channel.ErrReasonTooLarge},
				{"empty space", func() (int, error) { return api.Count(ctx, "", "feed") }, chanservice.ErrInvalidSpaceID},
				{"bad space", func() (int, error) { return api.Count(ctx, "sp/1", "feed") }, chanservice.ErrInvalidSpaceID},
			}
			for _, tc := range errTests {
				n, err := tc.call()
				if !errors.Is(err, tc.want) || n != 0 {
					t.Errorf("%s: %d, %v; want 0, %v", tc.desc, n, err, tc.want)
				}
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := api.Publish(cctx, "sp_1", "feed", "m"); !errors.Is(err, context.Canceled) {
				t.Errorf("Publish(cancelled ctx): %v", err)
			}
		})
	}
}

func TestClientWrongSecret(t *testing.T) {
	svc, err := chanservice.New(secret, channel.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	c, err := chanclient.New(srv.URL, "wrong-secret-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, err = c.Count(context.Background(), "sp_1", "feed")
	var apiErr *chanclient.Error
	if !errors.Is(err, chanclient.ErrUnauthorized) || !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != chanservice.CodeUnauthorized {
		t.Fatalf("Count with wrong secret: %v", err)
	}
}

func TestClientTimeoutAndNoRedirect(t *testing.T) {
	release := make(chan struct{})
	var redirects atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/slow/") {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if strings.Contains(r.URL.Path, "/elsewhere") {
			redirects.Add(1)
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	defer close(release)
	c, err := chanclient.New(srv.URL, secret, chanclient.WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	start := time.Now()
	if _, err := c.Publish(context.Background(), "sp_1", "slow", "m"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish to a stalled server: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 20*time.Second {
		t.Fatalf("timed out after %v", d)
	}
	_, err = c.Count(context.Background(), "sp_1", "feed")
	var apiErr *chanclient.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTemporaryRedirect || redirects.Load() != 0 {
		t.Fatalf("redirect: %v (followed %d)", err, redirects.Load())
	}
}

func TestClientRejectsNonAPIResponses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/count"):
			w.Write([]byte(`{"other":1}`))
		case strings.HasSuffix(r.URL.Path, "/publish"):
			w.Write([]byte(`not json`))
		default:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c, err := chanclient.New(srv.URL, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if _, err := c.Count(ctx, "sp", "c"); err == nil {
		t.Error("Count accepted a response without count")
	}
	if _, err := c.Publish(ctx, "sp", "c", "m"); err == nil {
		t.Error("Publish accepted a non-JSON response")
	}
	_, err = c.Close(ctx, "sp", "c", "r")
	var apiErr *chanclient.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Code != "" || errors.Unwrap(apiErr) != nil {
		t.Errorf("Close on 502: %v", err)
	}
}

func TestNewValidatesArguments(t *testing.T) {
	for _, u := range []string{"", "ftp://h", "http://", "://x", "http://h?q=1", "h:80"} {
		if _, err := chanclient.New(u, secret); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := chanclient.New("http://h", ""); err == nil {
		t.Error("New accepted an empty secret")
	}
	if _, err := chanclient.New("https://h:8443/prefix/", secret); err != nil {
		t.Errorf("New with prefix: %v", err)
	}
}

func TestClientWithPathPrefix(t *testing.T) {
	svc, err := chanservice.New(secret, channel.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/chan/", http.StripPrefix("/chan", svc))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := chanclient.New(srv.URL+"/chan", secret, chanclient.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	hub := svc.HubFor("sp")
	sc := hub.NewScope(context.Background())
	defer sc.End()
	if _, err := sc.Subscribe("feed"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Count(context.Background(), "sp", "feed"); err != nil || n != 1 {
		t.Fatalf("Count via prefix = %d, %v", n, err)
	}
}
