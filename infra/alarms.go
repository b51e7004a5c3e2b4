package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// Service alarms (issue 17): the failures that matter to users, each wired to the one alarm topic that the
// function and queue alarms of stack.go notify (with its optional e-mail subscription, context alarmEmail).
// Thresholds are deliberately plain; docs/aws-cost.md and the README say what each means.
const (
	// AlarmAPI5xx: more than this many 5xx answers of the HTTP API in five minutes.
	AlarmAPI5xx = 5
	// AlarmTransactionConflicts: more than this many DynamoDB transaction conflicts in five minutes (a few
	// are normal under contention: the store retries them; a storm means a hot item).
	AlarmTransactionConflicts = 50
	// AlarmIteratorAgeMS: the dispatcher's stream records older than this (webhooks fall behind).
	AlarmIteratorAgeMS = 5 * 60 * 1000
	// AlarmDeliveryAgeSeconds: a delivery wake-up waiting longer than this in the delivery queue.
	AlarmDeliveryAgeSeconds = 30 * 60
)

// alarmer adds the stack's alarms, each notifying the one alarm topic.
type alarmer struct {
	stack  awscdk.Stack
	stage  string
	action awscloudwatch.IAlarmAction
}

func newAlarmer(stack awscdk.Stack, stage string, topic awssns.Topic) alarmer {
	return alarmer{stack: stack, stage: stage, action: awscloudwatchactions.NewSnsAction(topic)}
}

// add adds the alarm id: it fires when metric compares with threshold as op says for periods evaluation
// periods; missing says how a period without data counts.
func (a alarmer) add(id, description string, metric awscloudwatch.IMetric, threshold float64, op awscloudwatch.ComparisonOperator,
	periods float64, missing awscloudwatch.TreatMissingData) {
	alarm := awscloudwatch.NewAlarm(a.stack, jsii.String(id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String("Waypost " + a.stage + ": " + description),
		Metric:             metric,
		Threshold:          jsii.Number(threshold),
		ComparisonOperator: op,
		EvaluationPeriods:  jsii.Number(periods),
		TreatMissingData:   missing,
	})
	alarm.AddAlarmAction(a.action)
}

// anyAbove adds the alarm id on any value of metric above zero in one period (no data: no alarm).
func (a alarmer) anyAbove(id, description string, metric awscloudwatch.IMetric) {
	a.add(id, description, metric, 0, awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
}

// alarmTargets are what the service alarms watch.
type alarmTargets struct {
	api           awsapigatewayv2.HttpApi
	table         awsdynamodb.Table
	dispatcher    awslambda.Function
	channel       awsecs.FargateService
	deliveryQueue awssqs.Queue
}

// addServiceAlarms adds the alarms on API 5xx, DynamoDB throttles and transaction conflicts, the stream
// iterator age, the channel service's running tasks and the age of the oldest delivery message.
func addServiceAlarms(alarms alarmer, t alarmTargets) {
	add := alarms.add
	fiveMin := awscdk.Duration_Minutes(jsii.Number(5))
	over := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	quiet := awscloudwatch.TreatMissingData_NOT_BREACHING

	add("Api5xxAlarm", "the HTTP API answered 5xx (function errors, timeouts or integration failures)",
		t.api.MetricServerError(&awscloudwatch.MetricOptions{Period: fiveMin, Statistic: jsii.String("Sum")}), AlarmAPI5xx, over, 1, quiet)

	tableMetric := func(name string) awscloudwatch.Metric {
		return t.table.Metric(jsii.String(name), &awscloudwatch.MetricOptions{Period: fiveMin, Statistic: jsii.String("Sum")})
	}
	add("TableThrottlesAlarm", "DynamoDB throttled reads or writes of the table",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   jsii.String("reads + writes"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"reads": tableMetric("ReadThrottleEvents"), "writes": tableMetric("WriteThrottleEvents")},
			Label:        jsii.String("throttle events"),
			Period:       fiveMin,
		}), 0, over, 1, quiet)
	add("TableTransactionConflictsAlarm", "DynamoDB transaction conflicts on the table beyond normal contention",
		tableMetric("TransactionConflict"), AlarmTransactionConflicts, over, 1, quiet)

	add("StreamIteratorAgeAlarm", "the webhook dispatcher is behind the table's stream",
		t.dispatcher.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Period: fiveMin, Statistic: jsii.String("Maximum")}),
		AlarmIteratorAgeMS, over, 1, quiet)

	// ECS publishes the service's CPUUtilization once a minute while a task runs: no sample means no running
	// task (Container Insights' RunningTaskCount would cost custom metrics for the same answer).
	add("ChannelRunningTasksAlarm", "the channel service has no running task (feed.wait and live wake-ups are down)",
		t.channel.MetricCpuUtilization(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("SampleCount")}),
		1, awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, 3, awscloudwatch.TreatMissingData_BREACHING)

	add("DeliveryOldestMessageAlarm", "a webhook delivery wake-up has waited too long in the delivery queue",
		t.deliveryQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: fiveMin, Statistic: jsii.String("Maximum")}),
		AlarmDeliveryAgeSeconds, over, 1, quiet)
}
