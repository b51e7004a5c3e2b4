package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// The operations dashboard (issue 16). The functions write their measurements into their logs in the
// CloudWatch embedded metric format (internal/metrics.EMF): CloudWatch extracts them with no API call.
// Namespace and metric names are those of internal/metrics (a separate module cannot import it; the
// template test pins them).
const (
	metricsNamespace = "Waypost"
	metricLatency    = "RequestLatency"  // ms; Function, Operation (its sample count is the request count)
	metricErrors     = "RequestErrors"   // count; Function
	metricCommitTime = "CommitLatency"   // ms; Function
	metricCommitOps  = "CommitOps"       // ops per transaction; Function
	metricConflicts  = "CommitConflicts" // count; Function
	metricCommitErrs = "CommitErrors"    // count; Function
)

// search is a graph line per metric a CloudWatch SEARCH expression finds.
func search(id, dims, metric, stat, label string) awscloudwatch.MathExpression {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s} MetricName="%s"', '%s', 300)`, metricsNamespace, dims, metric, stat)),
		Label:      jsii.String(label),
		Period:     awscdk.Duration_Minutes(jsii.Number(5)),
	})
}

func graph(title string, width float64, left ...awscloudwatch.IMetric) awscloudwatch.GraphWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String(title), Width: jsii.Number(width), Height: jsii.Number(6), Left: &left,
	})
}

// addDashboard adds the stage's dashboard: request latency per operation (p50, p99), requests per
// operation, failed requests per function, store commit latency and size, refused and failed commits.
func addDashboard(stack awscdk.Stack, stage string) awscloudwatch.Dashboard {
	d := awscloudwatch.NewDashboard(stack, jsii.String("OperationsDashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   jsii.String("Waypost-" + stage),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
	})
	d.AddWidgets(
		awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Width: jsii.Number(24), Height: jsii.Number(2), Markdown: jsii.String(
			"# Waypost " + stage + "\nLatency and outcome of every operation (by route), DynamoDB transaction latency and size. " +
				"Per-space stages (backlog, consumers, deliveries, quotas): `waypost admin stats`.")}),
	)
	d.AddWidgets(
		graph("Request latency p99 (ms) by operation", 12, search("p99", "Function,Operation", metricLatency, "p99", "")),
		graph("Request latency p50 (ms) by operation", 12, search("p50", "Function,Operation", metricLatency, "p50", "")),
	)
	d.AddWidgets(
		graph("Requests by operation", 12, search("requests", "Function,Operation", metricLatency, "SampleCount", "")),
		graph("Failed requests by function (the error code is in each log line)", 12, search("errors", "Function", metricErrors, "Sum", "")),
	)
	d.AddWidgets(
		graph("Store commit latency p99 (ms)", 8, search("commitp99", "Function", metricCommitTime, "p99", "")),
		graph("Operations per transaction (avg)", 8, search("commitops", "Function", metricCommitOps, "Average", "")),
		graph("Commits refused by a condition / failed", 8, search("conflicts", "Function", metricConflicts, "Sum", ""),
			search("commiterrors", "Function", metricCommitErrs, "Sum", "")),
	)
	return d
}
