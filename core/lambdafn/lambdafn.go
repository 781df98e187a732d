// Package lambdafn is the wiring shared by the Lambda functions: each main
// builds a Function once per container (configuration from the environment,
// a JSON logger that stamps the Lambda request id, the pool and the store),
// then starts the runtime loop with its handler. The pool is created outside
// the handler and closed on SIGTERM.
//
//	func main() {
//		fn := lambdafn.Init("pop")
//		fn.OpenStore()
//		fn.Start(fn.HTTP(httpapi.GroupPop, httpapi.GroupHealth))
//	}
package lambdafn

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/reaper"
	"github.com/queen-serverless/queen/core/routes"
	"github.com/queen-serverless/queen/core/secrets"
)

// Function is what a Lambda function builds once per container.
type Function struct {
	// Name is the function's short name (push, pop, ...), in every log line.
	Name   string
	Config config.Config
	Logger *slog.Logger
	// Pool and Store are set by OpenStore.
	Pool  *pgxpool.Pool
	Store *pgstore.Store
	// Queue is the store the function's requests and events use: Store,
	// whose pushes start dispatcher runs when the deployment has a
	// dispatch function (Waker is then set too).
	Queue queen.Store
	Waker *dispatch.Waker
	// Lambda calls the Lambda API (the dispatch function's invokes).
	Lambda *dispatch.LambdaClient
}

// HTTPHandler handles API Gateway HTTP API (payload format 2.0) events.
type HTTPHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Init reads the configuration from the environment and builds the logger.
// On an invalid configuration it logs why and exits: the Lambda init fails
// with that message.
func Init(name string) *Function {
	cfg, err := config.FromEnv(os.Getenv)
	log := NewLogger(os.Stdout, cfg.LogLevel).With("function", name)
	if err != nil {
		Exit(log, "invalid configuration", err)
	}
	log.Debug("configured", "config", cfg)
	return &Function{Name: name, Config: cfg, Logger: log}
}

// OpenStore builds the pool (one connection on Lambda; it connects at the
// first query, not here) and the store over it. The store reads the
// encryption key secret (QUEEN_ENCRYPTION_KEY_SECRET_ARN) the first time an
// encrypted queue needs it, not here. It exits when the
// configuration names no database.
func (f *Function) OpenStore() { f.OpenStoreConns(0) }

// OpenStoreConns is OpenStore with a pool of up to conns connections (0:
// one), for a function that runs statements side by side (the reaper's
// lease batches); each counts against the proxy's connection budget.
func (f *Function) OpenStoreConns(conns int32) {
	pool, err := dbconn.NewPool(context.Background(), f.Config, dbconn.Options{MaxConns: conns})
	if err != nil {
		Exit(f.Logger, "database pool", err)
	}
	f.Pool = pool
	f.Store = pgstore.New(pool, f.Config.Store(f.Logger,
		secrets.KeyLoader(f.Config, secrets.SecretsManager(dbconn.LoadDefaultAWSConfig))))
	f.Queue = f.Store
	f.Lambda = &dispatch.LambdaClient{Config: dbconn.LoadDefaultAWSConfig}
	if f.Config.DispatchFunction != "" {
		f.Waker = &dispatch.Waker{Store: f.Store, Logger: f.Logger,
			Starter: dispatch.FunctionStarter{Client: f.Lambda, Function: f.Config.DispatchFunction}}
		f.Queue = dispatch.WakingStore{Store: f.Store, Waker: f.Waker}
	}
}

// Subscriptions is what the reaper starts due subscriptions with: nil
// when the deployment has no dispatch function.
func (f *Function) Subscriptions() reaper.SubscriptionStarter {
	if f.Waker == nil {
		return nil
	}
	return f.Waker
}

// Dispatch returns the dispatch function's handler: runs that deliver
// subscriptions to URL and function targets, each starting the next when
// its time is up (QUEEN_DISPATCH_FUNCTION, else this function's own name).
func (f *Function) Dispatch() *dispatch.Handler {
	self := f.Config.DispatchFunction
	if self == "" {
		self = os.Getenv(config.EnvLambdaFunctionName)
	}
	return &dispatch.Handler{
		Store:      f.Store,
		Dispatcher: dispatch.New(dispatch.Config{Store: f.Store, Lambda: f.Lambda, Logger: f.Logger, Fence: f.Config.Fence()}),
		Starter:    dispatch.FunctionStarter{Client: f.Lambda, Function: self},
		Logger:     f.Logger,
		Metrics:    os.Stdout,
	}
}

