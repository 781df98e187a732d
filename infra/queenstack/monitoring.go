package queenstack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// Metrics the reaper publishes through Embedded Metric Format logs. The alarms use the
// series without dimensions, so the reaper must emit that one (the total DLQ depth and
// the largest lag of any group); a per-queue "Queue" dimension may be added beside it.
const (
	MetricsNamespace  = "QueenServerless"
	MetricDLQDepth    = "DLQDepth"
	MetricMaxGroupLag = "MaxGroupLag"
	// MetricProxyPinned is the RDS Proxy metric of sessions pinned to one connection.
	MetricProxyPinned = "DatabaseConnectionsCurrentlySessionPinned"
)

// servingFunctions are every function but migrate: they wait for the migration, and
// their errors and throttles raise alarms (a failed migrate fails the deploy instead).
var servingFunctions = []string{"push", "pop", "ack", "dlq", "admin", "reaper"}

// newMonitoring defines the alarm topic, the alarms and the dashboard.
func newMonitoring(s awscdk.Stack, p Props, st *Stack) (awssns.Topic, []awscloudwatch.Alarm, awscloudwatch.Dashboard) {
	topic := awssns.NewTopic(s, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Queen Serverless alarms"),
		EnforceSSL:  jsii.Bool(true),
	})
	if p.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(topic)
	five := awscdk.Duration_Minutes(jsii.Number(5))

	var alarms []awscloudwatch.Alarm
	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold, periods float64) {
		a := awscloudwatch.NewAlarm(s, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(periods),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		alarms = append(alarms, a)
	}
	queen := func(name string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(name),
			Statistic: jsii.String("Maximum"), Period: five,
		})
	}
	dlqDepth, groupLag := queen(MetricDLQDepth), queen(MetricMaxGroupLag)
	pinned := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("AWS/RDS"), MetricName: jsii.String(MetricProxyPinned),
		DimensionsMap: &map[string]*string{"ProxyName": st.Proxy.DbProxyName()},
		Statistic:     jsii.String("Maximum"), Period: five,
	})

	alarm("DlqDepthAlarm", fmt.Sprintf("Messages in the Queen dead-letter table exceed %v", p.DLQDepthThreshold),
		dlqDepth, p.DLQDepthThreshold, 1)
	alarm("GroupLagAlarm", fmt.Sprintf("A consumer group lags more than %v messages for 15 minutes", p.GroupLagThreshold),
		groupLag, p.GroupLagThreshold, 3)
	alarm("ProxyPinningAlarm", "RDS Proxy sessions are pinned: some statement holds session state",
		pinned, p.PinnedConnectionsThreshold, 1)
	sum := &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five}
	for _, name := range servingFunctions {
		fn := st.Functions[name]
		id := upperFirst(name)
		alarm(id+"ErrorsAlarm", "Queen "+name+" function errors (crashes or timeouts)", fn.MetricErrors(sum), p.FunctionErrorsThreshold, 1)
		alarm(id+"ThrottlesAlarm", "Queen "+name+" function throttled", fn.MetricThrottles(sum), p.FunctionThrottlesThreshold, 1)
	}
	if st.IngestDLQ != nil {
		alarm("IngestDeadLetterAlarm", "SQS ingest messages could not be pushed and sit in the ingest DLQ",
			st.IngestDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: five}), 0, 1)
	}

	dash := newDashboard(s, st, alarms, dlqDepth, groupLag, pinned)
	return topic, alarms, dash
}

func newDashboard(s awscdk.Stack, st *Stack, alarms []awscloudwatch.Alarm, dlqDepth, groupLag, pinned awscloudwatch.IMetric) awscloudwatch.Dashboard {
	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	perFunction := func(metric func(name string) awscloudwatch.IMetric) []awscloudwatch.IMetric {
		var ms []awscloudwatch.IMetric
		for _, name := range servingFunctions {
			ms = append(ms, metric(name))
		}
		return ms
	}
	label := func(name string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Label: jsii.String(name), Statistic: jsii.String("Sum")}
	}
	api := st.API
	p99 := &awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Label: jsii.String("p99")}
	p50 := &awscloudwatch.MetricOptions{Statistic: jsii.String("p50"), Label: jsii.String("p50")}

	refs := make([]interfacesawscloudwatch.IAlarmRef, len(alarms))
	for i, a := range alarms {
		refs[i] = a
	}
	rows := [][]awscloudwatch.IWidget{
		{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("Queen alarms"), Alarms: &refs, Width: jsii.Number(24), Height: jsii.Number(4),
		})},
		{
			graph("API requests", api.MetricCount(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum")})),
			graph("API 4xx / 5xx", api.MetricClientError(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum")}),
				api.MetricServerError(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum")})),
			graph("API latency (ms)", api.MetricLatency(p50), api.MetricLatency(p99)),
		},
		{
			graph("Invocations", perFunction(func(n string) awscloudwatch.IMetric { return st.Functions[n].MetricInvocations(label(n)) })...),
			graph("Errors", perFunction(func(n string) awscloudwatch.IMetric { return st.Functions[n].MetricErrors(label(n)) })...),
			graph("Throttles", perFunction(func(n string) awscloudwatch.IMetric { return st.Functions[n].MetricThrottles(label(n)) })...),
		},
		{
			graph("Duration p99 (ms)", perFunction(func(n string) awscloudwatch.IMetric {
				return st.Functions[n].MetricDuration(&awscloudwatch.MetricOptions{Label: jsii.String(n), Statistic: jsii.String("p99")})
			})...),
			graph("Dead-letter depth", dlqDepth),
			graph("Max consumer-group lag", groupLag),
		},
		{
			graph("Proxy pinned sessions", pinned),
			graph("Database CPU (%)", st.Database.CPU),
			graph("Database connections", st.Database.Connections),
		},
	}
	if st.IngestQueue != nil {
		rows = append(rows, []awscloudwatch.IWidget{
			graph("Ingest queue visible", st.IngestQueue.MetricApproximateNumberOfMessagesVisible(nil)),
			graph("Ingest oldest message age (s)", st.IngestQueue.MetricApproximateAgeOfOldestMessage(nil)),
			graph("Ingest DLQ visible", st.IngestDLQ.MetricApproximateNumberOfMessagesVisible(nil)),
		})
	}
	widgets := make([]*[]awscloudwatch.IWidget, len(rows))
	for i := range rows {
		widgets[i] = &rows[i]
	}
	return awscloudwatch.NewDashboard(s, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		Widgets:         &widgets,
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
	})
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
