// Package configtest gives tests of the functions' configuration a valid setting of every variable.
package configtest

import (
	"strings"

	"github.com/waypost/waypost/functions/config"
)

// Values returns a valid value for every variable of config.EnvVars that is not an ARN. The endpoints are
// loopback ports nothing listens on, so a cold start with them reaches no service; the admin secret is long
// enough for the admin API.
func Values() map[string]string {
	return map[string]string{
		config.EnvTable: "waypost", config.EnvBucket: "waypost-blobs", config.EnvBlobPrefix: "blobs/",
		config.EnvAdminSecret: "wpa_admin-secret-0123456789abcdefghijklmnopqrstuvwxyz", config.EnvCursorKey: strings.Repeat("k", 32),
		config.EnvInlineBodyMax: "1024", config.EnvLogLevel: "debug", config.EnvVersion: "1.2.3",
		config.EnvDynamoDBEndpoint: "http://127.0.0.1:1", config.EnvS3Endpoint: "http://127.0.0.1:1",
		config.EnvChannelURL: "http://127.0.0.1:1", config.EnvChannelSecret: "wpc_channel-secret-0123",
		config.EnvChannelAddr: "127.0.0.1:0", config.EnvDeliveryQueueURL: "https://sqs.example.test/q",
		config.EnvSQSEndpoint: "http://127.0.0.1:1", config.EnvMCPWaitsPerSpace: "2", config.EnvWebhookAllowLoopback: "1",
	}
}
