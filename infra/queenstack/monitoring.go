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

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/reaper"
)

// Metrics the reaper publishes through Embedded Metric Format logs, named in
// core/reaper (the one place they are written down). The alarms use the series
// without dimensions, so the reaper must emit that one (the total DLQ depth, the
// largest lag of any group, whether the pass fell behind and what it left due per
// kind); a per-queue "Queue" dimension may be added beside it.
const (
	MetricsNamespace       = reaper.Namespace
	MetricDLQDepth         = reaper.MetricDLQDepth
	MetricMaxGroupLag      = reaper.MetricMaxGroupLag
	MetricReaperBehind     = reaper.MetricBehind
	MetricBacklogLeases    = reaper.MetricBacklogLeases
	MetricBacklogDedup     = reaper.MetricBacklogDedup
	MetricBacklogRetention = reaper.MetricBacklogRetention
	// MetricMaxSubscriptionLag is the largest lag of a group a subscription
	// delivers, from the reaper's pass.
	MetricMaxSubscriptionLag = reaper.MetricMaxSubscriptionLag
	// The dispatcher's metrics (core/dispatch), written by each run in the same
	// namespace without dimensions: the age in ms of the oldest record it
	// delivered, the records its targets settled, its deliveries that failed as a
	// whole.
	MetricSubscriptionIteratorAge    = dispatch.MetricIteratorAge
	MetricSubscriptionSettled        = dispatch.MetricSettled
	MetricSubscriptionDeliveryErrors = dispatch.MetricDeliveryErrors
	// MetricProxyPinned is the RDS Proxy metric of sessions pinned to one connection.
	MetricProxyPinned = "DatabaseConnectionsCurrentlySessionPinned"
	// MetricProxyBorrowLatency is the RDS Proxy's time to borrow a connection, in µs.
	MetricProxyBorrowLatency = "DatabaseConnectionsBorrowLatency"
	// MetricProxyClientConnections is the number of clients connected to the proxy.
	MetricProxyClientConnections = "ClientConnections"
)

// MaxAlarms bounds the stack's alarms: docs/aws.md prices CloudWatch for fewer than
// 30 ($0.10 each a month) rather than a count that goes stale.
const MaxAlarms = 30

// servingFunctions are the functions every stack has but migrate: their errors and
// throttles raise alarms (a failed migrate fails the deploy instead; the dispatcher,
// when there is one, has alarms of its own).
var servingFunctions = []string{"push", "pop", "ack", "dlq", "admin", "reaper"}

