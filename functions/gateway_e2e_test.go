package functions_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/waypost/waypost/api/ops"
)

// Payload limits of the real path: API Gateway HTTP APIs take request bodies up to 10 MB; a synchronous
// Lambda invocation carries at most 6 MB of event and 6 MB of response.
const (
	apiGatewayMaxBody = 10 << 20
	lambdaMaxPayload  = 6 << 20
)

// gateway is a loopback stand-in for the API Gateway HTTP API of the stack: it routes requests as
// infra's route table does (functions by operation group; /v0/feed/wait and /internal/v0/* to the channel
// container; anything else answers 404 without invoking a function, as an HTTP API without a $default
// route does), turns them into payload 2.0 events for the functions under aws-lambda-rie, and enforces the
// payload limits above, so a flow that would push bytes through a function fails here as it would on AWS.
type gateway struct {
	t       *testing.T
	fns     map[string]*lambdaFn
	channel *httputil.ReverseProxy
	routes  *http.ServeMux
	srv     *httptest.Server

	mu    sync.Mutex
	calls []gatewayCall
}

// gatewayCall records one request the gateway routed.
type gatewayCall struct {
	Method, Path, Target string
	Status               int
	EventBytes, RespLen  int
}

func newGateway(t *testing.T, fns map[string]*lambdaFn, channelURL string) *gateway {
	t.Helper()
	g := &gateway{t: t, fns: fns, routes: routeTable()}
	if channelURL != "" {
		u, err := url.Parse(channelURL)
		if err != nil {
			t.Fatal(err)
		}
		g.channel = httputil.NewSingleHostReverseProxy(u)
	}
	g.srv = httptest.NewServer(g)
	t.Cleanup(g.srv.Close)
	return g
}

// URL is the gateway's base URL (the stack's ApiUrl).
func (g *gateway) URL() string { return g.srv.URL }

// routeTarget is what a route of routeTable leads to: a function, or "channel".
type routeTarget string

// ServeHTTP is never called: route only reads which target a request matches.
func (routeTarget) ServeHTTP(http.ResponseWriter, *http.Request) {}

// routeTable is the stack's route table (infra.Routes): one route per operation of api/ops to the function
// its descriptor names, /mcp to the MCP function, and the channel service's internal API.
func routeTable() *http.ServeMux {
	mux := http.NewServeMux()
	for _, o := range ops.List() {
		mux.Handle(o.Method+" "+o.Path, routeTarget(o.Function))
	}
	mux.Handle("/mcp", routeTarget("mcp"))
	mux.Handle("/internal/v0/", routeTarget(ops.FnChannel))
	return mux
}

// route names the target of a request: a function, "channel", or "" (no route).
func (g *gateway) route(r *http.Request) string {
	h, _ := g.routes.Handler(r)
	t, _ := h.(routeTarget)
	return string(t)
}

// Calls returns the requests routed so far.
func (g *gateway) Calls() []gatewayCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gatewayCall(nil), g.calls...)
}

func (g *gateway) record(c gatewayCall) {
	g.mu.Lock()
	g.calls = append(g.calls, c)
	g.mu.Unlock()
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, msg)
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := g.route(r)
	call := gatewayCall{Method: r.Method, Path: r.URL.Path, Target: target}
	switch {
	case target == "":
		call.Status = http.StatusNotFound
		g.record(call)
		plain(w, http.StatusNotFound, "Not Found")
		return
	case target == "channel":
		call.Status = -1
		g.record(call)
		g.channel.ServeHTTP(w, r)
		return
	}
	fn := g.fns[target]
	if fn == nil {
		g.t.Errorf("gateway: no function %s for %s %s", target, r.Method, r.URL.Path)
		plain(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, apiGatewayMaxBody+1))
	if err != nil {
		plain(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > apiGatewayMaxBody {
		call.Status = http.StatusRequestEntityTooLarge
		g.record(call)
		plain(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: r.Method + " " + r.URL.Path, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: "e2e", DomainName: r.Host, Stage: "$default",
			RequestID: fmt.Sprintf("gw-%d", time.Now().UnixNano()), RouteKey: r.Method + " " + r.URL.Path,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: "HTTP/1.1",
				SourceIP: "192.0.2.1", UserAgent: r.UserAgent()},
		},
	}
	for k, v := range r.Header {
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev.Headers["host"] = r.Host
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		g.t.Errorf("gateway: %v", err)
		return
	}
	call.EventBytes = len(payload)
	if len(payload) > lambdaMaxPayload {
		call.Status = http.StatusRequestEntityTooLarge
		g.record(call)
		plain(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large: the invocation payload exceeds Lambda's 6 MB")
		return
	}
	raw, err := fn.invokeErr(payload)
	call.RespLen = len(raw)
	if err != nil || len(raw) > lambdaMaxPayload {
		call.Status = http.StatusInternalServerError
		g.record(call)
		plain(w, http.StatusInternalServerError, fmt.Sprintf("Internal Server Error (%d response bytes, %v)", len(raw), err))
		return
	}
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &out); err != nil || out.StatusCode == 0 {
		call.Status = http.StatusInternalServerError
		g.record(call)
		plain(w, http.StatusInternalServerError, "Internal Server Error: "+string(raw))
		return
	}
	respBody := []byte(out.Body)
	if out.IsBase64Encoded {
		if respBody, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
			plain(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
	}
	for k, v := range out.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range out.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(respBody)))
	call.Status = out.StatusCode
	g.record(call)
	w.WriteHeader(out.StatusCode)
	_, _ = w.Write(respBody)
}

// peakRSS returns the peak resident set size (VmHWM) of the function's bootstrap process, a child of its
// aws-lambda-rie process.
func (f *lambdaFn) peakRSS() (int64, error) {
	for _, pid := range childrenOf(f.riePID) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || filepath.Base(exe) != "bootstrap" {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				return kb << 10, err
			}
		}
		return 0, errors.New("no VmHWM in /proc/" + strconv.Itoa(pid) + "/status")
	}
	return 0, fmt.Errorf("no bootstrap process under aws-lambda-rie (pid %d)", f.riePID)
}

// childrenOf lists the descendants of pid (Linux /proc).
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, childrenOf(c)...)
			}
		}
	}
	return out
}
