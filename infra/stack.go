package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsservicediscovery"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawsec2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Environment variable names the stack sets (functions/config documents them; a test checks every
// function's set against config.VarsFor).
const (
	envTable            = "WAYPOST_TABLE"
	envBucket           = "WAYPOST_BUCKET"
	envAdminSecretARN   = "WAYPOST_ADMIN_SECRET_ARN"
	envCursorKeyARN     = "WAYPOST_CURSOR_KEY_ARN"
	envLogLevel         = "WAYPOST_LOG_LEVEL"
	envVersion          = "WAYPOST_VERSION"
	envChannelURL       = "WAYPOST_CHANNEL_URL"
	envChannelSecret    = "WAYPOST_CHANNEL_SECRET"
	envChannelSecretARN = "WAYPOST_CHANNEL_SECRET_ARN"
	envDeliveryQueueURL = "WAYPOST_DELIVERY_QUEUE_URL"
	envCursorKey        = "WAYPOST_CURSOR_KEY"
	envChannelAddr      = "WAYPOST_CHANNEL_ADDR"
	envMCPWaitsPerSpace = "WAYPOST_MCP_WAITS_PER_SPACE"
)

// ChannelPort is the port the channel service container listens on.
const ChannelPort = 8788

// exportsPrefix is where the memory function writes ZIP exports (domain: exports/<space>/<id>.zip).
const exportsPrefix = "exports/"

// backupRetentionDays is how far back a restore reaches: DynamoDB point-in-time recovery keeps 35 days,
// and the bucket keeps noncurrent object versions as long.
const backupRetentionDays = 35

// functionEnv lists, for each function, the environment variables the stack sets on it. It is written out
// by hand on purpose: the test compares it with what functions/config says each function reads.
func functionEnv() map[string][]string {
	data := []string{envTable, envBucket, envCursorKeyARN, envLogLevel, envVersion, envChannelURL, envChannelSecretARN}
	return map[string][]string{
		FnMailbox: data,
		FnMemory:  data,
		FnBlobs:   data,
		FnMCP:     append([]string{envMCPWaitsPerSpace}, data...),
		// The admin function wakes the deliverer for a redelivery.
		FnAdmin:      append([]string{envAdminSecretARN, envDeliveryQueueURL}, data...),
		FnDispatcher: {envTable, envBucket, envLogLevel, envVersion, envDeliveryQueueURL},
		FnDeliverer:  {envTable, envBucket, envLogLevel, envVersion, envDeliveryQueueURL},
		FnSweeper:    {envTable, envBucket, envLogLevel, envVersion},
	}
}

// Stack is the Waypost stack and the parts tests look at.
type Stack struct {
	awscdk.Stack
	Functions map[string]awslambda.Function
}

// functionSpec is how one function runs.
type functionSpec struct {
	name        string
	description string
	timeout     float64 // seconds
	memoryMiB   float64
}

func functionSpecs() []functionSpec {
	return []functionSpec{
		// HTTP API integrations time out after 30 s, so the HTTP functions stop before.
		{FnMailbox, "Waypost data plane: describe, status, messages, inbox, schemas, webhook subscriptions", 29, 512},
		{FnMemory, "Waypost memory: publish, read, export", 29, 512},
		{FnBlobs, "Waypost blobs: prepare, upload, commit, get", 29, 512},
		{FnAdmin, "Waypost control plane (/admin/v0)", 29, 256},
		{FnMCP, "Waypost MCP endpoint (/mcp, Streamable HTTP)", 29, 512},
		{FnDispatcher, "Waypost webhook dispatcher: DynamoDB stream to the delivery queue", 60, 256},
		{FnDeliverer, "Waypost webhook deliverer: delivery queue to subscriber endpoints", 60, 256},
		{FnSweeper, "Waypost sweeper: expired uploads, space deletions", 300, 256},
	}
}

// dispatcherVisibility is the stream-failure queue's visibility timeout: six times the dispatcher's timeout.
const dispatcherVisibility = 6 * 60

// delivererVisibility is the delivery queue's visibility timeout: six times the deliverer's timeout, as AWS
// advises for SQS event sources, so a message is never visible again while a batch is still running.
const delivererVisibility = 6 * 60

