package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// ApplyNag runs the cdk-nag AwsSolutions pack over scope (an aspect: findings become error and warning
// annotations, and `cdk synth` fails on an error).
func ApplyNag(scope awscdk.App) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// nagTargets are the constructs that carry suppressions.
type nagTargets struct {
	api     awsapigatewayv2.HttpApi
	topic   awssns.Topic
	bucket  awss3.Bucket
	taskDef awsecs.FargateTaskDefinition
	cluster awsecs.Cluster
	secrets []awssecretsmanager.Secret
	dlqs    []awssqs.Queue
}

// suppression is one cdk-nag rule not applied, with the reason (and, for IAM5, the exact findings).
func suppression(id, reason string, appliesTo ...any) *cdknag.NagPackSuppression {
	s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		s.AppliesTo = &appliesTo
	}
	return s
}

func suppress(construct any, children bool, s ...*cdknag.NagPackSuppression) {
	cdknag.NagSuppressions_AddResourceSuppressions(construct, &s, jsii.Bool(children))
}

// suppressNag records every cdk-nag suppression of the stack. Each names what it exempts and why; the
// IAM5 (wildcard) ones list the exact findings, which the test's wildcard allowlist names as well.
func suppressNag(st *Stack, t nagTargets) {
	suppress(t.api, true, suppression("AwsSolutions-APIG4",
		"Waypost authorizes every request itself: data-plane routes take a per-consumer bearer token looked up in "+
			"DynamoDB (SUPPLEMENT §11.1), /admin/v0 the admin secret, /internal/v0 the channel secret, each checked "+
			"by the function or service before any work; an API Gateway authorizer would repeat that lookup"))

	// IAM5: S3 object keys are generated at run time, all under spaces/ (domain/keys.go).
	for _, name := range []string{FnMailbox, FnMemory, FnBlobs, FnMCP, FnSweeper} {
		suppress(st.Functions[name].Role(), true, suppression("AwsSolutions-IAM5",
			"S3 object keys are created at run time (spaces/<space>/blobs/<blob>, …/messages/<id>/body.json, "+
				"…/collections/<c>/states/…): the object actions are limited to the spaces/ prefix of the one bucket",
			cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<Bucket[0-9A-F]+\.Arn>\/spaces\/\*$/g`)}))
	}
	// IAM5: ZIP export objects are named at run time under exports/ (domain/keys.go).
	suppress(st.Functions[FnMemory].Role(), true, suppression("AwsSolutions-IAM5",
		"ZIP export objects are created at run time (exports/<space>/<export>.zip) and expire after a day: the "+
			"object actions are limited to the exports/ prefix of the one bucket",
		cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<Bucket[0-9A-F]+\.Arn>\/exports\/\*$/g`)}))
	// IAM5: the DynamoDB event source mapping needs dynamodb:ListStreams, which has no resource-level
	// permissions (CDK's Table.grantStreamRead).
	suppress(st.Functions[FnDispatcher].Role(), true, suppression("AwsSolutions-IAM5",
		"dynamodb:ListStreams does not support resource-level permissions; the stream read actions themselves "+
			"are limited to this table's stream", "Resource::*"))
	// IAM5: the task execution role pulls the image from the CDK asset repository.
	suppress(t.taskDef.ExecutionRole(), true, suppression("AwsSolutions-IAM5",
		"ecr:GetAuthorizationToken does not support resource-level permissions; the image pull actions are "+
			"limited to the CDK asset repository", "Resource::*"))
	suppress(t.taskDef, false, suppression("AwsSolutions-ECS2",
		"the plain environment holds only non-secret settings (table and bucket names, log level, version, "+
			"listen address); the channel secret and the cursor key are injected from Secrets Manager"))
	suppress(t.cluster, false, suppression("AwsSolutions-ECS4",
		"the cluster runs one 0.25 vCPU task; Container Insights would cost more than the task's own metrics "+
			"tell (CPU, memory and the service's running count are in the default ECS metrics)"))
	for _, sec := range t.secrets {
		suppress(sec, false, suppression("AwsSolutions-SMG4",
			"generated once per deployment and read at cold start; rotating the cursor key invalidates every "+
				"consumer's cursor and the admin secret is the owner's, so rotation is a manual operation "+
				"(README, Deploy to AWS)"))
	}
	for _, q := range t.dlqs {
		suppress(q, false, suppression("AwsSolutions-SQS3",
			"this queue is itself a dead-letter queue (of the stream-failure queue the dispatcher re-drives), "+
				"watched by an alarm"))
	}
	suppress(t.bucket, false, suppression("AwsSolutions-S1",
		"clients reach objects only through presigned URLs a function issues after authorizing the request, and "+
			"the functions log each request; server access logs would need a second bucket and mostly duplicate "+
			"those logs (CloudTrail data events can be enabled per account)"))
}
