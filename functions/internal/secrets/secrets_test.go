package secrets_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/waypost/waypost/functions/internal/secrets"
)

// GetSecretValue is a signed AWS JSON 1.1 call; throttling and server errors are retried, other errors are
// not, and the secret string is returned as stored.
func TestManager(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		raw, _ := io.ReadAll(r.Body)
		var in map[string]string
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
			r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || json.Unmarshal(raw, &in) != nil ||
			!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKID/") ||
			!strings.Contains(r.Header.Get("Authorization"), "/eu-west-1/secretsmanager/aws4_request") || r.Header.Get("X-Amz-Security-Token") != "TOKEN" {
			t.Errorf("request %d: %s %v %s", n, r.Method, r.Header, raw)
		}
		switch in["SecretId"] {
		case "arn:throttled":
			if n == 1 {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"__type":"com.amazonaws#ThrottlingException","message":"slow down"}`)
				return
			}
			io.WriteString(w, `{"ARN":"arn:throttled","SecretString":"  s3cr3t-after-retry "}`)
		case "arn:missing":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"ResourceNotFoundException","Message":"no such secret"}`)
		default:
			io.WriteString(w, `{"SecretString":"value"}`)
		}
	}))
	defer srv.Close()
	t.Setenv(secrets.EndpointEnv, srv.URL)
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "TOKEN")}
	get := secrets.Manager(cfg)
	ctx := context.Background()
	if v, err := get(ctx, "arn:throttled"); err != nil || v != "  s3cr3t-after-retry " || calls.Load() != 2 {
		t.Fatalf("throttled then served: %q, %v after %d calls", v, err, calls.Load())
	}
	calls.Store(0)
	if _, err := get(ctx, "arn:missing"); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") || calls.Load() != 1 {
		t.Fatalf("missing secret: %v after %d calls", err, calls.Load())
	}
	if got := secrets.Endpoint("cn-north-1", ""); got != "https://secretsmanager.cn-north-1.amazonaws.com.cn" {
		t.Errorf("China endpoint %s", got)
	}
	if got := secrets.Endpoint("us-east-1", ""); got != "https://secretsmanager.us-east-1.amazonaws.com" {
		t.Errorf("endpoint %s", got)
	}
}
