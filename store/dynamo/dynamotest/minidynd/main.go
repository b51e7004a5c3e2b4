// Command minidynd serves many independent DynamoDB emulators (minidyn, the same version the tests link)
// from one process on a loopback address: the requests under /e/<name>/ go to the emulator <name>, made on
// its first request, and DELETE /e/<name> drops it with its tables.
//
// scripts/emulators builds it without the race detector, starts it and exports its base URL as
// WAYPOST_TEST_DYNAMODB_ENDPOINT; dynamotest.Start then gives each emulator a name there instead of
// serving minidyn inside the test binary, where the race detector's instrumentation, meant for the code
// under test, made the emulator's own work (it scans and copies whole tables) several times slower. The
// store under test talks to it through the AWS SDK and HTTP either way.
package main

import (
	"flag"
	"log"
	"net/http"
	"strings"
	"sync"

	miniserver "github.com/truora/minidyn/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "loopback address to listen on")
	flag.Parse()
	var mu sync.Mutex
	emulators := map[string]*miniserver.Server{}
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, path, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/e/"), "/")
		if !strings.HasPrefix(r.URL.Path, "/e/") || name == "" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		if r.Method == http.MethodDelete && !ok {
			delete(emulators, name)
			mu.Unlock()
			return
		}
		s := emulators[name]
		if s == nil {
			s = miniserver.NewServer()
			emulators[name] = s
		}
		mu.Unlock()
		r.URL.Path, r.URL.RawPath = "/"+path, ""
		s.ServeHTTP(w, r)
	})))
}