// NewStack builds the Waypost stack under scope. It fails (panics, as CDK constructs do) only on settings
// Validate rejects or function binaries that are missing.
func NewStack(scope constructs.Construct, id string, s Settings, props *awscdk.StackProps) *Stack {
	if err := s.Validate(); err != nil {
		panic(err)
	}
	stack := awscdk.NewStack(scope, jsii.String(id), props)
	st := &Stack{Stack: stack, Functions: map[string]awslambda.Function{}}
	awscdk.Tags_Of(stack).Add(jsii.String("app"), jsii.String("waypost"), nil)
	awscdk.Tags_Of(stack).Add(jsii.String("stage"), jsii.String(s.Stage), nil)

	retention, _ := retentionDays(s.LogRetentionDays)
	dataRemoval := awscdk.RemovalPolicy_DESTROY
	if s.DeletionProtection {
		dataRemoval = awscdk.RemovalPolicy_RETAIN
	}

	// ---- Data: table, bucket, secrets.

	table := awsdynamodb.NewTable(stack, jsii.String("Table"), &awsdynamodb.TableProps{
		// store/dynamo: string partition key "pk", string sort key "sk", no secondary index.
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Stream: awsdynamodb.StreamViewType_NEW_IMAGE,
		// store/dynamo copies port.AttrExpires (delivered webhook markers) into "ttl" (dynamo.AttrTTL).
		TimeToLiveAttribute: jsii.String("ttl"),
		DeletionProtection:  jsii.Bool(s.DeletionProtection),
		RemovalPolicy:       dataRemoval,
	})

	bucket := awss3.NewBucket(stack, jsii.String("Bucket"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		// Uploads are create-only PUTs (presigned, straight from clients) to the sealed blob's key
		// (spaces/<space>/blobs/<blob>): an unsealed upload has no prefix of its own, and the sweeper deletes
		// the objects of expired ones. ZIP exports are written under exports/ and served by presigned GETs
		// valid 15 minutes: they expire after a day. Multipart uploads left incomplete are aborted.
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("abort-incomplete-multipart-uploads"),
			Enabled:                             jsii.Bool(true),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}, {
			Id:         jsii.String("expire-exports"),
			Enabled:    jsii.Bool(true),
			Prefix:     jsii.String(exportsPrefix),
			Expiration: awscdk.Duration_Days(jsii.Number(1)),
		}, {
			// Versioning is the blobs' backup (docs/operations.md): an overwritten or deleted object stays
			// restorable as a noncurrent version for as long as the table's point-in-time recovery reaches.
			Id:                          jsii.String("expire-noncurrent-versions"),
			Enabled:                     jsii.Bool(true),
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(backupRetentionDays)),
			ExpiredObjectDeleteMarker:   jsii.Bool(true),
		}},
		Versioned: jsii.Bool(true),
		// Presigned uploads and downloads come from browsers and agents anywhere; the signature, not the
		// origin, authorizes them.
		Cors: &[]*awss3.CorsRule{{
			AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_PUT, awss3.HttpMethods_GET},
			AllowedOrigins: jsii.Strings("*"),
			AllowedHeaders: jsii.Strings("*"),
			ExposedHeaders: jsii.Strings("ETag", "x-amz-checksum-sha256"),
			MaxAge:         jsii.Number(3600),
		}},
		RemovalPolicy: dataRemoval,
	})

	newSecret := func(id, description string, length float64) awssecretsmanager.Secret {
		return awssecretsmanager.NewSecret(stack, jsii.String(id), &awssecretsmanager.SecretProps{
			Description: jsii.String(description),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				PasswordLength:     jsii.Number(length),
				ExcludePunctuation: jsii.Bool(true),
			},
			RemovalPolicy: dataRemoval,
		})
	}
	adminSecret := newSecret("AdminSecret", "Waypost "+s.Stage+": admin secret (Bearer for /admin/v0)", 48)
	cursorKey := newSecret("CursorKey", "Waypost "+s.Stage+": cursor HMAC key shared by every function", 64)
	channelSecret := newSecret("ChannelSecret", "Waypost "+s.Stage+": bearer secret of the channel service's internal API", 48)

	// ---- Queues: webhook deliveries (+DLQ), stream records the dispatcher gave up on.

	deliveryDLQ := awssqs.NewQueue(stack, jsii.String("DeliveryDLQ"), &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
	})
	deliveryQueue := awssqs.NewQueue(stack, jsii.String("DeliveryQueue"), &awssqs.QueueProps{
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(delivererVisibility)),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		// A message the deliverer failed this many times (its own errors, not the endpoint's answers, which
		// domain/retry schedules) lands in the DLQ and raises the DLQ alarm.
		DeadLetterQueue: &awssqs.DeadLetterQueue{Queue: deliveryDLQ, MaxReceiveCount: jsii.Number(8)},
	})
	// Stream batches the dispatcher gave up on land in StreamFailures; the dispatcher consumes that queue too
	// and re-drives each batch from the stream; what it cannot re-drive goes to StreamFailuresDLQ (alarmed).
	streamFailuresDLQ := awssqs.NewQueue(stack, jsii.String("StreamFailuresDLQ"), &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
	})
	streamFailures := awssqs.NewQueue(stack, jsii.String("StreamFailures"), &awssqs.QueueProps{
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(14)),
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(dispatcherVisibility)),
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: streamFailuresDLQ, MaxReceiveCount: jsii.Number(5)},
	})

	// ---- HTTP API (created first: the functions announce commits through its URL).

	api := awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		Description:        jsii.String("Waypost " + s.Stage),
		CreateDefaultStage: jsii.Bool(false),
	})
	apiURL := api.ApiEndpoint()

	// ---- Functions: one role and one log group each.

	values := map[string]*string{
		envTable:            table.TableName(),
		envBucket:           bucket.BucketName(),
		envAdminSecretARN:   adminSecret.SecretArn(),
		envCursorKeyARN:     cursorKey.SecretArn(),
		envChannelSecretARN: channelSecret.SecretArn(),
		envLogLevel:         jsii.String("info"),
		envVersion:          jsii.String(s.AppVersion),
		envChannelURL:       apiURL,
		envDeliveryQueueURL: deliveryQueue.QueueUrl(),
		envMCPWaitsPerSpace: jsii.String(fmt.Sprint(s.MCPWaitsPerSpace)),
	}
	envs := functionEnv()
	for _, spec := range functionSpecs() {
		dir := filepath.Join(s.FunctionsDir, spec.name)
		if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
			panic(fmt.Errorf("function %s: %s/bootstrap is missing: run scripts/build-functions (cdk.json's build step does)", spec.name, dir))
		}
		logs := awslogs.NewLogGroup(stack, jsii.String(fnID(spec.name)+"Logs"), &awslogs.LogGroupProps{
			Retention:     retention,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		role := awsiam.NewRole(stack, jsii.String(fnID(spec.name)+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("Waypost " + s.Stage + " function " + spec.name),
		})
		// Logs: only this function's log group (no AWSLambdaBasicExecutionRole, which allows every group).
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
			Resources: &[]*string{logs.LogGroupArn()},
		}))
		env := map[string]*string{}
		for _, name := range envs[spec.name] {
			v, ok := values[name]
			if !ok {
				panic(fmt.Errorf("function %s: no value for %s", spec.name, name))
			}
			env[name] = v
		}
		var reserved *float64
		if n, ok := s.ReservedConcurrency[spec.name]; ok && n > 0 {
			reserved = jsii.Number(n)
		}
		fn := awslambda.NewFunction(stack, jsii.String(fnID(spec.name)), &awslambda.FunctionProps{
			ReservedConcurrentExecutions: reserved,
			Description:                  jsii.String(spec.description),
			Runtime:                      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture:                 awslambda.Architecture_ARM_64(),
			Handler:                      jsii.String("bootstrap"),
			Code:                         awslambda.Code_FromAsset(jsii.String(dir), nil),
			Role:                         role,
			LogGroup:                     logs,
			Timeout:                      awscdk.Duration_Seconds(jsii.Number(spec.timeout)),
			MemorySize:                   jsii.Number(spec.memoryMiB),
			Environment:                  &env,
		})
		st.Functions[spec.name] = fn
	}
	fns := st.Functions

	// ---- Least-privilege grants, by what each function does (SUPPLEMENT §11, docs/storage-keys.md).

	// store/dynamo calls GetItem, BatchGetItem, Query (ConsistentRead) and TransactWriteItems (dynamo.API;
	// the stack test holds the grants to it); IAM authorizes a transaction by the actions inside it (Put,
	// Update, Delete, ConditionCheck). No index exists, so the table ARN alone is the resource (no
	// "<table>/index/*").
	tableRead := []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
	tableWrite := []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}
	// Every S3 key the domain writes starts with spaces/ (domain/keys.go); s3:GetObject also covers
	// HeadObject. s3:ListBucket on the bucket itself makes a HeadObject of a missing key answer 404
	// instead of 403, which the upload and status paths rely on.
	objects := awscdk.Fn_Join(jsii.String(""), &[]*string{bucket.BucketArn(), jsii.String("/spaces/*")})
	grantTable := func(fn string, actions ...string) {
		fns[fn].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(actions...), Resources: &[]*string{table.TableArn()},
		}))
	}
	grantObjects := func(fn string, actions ...string) {
		fns[fn].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(actions...), Resources: &[]*string{objects},
		}))
		fns[fn].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings("s3:ListBucket"), Resources: &[]*string{bucket.BucketArn()},
		}))
	}
	for _, fn := range []string{FnMailbox, FnMemory, FnBlobs, FnMCP, FnAdmin, FnSweeper, FnDispatcher, FnDeliverer} {
		grantTable(fn, append(tableRead, tableWrite...)...)
	}
	for _, fn := range []string{FnMailbox, FnMemory, FnBlobs, FnMCP} {
		grantObjects(fn, "s3:GetObject", "s3:PutObject")
	}
	// The memory function writes ZIP exports (multipart above 8 MiB) under exports/ and presigns their GET.
	fns[FnMemory].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"),
		Resources: &[]*string{awscdk.Fn_Join(jsii.String(""), &[]*string{bucket.BucketArn(), jsii.String("/" + exportsPrefix + "*")})},
	}))
	grantObjects(FnSweeper, "s3:GetObject", "s3:DeleteObject")
	for name, fn := range fns {
		for _, v := range envs[name] {
			switch v {
			case envCursorKeyARN:
				cursorKey.GrantRead(fn, nil)
			case envAdminSecretARN:
				adminSecret.GrantRead(fn, nil)
			case envChannelSecretARN:
				channelSecret.GrantRead(fn, nil)
			}
		}
	}
	deliveryQueue.GrantSendMessages(fns[FnDispatcher])
	deliveryQueue.GrantSendMessages(fns[FnAdmin])
	// The deliverer re-enqueues a failed attempt with the delay of domain/retry's schedule.
	deliveryQueue.GrantSendMessages(fns[FnDeliverer])

	// ---- Event sources and schedule.

	fns[FnDispatcher].AddEventSource(awslambdaeventsources.NewDynamoEventSource(table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:   awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:          jsii.Number(100),
		MaxBatchingWindow:  awscdk.Duration_Seconds(jsii.Number(1)),
		BisectBatchOnError: jsii.Bool(true),
		// The dispatcher reports the first record it could not dispatch; Lambda retries from there.
		ReportBatchItemFailures: jsii.Bool(true),
		RetryAttempts:           jsii.Number(5),
		MaxRecordAge:            awscdk.Duration_Hours(jsii.Number(24)),
		OnFailure:               awslambdaeventsources.NewSqsDlq(streamFailures),
	}))
	fns[FnDispatcher].AddEventSource(awslambdaeventsources.NewSqsEventSource(streamFailures, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(1),
		ReportBatchItemFailures: jsii.Bool(true),
	}))
	fns[FnDeliverer].AddEventSource(awslambdaeventsources.NewSqsEventSource(deliveryQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}))
	awsevents.NewRule(stack, jsii.String("SweeperSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Waypost " + s.Stage + ": sweep expired uploads every 15 minutes"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(15))),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns[FnSweeper], nil)},
	})
	// Invoked by a schedule, the deliverer re-queues due deliveries whose wake-up was lost.
	awsevents.NewRule(stack, jsii.String("DelivererSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Waypost " + s.Stage + ": re-queue due webhook deliveries every 5 minutes"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(5))),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fns[FnDeliverer], nil)},
	})

	// ---- Channel service: one Fargate task, no NAT gateway.
	//
	// The VPC has public subnets only. The task gets a public IP so it can pull its image and reach
	// DynamoDB, Secrets Manager and CloudWatch Logs over the internet gateway (no NAT gateway, no interface
	// endpoints: those are the idle costs this avoids); its security group admits only the VPC link. The
	// HTTP API reaches it through the VPC link and Cloud Map (SRV record) for GET /v0/feed/wait and for the
	// bearer-protected internal announce API /internal/v0/*; the functions, outside any VPC, announce
	// commits to the API's URL (WAYPOST_CHANNEL_URL). docs/aws-cost.md has the figures.
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{{
			Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24),
		}},
		// Restricting the default security group takes a custom-resource Lambda; nothing uses that group.
		RestrictDefaultSecurityGroup: jsii.Bool(false),
	})
	placeSubnets(stack, vpc, s.AvailabilityZoneIDs)
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(awslogs.NewLogGroup(stack, jsii.String("FlowLogs"), &awslogs.LogGroupProps{
			Retention: retention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		}), nil),
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
	})
	linkSG := awsec2.NewSecurityGroup(stack, jsii.String("VpcLinkSG"), &awsec2.SecurityGroupProps{
		Vpc: vpc, Description: jsii.String("Waypost API Gateway VPC link"), AllowAllOutbound: jsii.Bool(false),
	})
	channelSG := awsec2.NewSecurityGroup(stack, jsii.String("ChannelSG"), &awsec2.SecurityGroupProps{
		Vpc: vpc, Description: jsii.String("Waypost channel service: only the VPC link may connect"), AllowAllOutbound: jsii.Bool(true),
	})
	channelSG.AddIngressRule(linkSG, awsec2.Port_Tcp(jsii.Number(ChannelPort)), jsii.String("from the API Gateway VPC link"), nil)
	linkSG.AddEgressRule(channelSG, awsec2.Port_Tcp(jsii.Number(ChannelPort)), jsii.String("to the channel service"), nil)
	link := awsapigatewayv2.NewVpcLink(stack, jsii.String("VpcLink"), &awsapigatewayv2.VpcLinkProps{
		Vpc:            vpc,
		Subnets:        &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		SecurityGroups: &[]interfacesawsec2.ISecurityGroupRef{linkSG},
	})
	namespace := awsservicediscovery.NewPrivateDnsNamespace(stack, jsii.String("Namespace"), &awsservicediscovery.PrivateDnsNamespaceProps{
		Name: jsii.String("waypost-" + s.Stage + ".internal"), Vpc: vpc,
	})
	cluster := awsecs.NewCluster(stack, jsii.String("Cluster"), &awsecs.ClusterProps{Vpc: vpc})
	taskDef := awsecs.NewFargateTaskDefinition(stack, jsii.String("ChannelTask"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(256),
		MemoryLimitMiB: jsii.Number(512),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	channelLogs := awslogs.NewLogGroup(stack, jsii.String("ChannelLogs"), &awslogs.LogGroupProps{
		Retention: retention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	container := taskDef.AddContainer(jsii.String("channel"), &awsecs.ContainerDefinitionOptions{
		Image: awsecs.ContainerImage_FromAsset(jsii.String(s.ChannelContextDir), &awsecs.AssetImageProps{
			File:     jsii.String(s.ChannelDockerfile),
			Platform: awsecrassets.Platform_LINUX_ARM64(),
			// Besides .dockerignore: never hash or ship build outputs, dependencies or VCS data.
			// The Dockerfile itself must stay in the staged context (.dockerignore leaves deploy/ out).
			Exclude: jsii.Strings(".git", "bin", "cdk.out", "**/node_modules", "waypost-data", "tmp", "infra", "!"+s.ChannelDockerfile),
		}),
		Logging:      awsecs.LogDriver_AwsLogs(&awsecs.AwsLogDriverProps{StreamPrefix: jsii.String("channel"), LogGroup: channelLogs}),
		PortMappings: &[]*awsecs.PortMapping{{ContainerPort: jsii.Number(ChannelPort)}},
		Environment: &map[string]*string{
			envTable:       table.TableName(),
			envBucket:      bucket.BucketName(),
			envLogLevel:    jsii.String("info"),
			envVersion:     jsii.String(s.AppVersion),
			envChannelAddr: jsii.String(fmt.Sprintf(":%d", ChannelPort)),
		},
		// Injected by ECS from Secrets Manager at task start; never in the task definition.
		Secrets: &map[string]awsecs.Secret{
			envChannelSecret: awsecs.Secret_FromSecretsManager(channelSecret, nil),
			envCursorKey:     awsecs.Secret_FromSecretsManager(cursorKey, nil),
		},
	})
	// feed.wait authenticates the token and replays the feed from the table: read access. Reading a space's
	// visible head may carry its watermark (SH#<space>) and void a slot abandoned by a dead writer
	// (FD#<space>), so those two writes are allowed on those partitions only (docs/dynamodb.md).
	taskDef.TaskRole().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings(tableRead...), Resources: &[]*string{table.TableArn()},
	}))
	for _, w := range [][2]string{{"dynamodb:UpdateItem", "SH#*"}, {"dynamodb:PutItem", "FD#*"}} {
		taskDef.TaskRole().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(w[0]), Resources: &[]*string{table.TableArn()},
			Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []string{w[1]}}},
		}))
	}
	service := awsecs.NewFargateService(stack, jsii.String("Channel"), &awsecs.FargateServiceProps{
		Cluster:           cluster,
		TaskDefinition:    taskDef,
		DesiredCount:      jsii.Number(1),
		MinHealthyPercent: jsii.Number(100),
		MaxHealthyPercent: jsii.Number(200),
		AssignPublicIp:    jsii.Bool(true),
		VpcSubnets:        &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		SecurityGroups:    &[]awsec2.ISecurityGroup{channelSG},
		CircuitBreaker:    &awsecs.DeploymentCircuitBreaker{Rollback: jsii.Bool(true)},
		CloudMapOptions: &awsecs.CloudMapOptions{
			CloudMapNamespace: namespace,
			Name:              jsii.String("channel"),
			DnsRecordType:     awsservicediscovery.DnsRecordType_SRV,
			Container:         container,
			ContainerPort:     jsii.Number(ChannelPort),
			DnsTtl:            awscdk.Duration_Seconds(jsii.Number(10)),
		},
	})

	// ---- Routes.

	integrations := map[string]awsapigatewayv2.HttpRouteIntegration{
		TargetChannel: awsapigatewayv2integrations.NewHttpServiceDiscoveryIntegration(jsii.String("ChannelIntegration"),
			service.CloudMapService(), &awsapigatewayv2integrations.HttpServiceDiscoveryIntegrationProps{VpcLink: link}),
	}
	for _, name := range HTTPFunctions() {
		integrations[name] = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(fnID(name)+"Integration"), fns[name], nil)
	}
	for _, r := range Routes() {
		integ, ok := integrations[r.Target]
		if !ok {
			panic(fmt.Errorf("route %s: no integration %q", r.Key(), r.Target))
		}
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integ,
		})
	}
	// No $default route: API Gateway itself answers a request that matches no route with 404 Not Found, so
	// unmatched paths (scanners, typos) never invoke a function.

	accessLogs := awslogs.NewLogGroup(stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention: retention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	stage := awsapigatewayv2.NewHttpStage(stack, jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		// Stage throttling: beyond it API Gateway answers 429 before any function runs.
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(s.ThrottleRateLimit),
			BurstLimit: jsii.Number(s.ThrottleBurstLimit),
		},
	})
	// Access logs (no bodies, no Authorization header): one JSON line per request.
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format: jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","time":"$context.requestTime",` +
			`"method":"$context.httpMethod","routeKey":"$context.routeKey","status":"$context.status",` +
			`"latencyMs":"$context.responseLatency","integrationError":"$context.integrationErrorMessage"}`),
	})

	publicURL := apiURL
	if s.DomainName != "" {
		domain := awsapigatewayv2.NewDomainName(stack, jsii.String("Domain"), &awsapigatewayv2.DomainNameProps{
			DomainName:  jsii.String(s.DomainName),
			Certificate: awscertificatemanager.Certificate_FromCertificateArn(stack, jsii.String("Certificate"), jsii.String(s.CertificateARN)),
		})
		awsapigatewayv2.NewApiMapping(stack, jsii.String("DomainMapping"), &awsapigatewayv2.ApiMappingProps{
			Api: api, DomainName: domain, Stage: stage,
		})
		publicURL = jsii.String("https://" + s.DomainName)
		awscdk.NewCfnOutput(stack, jsii.String("DomainTarget"), &awscdk.CfnOutputProps{
			Description: jsii.String("Point a CNAME (or an alias) for " + s.DomainName + " at this name"),
			Value:       domain.RegionalDomainName(),
		})
	}

	// ---- Alarms.

	topic := awssns.NewTopic(stack, jsii.String("Alarms"), &awssns.TopicProps{
		DisplayName: jsii.String("Waypost " + s.Stage + " alarms"),
		EnforceSSL:  jsii.Bool(true),
	})
	if s.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(s.AlarmEmail), nil))
	}
	alarms := newAlarmer(stack, s.Stage, topic)
	fiveMin := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")}
	alarms.anyAbove("DeliveryDLQAlarm", "webhook deliveries in the dead-letter queue", deliveryDLQ.MetricApproximateNumberOfMessagesVisible(fiveMin))
	alarms.anyAbove("StreamFailuresAlarm", "stream batches the dispatcher could not re-drive", streamFailuresDLQ.MetricApproximateNumberOfMessagesVisible(fiveMin))
	sum := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	names := make([]string, 0, len(fns))
	for name := range fns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		alarms.anyAbove(fnID(name)+"ErrorsAlarm", "function "+name+" errors", fns[name].MetricErrors(sum))
		alarms.anyAbove(fnID(name)+"ThrottlesAlarm", "function "+name+" throttles", fns[name].MetricThrottles(sum))
	}
	alarms.anyAbove("TableSystemErrorsAlarm", "DynamoDB system errors", table.MetricSystemErrorsForOperations(&awsdynamodb.SystemErrorsForOperationsMetricOptions{
		Period: awscdk.Duration_Minutes(jsii.Number(5)),
		Operations: &[]awsdynamodb.Operation{awsdynamodb.Operation_GET_ITEM, awsdynamodb.Operation_BATCH_GET_ITEM, awsdynamodb.Operation_QUERY,
			awsdynamodb.Operation_TRANSACT_WRITE_ITEMS},
	}))
	addServiceAlarms(alarms, alarmTargets{api: api, table: table, dispatcher: fns[FnDispatcher], channel: service,
		deliveryQueue: deliveryQueue})
	addDashboard(stack, s.Stage)

	// ---- Outputs.

	awscdk.NewCfnOutput(stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Description: jsii.String("Waypost base URL (WAYPOST_URL)"), Value: publicURL,
	})
	awscdk.NewCfnOutput(stack, jsii.String("McpUrl"), &awscdk.CfnOutputProps{
		Description: jsii.String("MCP endpoint (Streamable HTTP)"),
		Value:       awscdk.Fn_Join(jsii.String(""), &[]*string{publicURL, jsii.String("/mcp")}),
	})
	awscdk.NewCfnOutput(stack, jsii.String("AdminSecretArn"), &awscdk.CfnOutputProps{
		Description: jsii.String("Secrets Manager ARN of the admin secret (WAYPOST_ADMIN_SECRET)"), Value: adminSecret.SecretArn(),
	})
	awscdk.NewCfnOutput(stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Description: jsii.String("SNS topic every alarm notifies"), Value: topic.TopicArn(),
	})
	awscdk.NewCfnOutput(stack, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: table.TableName()})
	awscdk.NewCfnOutput(stack, jsii.String("BucketName"), &awscdk.CfnOutputProps{Value: bucket.BucketName()})

	suppressNag(st, nagTargets{api: api, topic: topic, bucket: bucket, taskDef: taskDef, cluster: cluster,
		secrets: []awssecretsmanager.Secret{adminSecret, cursorKey, channelSecret}, dlqs: []awssqs.Queue{streamFailuresDLQ}})
	return st
}

// fnID is the construct ID of a function ("mailbox" → "Mailbox").
func fnID(name string) string {
	if name == "" {
		return name
	}
	return string(name[0]-'a'+'A') + name[1:]
}
