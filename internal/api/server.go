// Package api serves Parley over HTTP: JSON endpoints, the conversations'
// streams (written by package transport), the protocol adapters of package
// protocols (the AI SDK's chat, AG-UI), and the web UI (package webui)
// beside them. It reads through the read side (package reads) and writes only
// through the engine. Errors map to HTTP statuses in one place (errors.go).
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/mcp"
	"github.com/parleyhq/parley/internal/protocols"
	"github.com/parleyhq/parley/internal/reads"
	"github.com/parleyhq/parley/internal/runners"
	"github.com/parleyhq/parley/internal/schedule"
	"github.com/parleyhq/parley/internal/spool"
	"github.com/parleyhq/parley/internal/tokens"
	"github.com/parleyhq/parley/internal/transport"
	"github.com/parleyhq/parley/internal/webui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// Open makes every request without a token act as an admin. Only for
	// loopback addresses with no tokens configured; it ends as soon as a
	// token is created through this server (or seen by WatchTokens). Such
	// requests must pass the checks of Guards.
	Open bool
	// MaxBodyBytes bounds a request body (default 1 MiB).
	MaxBodyBytes int64
	// MaxImportBytes bounds the body of an import, which streams (default 4 GiB).
	MaxImportBytes int64
	// PageBytes bounds a page of messages, events or conversations (and a
	// thread's ancestors shown whole, and its descendants) by size as well
	// as by count (default 8 MiB): past it the page ends early and says
	// where to continue.
	PageBytes int
	// Logger receives one line per request and internal errors.
	Logger *slog.Logger
	// Gatherer serves /metrics (default prometheus.DefaultGatherer).
	Gatherer prometheus.Gatherer
	// Registerer receives the API's own metrics (none registered if nil).
	Registerer prometheus.Registerer
	// Ready reports whether the server can serve (for /readyz); nil means
	// always ready.
	Ready func(context.Context) error
	// HeartbeatInterval is how long a stream may be silent before it gets a
	// ping: an SSE comment, a WebSocket ping (default 15s).
	HeartbeatInterval time.Duration
	// OriginPatterns are the host patterns (path.Match syntax, such as
	// "app.example.com" or "*.example.com") of other origins whose browsers
	// may open WebSocket streams. Same-origin requests and clients that send
	// no Origin header are always accepted; any other origin gets 403.
	OriginPatterns []string
	// WriteTimeout bounds one batch of writes to a stream client that does not
	// read (default 10s); past it the client is dropped. On WebSocket
	// connections a batch gets between half of it and all of it: the
	// deadline is moved once per half timeout, not at every batch.
	WriteTimeout time.Duration
	// Spool is where an export and a backup are written before they are
	// sent, and the bounds of exports' files (default: spool.New over the
	// system's temporary directory, with its default bounds); the server
	// opens it beside its database.
	Spool *spool.Spool
	// A2ACards name the A2A agent cards' names, descriptions and skills,
	// by agent id (protocols.ReadA2ACards reads them from a file).
	A2ACards map[string]protocols.A2ACard
	// Guards hold the protections of open mode, request bodies and quotas.
	Guards
}

// Server is the HTTP handler of the API.
type Server struct {
	eng     *engine.Engine
	runners *runners.Dispatcher
	rd      *reads.Reader // what the handlers read
	tokens  *tokens.Keeper
	tasks   *schedule.Scheduler
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *httpMetrics
	// streams writes conversations' streams (SSE, WebSocket).
	streams *transport.Streams
	// protocols serves the AI SDK's chat and AG-UI.
	protocols *protocols.Server
	// mcp serves the MCP endpoint.
	mcp     *mcp.Server
	open    atomic.Bool
	creates *rateLimiter // conversations and tasks made (nil: no bound)
	// connects counts runner connections opened (nil: no bound).
	connects *rateLimiter
	// signIns counts sign-ins (POST /v1/session) by client address.
	signIns *rateLimiter
	// bodies bounds the request bodies read at once (see reserveBody).
	bodies *bodyBudget
	// backingUp is true while a backup is made or sent: one at a time.
	backingUp atomic.Bool
	// exportReads holds a token per export reading the store.
	exportReads chan struct{}
}

