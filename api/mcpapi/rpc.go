package mcpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/codec/strictjson"
	"github.com/waypost/waypost/internal/echo"
)

// strictRPC reads a posted JSON-RPC message and checks it as strictly as the HTTP API checks request
// bodies (RFC §5.1) before the SDK sees it: exactly one JSON value, valid UTF-8, no duplicate member names
// at any depth, finite numbers, bounded depth. A message that fails is a JSON-RPC parse error (-32700) in a
// JSON body, and nothing runs. Every other refusal of the transport (an unknown method, a body over the
// limit, a request that is not a JSON-RPC request, a missing Accept or Content-Type) is also answered as a
// JSON-RPC error object rather than the SDK's plain text (RFC §5.2: transport errors keep the MCP/JSON-RPC
// error format).
func (h *Handler) strictRPC(w http.ResponseWriter, r *http.Request, p *domain.Principal) {
	// The rate limit is counted once the body is read (the tool calls it carries count in their handlers);
	// a body refused here counts once, as a refused HTTP request does.
	body, err := io.ReadAll(io.LimitReader(r.Body, h.maxBody+1))
	if err != nil {
		if h.admit(w, r, p, 1) {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: the request body could not be read")
		}
		return
	}
	if int64(len(body)) > h.maxBody {
		if h.admit(w, r, p, 1) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Invalid Request: the JSON-RPC message is larger than %d bytes", h.maxBody))
		}
		return
	}
	if err := strictjson.CheckSyntax(body); err != nil {
		if h.admit(w, r, p, 1) {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: "+err.Error())
		}
		return
	}
	if !h.admit(w, r, p, untooledMessages(body)) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	rw := &rpcErrors{ResponseWriter: w}
	if msg, err := jsonrpc.DecodeMessage(body); err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok {
			rw.id, rw.method = req.ID, req.Method
		}
	}
	h.http.ServeHTTP(rw, r)
	rw.finish()
}

// untooledMessages returns how many of the JSON-RPC messages in body (one message, or a batch) are not tool
// calls — those count against the rate limit in the tool handler, each once — and at least 1 for a body
// that is neither (the transport refuses it, and the request still counts once).
func untooledMessages(body []byte) int {
	var raws []json.RawMessage
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(body, &raws); err != nil || len(raws) == 0 {
			return 1
		}
	} else {
		raws = []json.RawMessage{body}
	}
	n := 0
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == "tools/call" && req.IsCall() {
			continue
		}
		n++
	}
	return n
}

// rpcErrors passes a response through unless it is a plain-text refusal (status 400 or above, not JSON);
// that one is buffered and rewritten by finish into a JSON-RPC error object with the request's ID.
type rpcErrors struct {
	http.ResponseWriter
	id      jsonrpc.ID
	method  string
	status  int
	rewrite bool
	text    bytes.Buffer
}

func (e *rpcErrors) WriteHeader(status int) {
	if e.status != 0 {
		return
	}
	e.status = status
	if status >= 400 && !strings.HasPrefix(e.Header().Get("Content-Type"), "application/json") {
		e.rewrite = true
		return
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *rpcErrors) Write(p []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.rewrite {
		if e.text.Len() < 4096 {
			e.text.Write(p)
		}
		return len(p), nil
	}
	return e.ResponseWriter.Write(p)
}

// Flush lets a streamed response through.
func (e *rpcErrors) Flush() {
	if e.rewrite {
		return
	}
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *rpcErrors) finish() {
	if !e.rewrite {
		return
	}
	text := strings.TrimSpace(e.text.String())
	code, msg := int64(jsonrpc.CodeInvalidRequest), "Invalid Request: "+echo.Clip(text)
	if strings.Contains(text, "not handled") { // the SDK's refusal of a method it has no handler for
		code, msg = jsonrpc.CodeMethodNotFound, "Method not found: "+strconv.Quote(echo.Clip(e.method))
	}
	e.Header().Del("X-Content-Type-Options")
	writeRPCError(e.ResponseWriter, e.status, e.id, code, msg)
}

// writeRPCError writes a JSON-RPC 2.0 error response (id null when the request's ID is unknown).
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string) {
	raw, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: message}})
	if err != nil { // a response of an ID, a code and a string always encodes
		raw = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}
