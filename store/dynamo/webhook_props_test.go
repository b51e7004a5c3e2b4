package dynamo_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
)

// TestWebhookProperties runs P15 and the webhook delivery scenarios (domaintest.RunWebhookProperties) on
// DynamoDB (minidyn) + S3 (versitygw). Every check makes a fresh table, so unlike the other suites a
// property's cost grows only linearly with its checks: webhookChecks of them keep the run near 40 s under
// -race. A restart is a new service over the same table.
func TestWebhookProperties(t *testing.T) {
	limitRapidChecks(t, webhookChecks)
	domaintest.RunWebhookProperties(t, awsBackend(t), domaintest.MaxSteps(24))
}

// webhookChecks is the rapid check count of TestWebhookProperties unless -rapid.checks or RAPID_CHECKS says
// otherwise.
const webhookChecks = 20