// New returns the API over eng, its runners, the read side of its store
// (rd), the tokens of tk (which must be eng's Options.Connections, so that
// revoking a token ends its streams too) and the scheduled tasks of tasks.
func New(eng *engine.Engine, rn *runners.Dispatcher, rd *reads.Reader, tk *tokens.Keeper, tasks *schedule.Scheduler, opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = 8 << 20
	}
	if opts.MaxImportBytes <= 0 {
		opts.MaxImportBytes = 4 << 30
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 15 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.Spool == nil {
		opts.Spool = spool.New("", spool.Limits{})
	}
	opts.Guards.setDefaults()
	s := &Server{eng: eng, runners: rn, rd: rd, tokens: tk, tasks: tasks, opts: opts, log: opts.Logger, mux: http.NewServeMux(), metrics: newHTTPMetrics(opts.Registerer),
		creates:     newRateLimiter(opts.CreateRate, opts.CreateBurst, "create conversations and tasks"),
		connects:    newRateLimiter(opts.RunnerConnectRate, opts.RunnerConnectBurst, "connect runners"),
		signIns:     newRateLimiter(opts.SignInRate, opts.SignInBurst, "sign in"),
		bodies:      &bodyBudget{max: opts.MaxBodyMemory},
		exportReads: make(chan struct{}, maxExportReads)}
	s.streams = transport.New(transport.Options{Heartbeat: opts.HeartbeatInterval, WriteTimeout: opts.WriteTimeout,
		OriginPatterns: opts.OriginPatterns, ErrorBody: errorObject, Logger: opts.Logger})
	s.protocols = protocols.New(eng, rd, rn, s.streams, protocolHost{s}, protocols.Options{Heartbeat: opts.HeartbeatInterval, WriteTimeout: opts.WriteTimeout, A2ACards: opts.A2ACards})
	s.mcp = mcp.New(eng, rd, mcpHost{s}, mcp.Options{MaxBodyBytes: opts.MaxBodyBytes, PageBytes: opts.PageBytes,
		MaxConnsPerToken: opts.MaxConnsPerToken, Logger: opts.Logger})
	s.open.Store(opts.Open)
	s.routes()
	return s
}

// route is one endpoint of the API: a method, a path pattern in
// net/http.ServeMux syntax, and its handler. The mux is built from routes,
// and the OpenAPI document (openapi.json) must describe each of them.
type route struct {
	method, path string
	handler      http.HandlerFunc
}

// apiRoutes are the API's endpoints. The web UI's files are mounted beside
// them (routes).
func (s *Server) apiRoutes() []route {
	return []route{
		{"GET", "/healthz", s.guarded(s.healthz)},
		{"GET", "/readyz", s.guarded(s.readyz)},
		{"GET", "/metrics", s.guarded(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}).ServeHTTP)},
		{"GET", "/v1/openapi.json", s.guarded(serveOpenAPI)},

		{"POST", "/v1/conversations", s.authed(s.limited(s.creates, s.createConversation))},
		{"GET", "/v1/conversations", s.authed(s.listConversations)},
		{"GET", "/v1/conversations/{id}", s.authed(s.getConversation)},
		{"PATCH", "/v1/conversations/{id}", s.authed(s.updateConversation)},
		{"DELETE", "/v1/conversations/{id}", s.authed(s.deleteConversation)},
		{"GET", "/v1/conversations/{id}/export", s.authed(s.exportConversation)},
		{"POST", "/v1/conversations/import", s.authed(s.importConversation)},
		{"POST", "/v1/conversations/{id}/messages", s.authed(s.postMessage)},
		{"GET", "/v1/conversations/{id}/messages", s.authed(s.listMessages)},
		{"GET", "/v1/conversations/{id}/messages/{mid}", s.authed(s.getMessage)},
		{"GET", "/v1/conversations/{id}/messages/{mid}/replies", s.authed(s.listReplies)},
		{"GET", "/v1/conversations/{id}/messages/{mid}/thread", s.authed(s.getThread)},
		{"POST", "/v1/conversations/{id}/events", s.authed(s.postEvent)},
		{"GET", "/v1/conversations/{id}/events", s.authed(s.listEvents)},
		{"POST", "/v1/conversations/{id}/turns/claim", s.authed(s.claimTurn)},
		{"POST", "/v1/conversations/{id}/turns/reset", s.authed(s.resetTurn)},
		{"POST", "/v1/conversations/{id}/turns/abort", s.authed(s.abortTurn)},
		{"POST", "/v1/conversations/{id}/delegations", s.authed(s.delegate)},
		{"GET", "/v1/conversations/{id}/stream", s.authed(s.streamSSE)},
		{"GET", "/v1/conversations/{id}/ws", s.authed(s.streamWS)},
		{"GET", "/v1/conversations/{id}/runner", s.authed(s.limited(s.connects, s.runner))},
		{"GET", "/v1/agents/{agentId}/runner", s.authed(s.limited(s.connects, s.agentRunner))},
		{"POST", "/v1/conversations/{id}/prompts", s.authed(s.postPrompt)},
		{"GET", "/v1/conversations/{id}/prompts", s.authed(s.listPrompts)},
		{"GET", "/v1/conversations/{id}/prompts/{pid}", s.authed(s.getPrompt)},
		{"DELETE", "/v1/conversations/{id}/prompts/{pid}", s.authed(s.promptCommand(withdraw))},
		{"POST", "/v1/conversations/{id}/prompts/{pid}/promote", s.authed(s.promptCommand(promote))},
		{"POST", "/v1/conversations/{id}/abort", s.authed(s.abortResponse)},
		{"POST", "/v1/conversations/{id}/revert", s.authed(s.revert)},
		{"GET", "/v1/conversations/{id}/inputs", s.authed(s.listInputs)},
		{"POST", "/v1/conversations/{id}/inputs/{rid}", s.authed(s.answerInput)},

		{"GET", "/v1/search", s.authed(s.search)},
		{"POST", "/v1/mcp", s.authed(s.serveMCP)},

		{"POST", "/v1/chat", s.authed(s.protocols.Chat)},
		{"GET", "/v1/chat/{id}/stream", s.authed(s.protocols.ResumeChat)},
		{"POST", "/v1/ag-ui", s.authed(s.protocols.AGUI)},
		{"POST", "/v1/a2a/{agentId}", s.authed(s.protocols.A2A)},
		{"GET", "/v1/a2a/{agentId}/.well-known/agent-card.json", s.authed(s.protocols.A2ACard)},

		{"POST", "/v1/tasks", s.authed(s.limited(s.creates, s.createTask))},
		{"GET", "/v1/tasks", s.authed(s.listTasks)},
		{"DELETE", "/v1/tasks/{id}", s.authed(s.deleteTask)},

		{"GET", "/v1/whoami", s.authed(s.whoami)},
		{"POST", "/v1/session", s.guarded(s.signIn)},
		{"DELETE", "/v1/session", s.guarded(s.signOut)},
		{"POST", "/v1/tokens", s.authed(s.createToken)},
		{"GET", "/v1/tokens", s.authed(s.listTokens)},
		{"DELETE", "/v1/tokens/{id}", s.authed(s.revokeToken)},
		{"GET", "/v1/admin/backup", s.authed(s.backup)},
		{"GET", "/v1/admin/deliveries", s.authed(s.listDeliveries)},
	}
}

