package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/server"
)

func init() {
	register("serve", "run the HTTP API, the delivery workers and cleanup", func(ctx context.Context, e *env, args []string) error {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f := commonFlags(fs)
		fs.StringVar(&f.Listen, "listen", "", "address to serve the API on [$"+config.EnvListen+"] (default "+config.ListenDefault+")")
		noWorkers := fs.Bool("no-workers", false, "serve the API only; run 'oncepush work' for delivery")
		if err := parse(fs, e, args); err != nil {
			return err
		}
		return run(ctx, e, f, runOptions{api: true, workers: !*noWorkers})
	})
	register("work", "run the delivery workers and cleanup only (no API)", func(ctx context.Context, e *env, args []string) error {
		fs := flag.NewFlagSet("work", flag.ContinueOnError)
		f := commonFlags(fs)
		metricsListen := fs.String("metrics-listen", "", "also serve /metrics, /healthz and /readyz on this address (default: none)")
		if err := parse(fs, e, args); err != nil {
			return err
		}
		return run(ctx, e, f, runOptions{workers: true, metricsListen: *metricsListen})
	})
}

type runOptions struct {
	api, workers  bool
	metricsListen string // work: the operational endpoints' address
}

// run loads the settings, opens the database and runs the API and/or the
// workers until ctx ends (SIGTERM/SIGINT), then shuts down gracefully.
func run(ctx context.Context, e *env, f *config.Flags, o runOptions) error {
	st, err := config.Load(*f, e.getenv)
	if err != nil {
		return err
	}
	log := st.Logger(e.logFile)
	db, err := st.OpenDatabase(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if db.Postgres != nil {
		return serveOn[pgx.Tx](ctx, e, st, log, db.Postgres, o)
	}
	return serveOn(ctx, e, st, log, db.SQLite, o)
}

func serveOn[TTx any](ctx context.Context, e *env, st *config.Settings, log *slog.Logger, drv driver.Driver[TTx], o runOptions) error {
	if _, err := drv.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", drv.Name(), err)
	}
	providers, err := st.BuildProviders(log)
	if err != nil {
		return err
	}
	metrics := server.NewMetrics()
	cfg := st.ClientConfig()
	cfg.Providers = providers
	cfg.Eligibility = server.PreferenceEligibility(drv)
	cfg.Observer = metrics
	cfg.Logger = log
	client, err := oncepush.NewClient(drv, cfg)
	if err != nil {
		return &config.Error{Setting: "engine", Problem: err.Error()}
	}
	if len(providers) == 0 && o.workers {
		log.Warn("no provider is configured: every device's delivery will be recorded as rejected (set providers in --config)")
	}

	var httpSrv *http.Server
	var ln net.Listener
	if o.api {
		// Listen first: a taken port must fail before a first key is shown.
		ln, err = net.Listen("tcp", st.Listen)
		if err != nil {
			return &config.Error{Setting: "--listen", Problem: err.Error()}
		}
		defer ln.Close()
		if err := firstKey(ctx, e, drv); err != nil {
			return err
		}
		srv, err := server.New(server.Options[TTx]{
			Client: client, Driver: drv, Metrics: metrics, Logger: log,
			MaxBodyBytes: st.HTTP.MaxBodyBytes, Version: version(),
		})
		if err != nil {
			return err
		}
		httpSrv = &http.Server{
			Handler:           srv.Handler(),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	if o.metricsListen != "" {
		srv, err := server.New(server.Options[TTx]{Client: client, Driver: drv, Metrics: metrics, Logger: log, Version: version()})
		if err != nil {
			return err
		}
		ln, err = net.Listen("tcp", o.metricsListen)
		if err != nil {
			return &config.Error{Setting: "--metrics-listen", Problem: err.Error()}
		}
		defer ln.Close()
		httpSrv = &http.Server{Handler: srv.OperationsHandler(), ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}
	if o.workers {
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	serveErr := make(chan error, 1)
	if httpSrv != nil {
		go func() { serveErr <- httpSrv.Serve(ln) }()
	}
	if o.api {
		log.Info("oncepush serving", slog.String("listen", ln.Addr().String()), slog.String("database", drv.Name()),
			slog.Bool("workers", o.workers), slog.Int("providers", len(providers)), slog.String("version", version()))
	} else {
		attrs := []any{slog.String("database", drv.Name()), slog.Int("providers", len(providers)), slog.String("version", version())}
		if ln != nil {
			attrs = append(attrs, slog.String("metrics_listen", ln.Addr().String()))
		}
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
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(st.HTTP.ShutdownTimeout))
	defer cancel()
	if httpSrv != nil {
		if err := httpSrv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("http shutdown", slog.Any("error", err))
		}
	}
	if err := client.Stop(sctx); err != nil {
		log.Warn("workers stopped at the deadline: sends in flight were cancelled and recorded", slog.Any("error", err))
	}
	log.Info("oncepush stopped")
	return runErr
}

// firstKey creates an admin key on the first start (when there is none) and
// prints it once, to stdout, never to the log.
func firstKey[TTx any](ctx context.Context, e *env, drv driver.Driver[TTx]) error {
	keys, err := drv.Exec().APIKeyList(ctx)
	if err != nil {
		return fmt.Errorf("read API keys: %w", err)
	}
	if len(keys) > 0 {
		return nil
	}
	k, err := createKey(ctx, drv, "first-start", []string{apikey.ScopeAdmin})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "oncepush: created the first API key (name first-start, scope admin).\n"+
		"It is shown only this once; store it now:\n\n    %s\n\n"+
		"Use it as 'Authorization: Bearer <key>'. Manage keys with 'oncepush keys'.\n", string(k))
	return nil
}

func createKey[TTx any](ctx context.Context, drv driver.Driver[TTx], name string, scopes []string) (apikey.Key, error) {
	k, err := apikey.New()
	if err != nil {
		return "", err
	}
	if err := drv.Exec().APIKeyInsert(ctx, &driver.APIKey{ID: k.ID(), Name: name, Hash: k.Hash(), Scopes: scopes}); err != nil {
		return "", fmt.Errorf("store API key: %w", err)
	}
	return k, nil
}
