// Command infra is the Waypost CDK app (github.com/aws/aws-cdk-go/awscdk/v2): one stack, "Waypost-<stage>",
// with the topology of shared/DESIGN.md — an HTTP API in front of the mailbox, memory, blobs, admin and mcp
// functions; the DynamoDB table whose stream feeds the webhook dispatcher, the delivery queue and its
// deliverer; the sweeper on a schedule; the S3 bucket; the channel service as one Fargate task reached
// through a VPC link (no NAT gateway); secrets, alarms and outputs.
//
// cdk.json at the repository root builds the functions (scripts/build-functions) and this app, then runs
// it from the root. Settings come from CDK context (see Settings); the stack is environment-agnostic, so
// `cdk synth` needs no AWS credentials and `cdk deploy` uses the CLI's account and region. The cdk-nag
// AwsSolutions checks run on every synthesis.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	s, err := SettingsFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "waypost infra:", err)
		jsii.Close()
		os.Exit(2)
	}
	NewStack(app, StackName(s.Stage), s, &awscdk.StackProps{
		Description: jsii.String("Waypost " + s.Stage + ": asynchronous mailbox and memory exchange (RFC-0001)"),
	})
	ApplyNag(app)
	app.Synth(nil)
}

// StackName is the stack of a stage.
func StackName(stage string) string { return "Waypost-" + stage }
