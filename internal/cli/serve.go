package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/console"
	"github.com/oncepush/oncepush/internal/server"
	"github.com/oncepush/oncepush/internal/stack"
)

func serveCommand(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := commonFlags(fs)
	fs.StringVar(&f.Listen, "listen", "", "address to serve the API on [$"+config.EnvListen+"] (default "+config.ListenDefault+")")
	fs.StringVar(&f.MetricsListen, "metrics-listen", "", "serve /metrics (and /healthz, /readyz) on this address, not on the API's [$"+config.EnvMetricsListen+"] (default: on the API's)")
	noWorkers := fs.Bool("no-workers", false, "serve the API only; run 'oncepush work' for delivery")
	fs.BoolFunc("access-log", "log one line per API request: method, route, status, duration, key id [$"+config.EnvAccessLog+"] (default off)",
		func(v string) error { f.AccessLog = v; return nil })
	if err := parse(fs, e, args); err != nil {
		return err
	}
	return run(ctx, e, f, runOptions{api: true, workers: !*noWorkers})
}

func workCommand(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("work", flag.ContinueOnError)
	f := commonFlags(fs)
	fs.StringVar(&f.MetricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this address [$"+config.EnvMetricsListen+"] (default: none)")
	if err := parse(fs, e, args); err != nil {
		return err
	}
	return run(ctx, e, f, runOptions{workers: true})
}

type runOptions struct {
	api, workers bool
}

// run loads the settings, opens the database and runs the API and/or the
// workers until ctx ends (SIGTERM/SIGINT), then shuts down gracefully.
func run(ctx context.Context, e *env, f *config.Flags, o runOptions) error {
	// Every problem of the settings at once, the providers' included,
	// before the database is touched.
	st, err := config.Load(*f, e.getenv)
	if st == nil {
		return err
	}
	log := st.Logger(e.logFile)
	providers, perr := st.BuildProviders(log)
	problems, other := config.Errors(nil).Join(err)
	if other == nil {
		problems, other = problems.Join(perr)
	}
	if other != nil {
		return other
	}
	if err := problems.Err(); err != nil {
		return err
	}
	log.Debug("settings", slog.Any("settings", st))
	db, err := stack.OpenMigrated(ctx, st)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(providers) == 0 && o.workers {
		log.Warn("no provider is configured: every device will be recorded as rejected and every delivery as failed (set providers in the configuration file)")
	}

	// The listeners come first: a taken port must fail before a first key is
	// shown. The API's has the API; the metrics listener (metricsListen),
	// when set, has /metrics, /healthz and /readyz, and then /metrics is not
	// on the API's.
	var apiLn, opsLn net.Listener
	if o.api {
		if apiLn, err = net.Listen("tcp", st.Listen); err != nil {
			return &config.Error{Setting: st.Origin("listen"), Problem: err.Error()}
		}
		defer apiLn.Close()
	}
	if st.MetricsListen != "" {
		if opsLn, err = net.Listen("tcp", st.MetricsListen); err != nil {
			return &config.Error{Setting: st.Origin("metricsListen"), Problem: err.Error()}
		}
		defer opsLn.Close()
	}
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	type served struct {
		srv *http.Server
		ln  net.Listener
	}
	var servers []served
	metrics := server.NewMetrics()
	cfg := st.ClientConfig()
	cfg.Providers = providers
	cfg.Observer = metrics
	cfg.Logger = log
	var so *stack.ServerOptions
	if apiLn != nil || opsLn != nil {
		so = &stack.ServerOptions{Metrics: metrics, MaxBodyBytes: st.HTTP.MaxBodyBytes, Version: version(),
			SeparateMetrics: opsLn != nil, AccessLog: st.HTTP.AccessLog, MaxBacklogAge: time.Duration(st.HTTP.MaxBacklogAge)}
	}
	stk, err := db.Assemble(cfg, so)
	if err != nil {
		return &config.Error{Setting: "engine", Problem: err.Error()}
	}
	client, srv := stk.Client, stk.Server
	if apiLn != nil {
		if err := firstKey(ctx, e, log, db.Server); err != nil {
			return err
		}
		servers = append(servers, served{httpServer(srv.Handler(), errorLog), apiLn})
	}
	if opsLn != nil {
		servers = append(servers, served{httpServer(srv.OperationsHandler(), errorLog), opsLn})
	}
	if o.workers {
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	// Whoever serves /metrics reads the backlog for it, and for
	// backpressure, on a clock of its own: a scrape reads nothing.
	backlogCtx, stopBacklog := context.WithCancel(ctx)
	backlogDone := make(chan struct{})
	if srv != nil {
		if err := srv.RefreshBacklog(ctx); err != nil {
			log.Warn("backlog read failed; the backlog gauges start at zero", slog.Any("error", err))
		}
		go func() {
			defer close(backlogDone)
			srv.WatchBacklog(backlogCtx, srv.BacklogInterval())
		}()
	} else {
		close(backlogDone)
	}
	serveErr := make(chan error, len(servers))
	for _, s := range servers {
		go func() { serveErr <- s.srv.Serve(s.ln) }()
	}
	attrs := []any{slog.String("database", db.Name), slog.Int("providers", len(providers)), slog.String("version", version())}
	if opsLn != nil {
		attrs = append(attrs, slog.String("metrics_listen", opsLn.Addr().String()))
	}
	if o.api {
		log.Info("oncepush serving", append([]any{slog.String("listen", apiLn.Addr().String()),
			slog.String("console", consoleURL(apiLn.Addr())), slog.Bool("workers", o.workers)}, attrs...)...)
	} else {
		log.Info("oncepush working", attrs...)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new requests or claims; finishing what is in flight",
			slog.Duration("deadline", time.Duration(st.HTTP.ShutdownTimeout)))
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	}
	stopBacklog()
	<-backlogDone
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(st.HTTP.ShutdownTimeout))
	defer cancel()
	for _, s := range servers {
		if err := s.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("http shutdown", slog.Any("error", err))
		}
	}
	if err := client.Stop(sctx); err != nil {
		log.Warn("workers stopped at the deadline: sends in flight were cancelled and recorded", slog.Any("error", err))
	}
	log.Info("oncepush stopped")
	return runErr
}