// API returns the HTTP API over the store with the configured limits; the
// caller is the one API Gateway verified (GatewayIdentity).
func (f *Function) API() *httpapi.API {
	cfg := f.Config.API(f.Logger)
	cfg.Identity = GatewayIdentity
	cfg.Admin = GatewayAdmin
	if f.Waker != nil {
		cfg.OnSubscription = f.Waker.Changed
	}
	return httpapi.New(f.Queue, cfg)
}

// GatewayIdentity is the caller API Gateway verified for this request: the
// JWT authorizer's sub claim, or the IAM authorizer's principal ARN; "" when
// the route has no authorizer. The request comes from the adapter, so the
// event's request context is in its context — clients cannot forge it.
func GatewayIdentity(r *http.Request) string {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil {
		return ""
	}
	if jwt := rc.Authorizer.JWT; jwt != nil && jwt.Claims["sub"] != "" {
		return jwt.Claims["sub"]
	}
	if iam := rc.Authorizer.IAM; iam != nil {
		return iam.UserARN
	}
	return ""
}

// GatewayAdmin reports whether API Gateway verified the caller as an
// admin: a JWT whose scope claim grants the admin role, or no authorizer
// on the route (anyone may do anything). An IAM caller's rights are in
// IAM policies the function cannot read, so it is not taken for one.
func GatewayAdmin(r *http.Request) bool {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil {
		return true
	}
	if jwt := rc.Authorizer.JWT; jwt != nil {
		return slices.Contains(jwt.Scopes, routes.ScopePrefix+string(routes.Admin)) ||
			slices.Contains(strings.Fields(jwt.Claims["scope"]), routes.ScopePrefix+string(routes.Admin))
	}
	return false
}

// HTTP returns the API Gateway handler serving the given route groups.
func (f *Function) HTTP(groups ...httpapi.Group) HTTPHandler {
	return NewHTTPHandler(f.API().Handler(groups...), f.Logger)
}

// DeadlineMargin is how long before the function's deadline a request's
// work is cancelled, so the function still answers (503, "request timed
// out", the statement rolled back) instead of being cut off by Lambda.
const DeadlineMargin = time.Second

// Bounded runs h with its context's deadline moved DeadlineMargin before
// the function's.
func Bounded[In, Out any](h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-DeadlineMargin))
			defer cancel()
		}
		return h(ctx, in)
	}
}

// NewHTTPHandler adapts an http.Handler to API Gateway HTTP API events
// (payload format 2.0). The request's context carries the Lambda context,
// so the handler's logs carry the request id, and its work stops
// DeadlineMargin before the function's deadline (see Bounded).
func NewHTTPHandler(h http.Handler, log *slog.Logger) HTTPHandler {
	adapter := httpadapter.NewV2(h)
	return Bounded(func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		start := time.Now()
		resp, err := adapter.ProxyWithContext(ctx, req)
		if err != nil {
			log.ErrorContext(ctx, "proxy request", "method", req.RequestContext.HTTP.Method, "path", req.RawPath, "err", err)
			return resp, err
		}
		log.DebugContext(ctx, "request", "method", req.RequestContext.HTTP.Method, "path", req.RawPath,
			"status", resp.StatusCode, "ms", time.Since(start).Milliseconds())
		return resp, nil
	})
}

// Start runs the Lambda runtime loop with handler (any handler form
// lambda.Start accepts) and never returns. SIGTERM, sent when Lambda shuts
// the container down, closes the pool.
func (f *Function) Start(handler any) {
	lambda.StartWithOptions(handler, lambda.WithEnableSIGTERM(f.Close))
}

// Close closes the pool, if any.
func (f *Function) Close() {
	if f.Pool != nil {
		f.Pool.Close()
		f.Logger.Info("pool closed")
	}
}

// Exit logs a failed initialisation and exits with status 1.
func Exit(log *slog.Logger, what string, err error) {
	log.Error(what, "err", err)
	os.Exit(1)
}

// NewLogger returns a JSON logger at level whose records logged with a
// Lambda context carry its request id ("requestId"), as CloudWatch Logs
// Insights expects.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(requestIDHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

// requestIDHandler adds the Lambda request id of the record's context.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