// newMonitoring defines the alarm topic, the alarms and the dashboard.
func newMonitoring(s awscdk.Stack, p Props, st *Stack) (awssns.Topic, []awscloudwatch.Alarm, awscloudwatch.Dashboard) {
	topic := awssns.NewTopic(s, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Queen Serverless alarms"),
		EnforceSSL:  jsii.Bool(true),
		MasterKey:   st.MonitoringKey, // its policy lets CloudWatch alarms publish
	})
	if p.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(topic)
	five := awscdk.Duration_Minutes(jsii.Number(5))

	var alarms []awscloudwatch.Alarm
	// alarm raises id when m is above threshold for periods of its period in a row
	// (below it with below, at or above it with atLeast). Missing data is "not
	// breaching" unless missingBreaches: most metrics simply have no data without
	// traffic.
	type rule struct {
		threshold, periods              float64
		below, atLeast, missingBreaches bool
	}
	alarm := func(id, desc string, m awscloudwatch.IMetric, r rule) {
		op, missing := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, awscloudwatch.TreatMissingData_NOT_BREACHING
		if r.below {
			op = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
		}
		if r.atLeast {
			op = awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
		}
		if r.missingBreaches {
			missing = awscloudwatch.TreatMissingData_BREACHING
		}
		a := awscloudwatch.NewAlarm(s, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(r.threshold),
			ComparisonOperator: op,
			EvaluationPeriods:  jsii.Number(r.periods),
			TreatMissingData:   missing,
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
	proxyMetric := func(name, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/RDS"), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{"ProxyName": st.Proxy.DbProxyName()},
			Statistic:     jsii.String(stat), Period: five,
		})
	}
	dlqDepth, groupLag := queen(MetricDLQDepth), queen(MetricMaxGroupLag)
	pinned := proxyMetric(MetricProxyPinned, "Maximum")
	borrowLatency := proxyMetric(MetricProxyBorrowLatency, "Average")

	// The reaper publishes DLQDepth and MaxGroupLag on every pass, so missing data
	// means the reaper stopped (or cannot reach the database): both alarms breach
	// then. The dead-letter alarm watches growth, DIFF of the five-minute maxima: a
	// new dead letter raises it, and it clears at the next period without anyone
	// having to drain the table (the depth itself is on the dashboard). DIFF of
	// missing data is missing, so a stopped reaper raises it too.
	dlqGrowth := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("DIFF(depth)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"depth": dlqDepth},
		Label:        jsii.String("DLQ depth growth"),
		Period:       five,
	})
	alarm("DlqDepthAlarm", fmt.Sprintf("The Queen dead-letter table grew by more than %v messages in 5 minutes, or the reaper stopped publishing its depth", p.DLQDepthThreshold),
		dlqGrowth, rule{threshold: p.DLQDepthThreshold, periods: 1, missingBreaches: true})
	alarm("GroupLagAlarm", fmt.Sprintf("A consumer group lags more than %v messages for 15 minutes, or the reaper stopped publishing the lag", p.GroupLagThreshold),
		groupLag, rule{threshold: p.GroupLagThreshold, periods: 3, missingBreaches: true})
	// ReaperBehind is 1 for a pass that ran out of time with work left, 0 for one
	// that caught up. The minimum over a reaper period is 1 only when every pass of
	// that period fell behind; the alarm wants ReaperBehindPasses such periods in a
	// row. A stopped reaper publishes nothing, which the DLQ and lag alarms catch.
	reaperPeriod := awscdk.Duration_Minutes(jsii.Number(p.ReaperRateMinutes))
	alarm("ReaperBehindAlarm", fmt.Sprintf("The reaper has not caught up for %v passes in a row: every pass ran out of time with leases, dedup keys or retention left due (see the reaper's backlog on the dashboard; the database may be too small, or a long transaction holds it back)", p.ReaperBehindPasses),
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(MetricReaperBehind),
			Statistic: jsii.String("Minimum"), Period: reaperPeriod,
		}), rule{threshold: 1, periods: p.ReaperBehindPasses, atLeast: true})
	alarm("ProxyPinningAlarm", "RDS Proxy sessions are pinned: some statement holds session state",
		pinned, rule{threshold: p.PinnedConnectionsThreshold, periods: 1})
	alarm("ProxyBorrowLatencyAlarm", fmt.Sprintf("Borrowing a database connection from the RDS Proxy takes more than %v ms on average for 10 minutes (pool saturated; at %v s requests fail)", p.ProxyBorrowLatencyMsThreshold, p.ProxyBorrowTimeoutSec),
		borrowLatency, rule{threshold: p.ProxyBorrowLatencyMsThreshold * 1000, periods: 2}) // the metric is in microseconds
	alarm("ProxyClientConnectionsAlarm", fmt.Sprintf("More than %v function containers are connected to the RDS Proxy", p.ProxyClientConnectionsThreshold),
		proxyMetric(MetricProxyClientConnections, "Maximum"), rule{threshold: p.ProxyClientConnectionsThreshold, periods: 1})

	db := st.Database
	if p.Burstable() {
		alarm("DatabaseCpuCreditsAlarm", fmt.Sprintf("The database has fewer than %v CPU credits left; at zero it runs at its baseline (consider a larger or non-burstable class)", p.DBCPUCreditBalanceThreshold),
			db.Metric("CPUCreditBalance", &awscloudwatch.MetricOptions{Statistic: jsii.String("Minimum"), Period: five}),
			rule{threshold: p.DBCPUCreditBalanceThreshold, periods: 1, below: true})
	}
	alarm("DatabaseCpuAlarm", fmt.Sprintf("The database's CPU is above %v %% for 15 minutes: move to a larger instance class, or have consumers pop in batches", p.DBCPUUtilizationThreshold),
		db.Metric("CPUUtilization", &awscloudwatch.MetricOptions{Statistic: jsii.String("Average"), Period: five}),
		rule{threshold: p.DBCPUUtilizationThreshold, periods: 3})
	alarm("DatabaseFreeableMemoryAlarm", fmt.Sprintf("The database has less than %v MiB of free memory for 15 minutes", p.DBFreeableMemoryMiBThreshold),
		db.Metric("FreeableMemory", &awscloudwatch.MetricOptions{Statistic: jsii.String("Minimum"), Period: five}),
		rule{threshold: p.DBFreeableMemoryMiBThreshold * 1024 * 1024, periods: 3, below: true})
	if p.Engine == EngineInstance {
		alarm("DatabaseFreeStorageAlarm", fmt.Sprintf("The database has less than %v GiB of free storage for 15 minutes: its data outgrew the %v GiB allocated, or storage autoscaling reached its maximum of %v GiB (check retention, the reaper's backlog and the load)", p.DBFreeStorageGiBThreshold, p.AllocatedStorageGiB, p.MaxAllocatedStorageGiB),
			db.Metric("FreeStorageSpace", &awscloudwatch.MetricOptions{Statistic: jsii.String("Minimum"), Period: five}),
			rule{threshold: p.DBFreeStorageGiBThreshold * 1024 * 1024 * 1024, periods: 3, below: true})
	}
	alarm("Api5xxAlarm", fmt.Sprintf("The Queen HTTP API answered more than %v 5xx responses in 5 minutes", p.API5xxThreshold),
		st.API.MetricServerError(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five}),
		rule{threshold: p.API5xxThreshold, periods: 1})

	sum := &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five}
	for _, name := range servingFunctions {
		fn := st.Functions[name]
		id := upperFirst(name)
		alarm(id+"ErrorsAlarm", "Queen "+name+" function errors (crashes or timeouts)", fn.MetricErrors(sum), rule{threshold: p.FunctionErrorsThreshold, periods: 1})
		alarm(id+"ThrottlesAlarm", "Queen "+name+" function throttled", fn.MetricThrottles(sum), rule{threshold: p.FunctionThrottlesThreshold, periods: 1})
	}
	maxOf := &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: five}
	alarm("PushFailedEventsAlarm", "SNS/EventBridge events push could not store after Lambda's retries sit in the push failed-events queue",
		st.PushFailedEvents.MetricApproximateNumberOfMessagesVisible(maxOf), rule{threshold: 0, periods: 1})
	if d := st.Functions[DispatchFunction]; d != nil {
		// The reaper publishes the subscription lag on every pass; missing data (no
		// subscription yet, or a stopped reaper, which the DLQ and lag alarms catch)
		// does not breach. The iterator age has data only while runs deliver.
		alarm("SubscriptionLagAlarm", fmt.Sprintf("A consumer group a subscription delivers lags more than %v messages for 15 minutes: the dispatcher cannot keep up, or its target keeps failing", p.SubscriptionLagThreshold),
			queen(MetricMaxSubscriptionLag), rule{threshold: p.SubscriptionLagThreshold, periods: 3})
		alarm("SubscriptionIteratorAgeAlarm", fmt.Sprintf("Dispatch runs delivered records older than %v s for 15 minutes: subscriptions are behind their pushes", p.SubscriptionIteratorAgeSecThreshold),
			queen(MetricSubscriptionIteratorAge), rule{threshold: p.SubscriptionIteratorAgeSecThreshold * 1000, periods: 3}) // the metric is in ms
		// No throttles alarm: with a reservation, wakes beyond it are throttled by
		// design and wait in Lambda's queue; a dispatcher that falls behind for any
		// reason raises the two alarms above.
		alarm("DispatchErrorsAlarm", "Queen dispatch function errors (crashed or timed-out runs; failed deliveries are the target's and count in SubscriptionDeliveryErrors)",
			d.MetricErrors(sum), rule{threshold: p.FunctionErrorsThreshold, periods: 1})
	}
	if st.IngestDLQ != nil {
		alarm("IngestDeadLetterAlarm", "SQS ingest messages could not be pushed and sit in the ingest DLQ",
			st.IngestDLQ.MetricApproximateNumberOfMessagesVisible(maxOf), rule{threshold: 0, periods: 1})
		alarm("IngestMessageAgeAlarm", fmt.Sprintf("The oldest SQS ingest message is older than %v s: push is failing or cannot keep up", p.IngestMessageAgeSecThreshold),
			st.IngestQueue.MetricApproximateAgeOfOldestMessage(maxOf), rule{threshold: p.IngestMessageAgeSecThreshold, periods: 1})
	}

	dash := newDashboard(s, st, alarms, dlqDepth, groupLag, pinned, borrowLatency)
	return topic, alarms, dash
}