// consoleURL is the console's address on the API's listener, for the
// person who starts the server to open: a listener on every interface
// (0.0.0.0, ::) is reached at localhost from this host.
func consoleURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return console.Path
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + console.Path
}

// Limits of every listener, so that a client that is slow or never
// finishes (one byte of header a second, a body that never ends, an idle
// connection kept open) holds a connection for a bounded time.
const (
	readHeaderTimeout = 5 * time.Second   // the request line and headers
	readTimeout       = 30 * time.Second  // the whole request, body included
	writeTimeout      = 60 * time.Second  // from the end of the headers to the end of the answer
	idleTimeout       = 120 * time.Second // between requests on a kept-alive connection
	maxHeaderBytes    = 64 << 10
)

// httpServer serves h with the listeners' limits.
func httpServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

// firstKey creates an admin key on the first start (when there is none) and
// prints it once, to stdout, never to the log. When there are keys but every
// one is revoked, nothing can call the API: it warns, saying how to make one.
func firstKey(ctx context.Context, e *env, log *slog.Logger, ex serverstore.Executor) error {
	keys, err := ex.APIKeyList(ctx)
	if err != nil {
		return fmt.Errorf("read API keys: %w", err)
	}
	if len(keys) > 0 {
		if !slices.ContainsFunc(keys, func(k *serverstore.APIKey) bool { return k.RevokedAt == nil }) {
			log.Warn("every API key is revoked, so the API refuses every request; create one with "+
				"'oncepush keys create --name NAME --scope admin' on this database", slog.Int("revoked_keys", len(keys)))
		}
		return nil
	}
	k, err := createKey(ctx, ex, "first-start", []string{apikey.ScopeAdmin})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "oncepush: created the first API key (name first-start, scope admin).\n"+
		"It is shown only this once; store it now:\n\n    %s\n\n"+
		"Use it as 'Authorization: Bearer <key>'. Manage keys with 'oncepush keys'.\n", string(k))
	return nil
}

func createKey(ctx context.Context, ex serverstore.Executor, name string, scopes []string) (apikey.Key, error) {
	k, err := apikey.New()
	if err != nil {
		return "", err
	}
	if err := ex.APIKeyInsert(ctx, &serverstore.APIKey{ID: k.ID(), Name: name, Hash: k.Hash(), Scopes: scopes}); err != nil {
		return "", fmt.Errorf("store API key: %w", err)
	}
	return k, nil
}
