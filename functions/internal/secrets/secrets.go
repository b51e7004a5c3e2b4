// Package secrets fetches the secrets a function's configuration names by ARN from AWS Secrets Manager
// (app.SecretSource). Only the functions whose configuration names secrets import it.
//
// It makes the one call it needs, GetSecretValue, itself: a POST of the AWS JSON 1.1 protocol signed with
// the SDK's SigV4 signer, retried on throttling and server errors. The SDK's Secrets Manager client would
// add about 300 KB to every HTTP function's binary for that one call (issue 17: each bootstrap ≤ 12 MB).
package secrets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/internal/wait"
)

// Attempts bounds the tries of one GetSecretValue (throttling, 5xx, transport failures).
const Attempts = 4

// EndpointEnv overrides the Secrets Manager endpoint (the SDK's service-specific variable; tests).
const EndpointEnv = "AWS_ENDPOINT_URL_SECRETS_MANAGER"

// Manager returns a getter of secret values by ARN (GetSecretValue) with cfg. It is safe for concurrent
// use: config.Config.Resolve fetches the secrets side by side.
func Manager(cfg aws.Config) config.SecretGetter {
	c := &client{cfg: cfg, signer: v4.NewSigner(), hc: &http.Client{Timeout: 10 * time.Second}, endpoint: Endpoint(cfg.Region, os.Getenv(EndpointEnv))}
	return c.get
}

// Endpoint is the Secrets Manager endpoint of region, or override when set.
func Endpoint(region, override string) string {
	if override != "" {
		return strings.TrimRight(override, "/")
	}
	suffix := "amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		suffix = "amazonaws.com.cn"
	}
	return "https://secretsmanager." + region + "." + suffix
}

type client struct {
	cfg      aws.Config
	signer   *v4.Signer
	hc       *http.Client
	endpoint string
}

// apiError is the error document of the AWS JSON protocol.
type apiError struct {
	Type     string `json:"__type"`
	Message  string `json:"message"`
	Message2 string `json:"Message"`
}

func (c *client) get(ctx context.Context, arn string) (string, error) {
	body, err := json.Marshal(map[string]string{"SecretId": arn})
	if err != nil {
		return "", err
	}
	var last error
	for attempt := range Attempts {
		if attempt > 0 {
			if err := wait.Sleep(ctx, time.Duration(100<<attempt)*time.Millisecond); err != nil {
				return "", errors.Join(last, err)
			}
		}
		v, retry, err := c.once(ctx, body)
		if err == nil {
			return v, nil
		}
		if last = err; !retry {
			break
		}
	}
	return "", fmt.Errorf("GetSecretValue: %w", last)
}

func (c *client) once(ctx context.Context, body []byte) (string, bool, error) {
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", false, fmt.Errorf("credentials: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "secretsmanager", c.cfg.Region, time.Now()); err != nil {
		return "", false, fmt.Errorf("signing: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", true, err
	}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		_ = json.Unmarshal(raw, &e)
		typ := e.Type[strings.LastIndex(e.Type, "#")+1:]
		msg := e.Message + e.Message2
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || strings.Contains(typ, "Throttling")
		return "", retry, fmt.Errorf("HTTP %d %s: %s", resp.StatusCode, typ, msg)
	}
	var out struct {
		SecretString *string `json:"SecretString"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", false, fmt.Errorf("decoding the answer: %w", err)
	}
	if out.SecretString == nil {
		return "", false, errors.New("the secret has no string value")
	}
	return *out.SecretString, false, nil
}
