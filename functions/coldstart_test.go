package functions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/waypost/waypost/functions/config"
)

// EnvMeasureColdStart turns on TestColdStart, a measurement rather than a check (docs/benchmarks.md).
const EnvMeasureColdStart = "WAYPOST_MEASURE_COLD_START"

// EnvColdStartBinaries names a directory of <name>/bootstrap to measure instead of building this tree's
// (to compare with another revision's functions).
const EnvColdStartBinaries = "WAYPOST_COLD_START_BINARIES"

// TestColdStart measures each function's cold start under aws-lambda-rie: from starting the emulator
// process to the answer of the first invocation (the emulator starts the bootstrap on that invocation, so
// this covers the process start, the function's init and one invocation), five times each, and logs the
// median. The first invocation does no storage work: an HTTP request without a token (answered 401), an
// empty stream batch, a scheduled due-sweep on an empty table, a scheduled upload sweep on an empty table.
// Opt in with WAYPOST_MEASURE_COLD_START=1 (and the emulators, as for the other tests here).
func TestColdStart(t *testing.T) {
	if os.Getenv(EnvMeasureColdStart) == "" {
		t.Skip("a measurement: set " + EnvMeasureColdStart + "=1 to run it")
	}
	e := newLambdaEnv(t, map[string]string{config.EnvCursorKey: "cold-cursor-key-0123456789abcdef0123456789",
		config.EnvDeliveryQueueURL: "http://127.0.0.1:1/000000000000/never-called", config.EnvSQSEndpoint: "http://127.0.0.1:1"})
	names := []string{"mailbox", "memory", "blobs", "admin", "mcp", "dispatcher", "deliverer", "sweeper"}
	bins := map[string]string{}
	if dir := os.Getenv(EnvColdStartBinaries); dir != "" {
		for _, n := range names {
			bins[n] = dir + "/" + n + "/bootstrap"
		}
	} else {
		bins = buildFunctions(t, names...)
	}
	httpEvent, _ := json.Marshal(events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: "/v0/describe",
		Headers:        map[string]string{"host": "api.example.test"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v0/describe"}}})
	mcpEvent := strings.Replace(string(httpEvent), "/v0/describe", "/mcp", 2)
	scheduled := `{"version":"0","id":"cold","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`
	payload := map[string]string{"mcp": mcpEvent, "dispatcher": `{"Records":[]}`, "deliverer": scheduled, "sweeper": scheduled}
	var report []string
	for _, name := range names {
		p, ok := payload[name]
		if !ok {
			p = string(httpEvent)
		}
		var runs []time.Duration
		for range 5 {
			var mu sync.Mutex
			start := time.Now()
			fn := startFunction(t, e.rie, name, bins[name], e.env(t, name), &mu)
			raw := fn.invokeRaw(t, []byte(p))
			runs = append(runs, time.Since(start))
			if strings.Contains(string(raw), "errorType") && name != "deliverer" {
				t.Fatalf("%s: %s", name, raw)
			}
		}
		slices.Sort(runs)
		report = append(report, fmt.Sprintf("%-10s median %6.1f ms  (min %.1f, max %.1f)", name,
			ms(runs[2]), ms(runs[0]), ms(runs[4])))
	}
	t.Logf("cold start under aws-lambda-rie (emulator start to first answer), 5 runs each:\n%s", strings.Join(report, "\n"))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