func newDashboard(s awscdk.Stack, st *Stack, alarms []awscloudwatch.Alarm, dlqDepth, groupLag, pinned, borrowLatency awscloudwatch.IMetric) awscloudwatch.Dashboard {
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
	queenMax := func(name, label string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(name),
			Statistic: jsii.String("Maximum"), Label: jsii.String(label),
		})
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
			// What each reaper pass left due, per kind (0 once it caught up).
			graph("Reaper backlog (rows left due)", queenMax(MetricBacklogLeases, "leases"),
				queenMax(MetricBacklogDedup, "dedup keys"), queenMax(MetricBacklogRetention, "retention")),
			graph("Reaper behind (1: a pass ran out of time)", queenMax(MetricReaperBehind, "behind")),
			graph("Reaper duration p99 (ms)", st.Functions["reaper"].MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99")})),
		},
		{
			graph("Proxy pinned sessions", pinned),
			graph("Database CPU (%)", st.Database.CPU),
			graph("Database connections", st.Database.Connections),
		},
		{
			graph("Proxy borrow latency (µs)", borrowLatency),
			graph("Database free memory (bytes)", st.Database.Metric("FreeableMemory", nil)),
			// Aurora's storage grows by itself; its instances' local (temporary) storage can fill.
			graph("Database free storage (bytes)", st.Database.Metric(map[bool]string{true: "FreeLocalStorage", false: "FreeStorageSpace"}[st.Props.Engine == EngineAurora], nil)),
		},
	}
	rows = append(rows, []awscloudwatch.IWidget{
		graph("Failed async push events visible", st.PushFailedEvents.MetricApproximateNumberOfMessagesVisible(nil)),
	})
	if d := st.Functions[DispatchFunction]; d != nil {
		queenSum := func(name, label string) awscloudwatch.IMetric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(name),
				Statistic: jsii.String("Sum"), Label: jsii.String(label),
			})
		}
		rows = append(rows, []awscloudwatch.IWidget{
			graph("Max subscription lag", queenMax(MetricMaxSubscriptionLag, "lag")),
			graph("Subscription iterator age (ms)", queenMax(MetricSubscriptionIteratorAge, "oldest record delivered")),
			graph("Subscription records", queenSum(MetricSubscriptionSettled, "settled"), queenSum(MetricSubscriptionDeliveryErrors, "failed deliveries")),
		}, []awscloudwatch.IWidget{
			graph("Dispatch runs", d.MetricInvocations(label("invocations")), d.MetricErrors(label("errors")), d.MetricThrottles(label("throttles"))),
			graph("Dispatch duration p99 (ms)", d.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99")})),
			graph("Failed dispatch runs visible", st.DispatchFailedRuns.MetricApproximateNumberOfMessagesVisible(nil)),
		})
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