// takesRequestKey are the routes that keep a client request id
// (clientRequestId, or the Idempotency-Key header): a retry with the same
// key and body gets the original answer. Every other write refuses the
// header rather than ignore it.
var takesRequestKey = map[string]bool{
	"POST /v1/conversations/{id}/messages": true,
	"POST /v1/conversations/{id}/events":   true,
	"POST /v1/conversations/{id}/prompts":  true,
}

func (s *Server) routes() {
	for _, rt := range s.apiRoutes() {
		s.mux.HandleFunc(rt.method+" "+rt.path, rt.handler)
	}
	// The web UI: static files that need no token, but an open server
	// answers them only as it answers everything else (checkOpen).
	ui := webui.Embedded()
	for _, p := range ui.Patterns() {
		s.mux.HandleFunc("GET "+p, webui.Secure(s.guarded(ui.ServeHTTP)))
	}
}

// ServeHTTP implements http.Handler: it routes, logs and counts requests.
// Unknown paths and methods get JSON errors like everything else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.boundBody(w, r)
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK, ctx: r.Context()}
	// Handler finds the route (for the metrics label and our JSON 404/405);
	// the mux itself then serves it, which sets the path values.
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.notRouted(rec, r)
	} else if r.Method != http.MethodGet && r.Header.Get("Idempotency-Key") != "" && !takesRequestKey[pattern] {
		// A key sent where it is not kept would be silently ignored, and
		// the retry it was meant to make safe would write twice.
		s.refuse(rec, r, parley.Errorf(parley.EINVALID, "%s takes no Idempotency-Key: only posting a message, a trace or a prompt does. "+
			"Give what it makes an id instead (a retry is then 409 busy), or repeat it as it is: a turn command, a stop, a revert or a delete writes nothing twice", pattern))
	} else if strings.ContainsRune(r.URL.Path, 0) || strings.Contains(r.URL.RawQuery, "%00") {
		// No path value or query parameter may hold NUL, which Parley
		// stores nowhere (see parley.HasNUL): refused here, once, for
		// every endpoint, before one is passed on to a store's query.
		s.refuse(rec, r, parley.Errorf(parley.EINVALID, "the request's URL holds %%00 (the character NUL), which no id, filter or query may hold"))
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	linger(rec, r)
	pattern := r.Pattern
	if pattern == "" {
		pattern = "unrouted"
	}
	d := time.Since(start)
	s.metrics.observe(pattern, rec.status, d)
	// Never log the query string (it may carry ?token=) or headers.
	s.log.Info("request", slog.String("method", r.Method), slog.String("route", pattern),
		slog.Int("status", rec.status), slog.Duration("duration", d))
}

// notRouted answers 405 when the path exists for another method, else 404.
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request) {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			s.refuse(w, r, &parley.Error{Code: codeMethodNotAllowed, Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
	}
	s.refuse(w, r, parley.Errorf(parley.ENOTFOUND, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(r.Context()); err != nil {
			// The cause goes to the log: /readyz needs no token, so it says no more.
			s.log.Warn("not ready", slog.Any("err", err))
			writeErr(w, s.log, parley.Errorf(parley.EUNAVAILABLE, "not ready; see the server log"))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// statusRecorder remembers the status written, and passes Flush and
// Unwrap through so that streams and WebSocket upgrades keep working.
type statusRecorder struct {
	http.ResponseWriter
	status int
	ctx    context.Context // the request's: done once its client went away
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() { _ = r.FlushError() }

// FlushError flushes and says whether that failed, for http.ResponseController.
func (r *statusRecorder) FlushError() error {
	return http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// httpMetrics counts requests by route and status.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "parley_http_request_seconds", Help: "HTTP request duration by route (streams: their whole life).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"route"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

func (m *httpMetrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
