package console_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/server"
	"github.com/oncepush/oncepush/pushtest"
	"github.com/oncepush/oncepush/pushtest/fakeproviders"
)

// screenshots is where the tests write the console's screenshots: the
// repository's docs/ when asked (go test ./internal/console -args
// -screenshots=$PWD/docs), else a temporary directory (they are still
// taken, so the command that makes them keeps working).
var screenshots = flag.String("screenshots", "", "write the console's screenshots (PNG) into this directory")

// epoch is where every test's clock starts: Monday 2026-01-05 09:00 UTC.
var epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// chromiumPaths are where Debian's chromium package puts the browser.
var chromiumPaths = []string{"/usr/bin/chromium", "/usr/lib/chromium/chromium"}

// chrome is the package's one browser, started by the first test that needs it.
var chrome struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if chrome.cancel != nil {
		chrome.cancel()
	}
	os.Exit(code)
}

func chromiumPath() (string, error) {
	for _, p := range chromiumPaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the browser tests need Debian's Chromium (%s), which is not installed: "+
		"run `apt-get install -y chromium` (./scripts/test does it when run as root), or put a chromium on PATH", chromiumPaths[0])
}

// tab opens a new tab of the package's browser for the test.
func tab(t *testing.T) context.Context {
	t.Helper()
	chrome.once.Do(func() {
		path, err := chromiumPath()
		if err != nil {
			chrome.err = err
			return
		}
		dir, err := os.MkdirTemp("", "oncepush-chromium-")
		if err != nil {
			chrome.err = err
			return
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path), chromedp.Headless, chromedp.DisableGPU, chromedp.NoSandbox, chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(dir), chromedp.WindowSize(1200, 900),
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true),
		)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		chrome.ctx = ctx
		chrome.cancel = func() {
			cancelCtx()
			cancelAlloc()
			_ = os.RemoveAll(dir)
		}
		if err := chromedp.Do(ctx); err != nil { // starts the browser
			chrome.err = fmt.Errorf("start Chromium (%s): %w", path, err)
		}
	})
	if chrome.err != nil {
		t.Fatal(chrome.err)
	}
	ctx, cancel := chromedp.NewContext(chrome.ctx)
	t.Cleanup(cancel)
	// The page's uncaught errors and console output go to the test's log.
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	logged := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			t.Logf("page exception: %s %s", ev.ExceptionDetails.Text, exceptionText(ev.ExceptionDetails))
		}
	}()
	go func() {
		for ev, err := range logged {
			if err != nil {
				return
			}
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			t.Logf("page console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	}()
	// The tab closes when the test ends; each call to the browser is bounded
	// on its own (bounded, waitLimit), so a wait that never ends fails
	// saying what it waited for instead of holding the package until its
	// -timeout.
	stop := context.AfterFunc(t.Context(), cancel)
	t.Cleanup(func() { stop() })
	return ctx
}

// env is one test's oncepush server, on SQLite, with the real provider
// clients talking to the fake providers, and a clock the test moves.
type env struct {
	t      *testing.T
	url    string
	clock  *pushtest.Clock
	fake   *pushtest.FakeServer
	client *oncepush.Client[*sql.Tx]
	store  serverstore.Executor
	// admin holds every scope.
	admin string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, clock: pushtest.NewClock(epoch)}
	drv, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "oncepush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	store := drv.ServerStore()
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.fake = pushtest.NewFakeServerWith(t, &pushtest.FakeOptions{Clock: e.clock})
	quiet := slog.New(slog.DiscardHandler)
	providers, err := fakeproviders.New(e.fake, fakeproviders.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	metrics := server.NewMetrics()
	cfg := &oncepush.Config{Providers: providers, Observer: metrics, Clock: e.clock, Logger: quiet}
	server.Configure(cfg, store)
	if e.client, err = oncepush.NewClient(drv, cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options[*sql.Tx]{Client: e.client, Store: store, Metrics: metrics, Logger: quiet, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e.url = ts.URL
	e.store = store.Exec()
	e.admin = e.key(apikey.ScopeAdmin)
	return e
}

// key stores a new API key with the scopes and returns it.
func (e *env) key(scopes ...string) string {
	e.t.Helper()
	k, err := apikey.New()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.APIKeyInsert(e.t.Context(), &serverstore.APIKey{ID: k.ID(), Name: "test", Hash: k.Hash(), Scopes: scopes}); err != nil {
		e.t.Fatal(err)
	}
	return string(k)
}

// register registers a device for the recipient.
func (e *env) register(recipient string, tr oncepush.Transport, token oncepush.Token) *oncepush.Device {
	e.t.Helper()
	d, err := e.client.RegisterDevice(e.t.Context(), oncepush.Device{Recipient: recipient, Transport: tr, Token: token})
	if err != nil {
		e.t.Fatalf("register %s for %s: %v", tr, recipient, err)
	}
	return d
}

// send sends msg to the recipients and returns the notification's id.
func (e *env) send(recipients []string, msg oncepush.Message, opts *oncepush.SendOptions) int64 {
	e.t.Helper()
	res, err := e.client.Send(e.t.Context(), recipients, msg, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.MessageID
}

// drain delivers everything due at the clock's now.
func (e *env) drain() {
	e.t.Helper()
	if _, err := e.client.Drain(context.WithoutCancel(e.t.Context())); err != nil {
		e.t.Fatalf("Drain: %v", err)
	}
}

// do runs browser actions, failing the test on an error, or when they
// have not finished after waitLimit.
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := bounded(ctx)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(boundedErr(ctx, err))
	}
}

// run runs one browser action that returns a value, failing the test on an
// error, or when it has not finished after waitLimit.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := bounded(ctx)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(boundedErr(ctx, err))
	}
	return v
}

// bounded is ctx for one call to the browser: a call that never ends (a
// promise that never settles, a target that stopped answering) fails after
// waitLimit instead of holding the test until the binary's -timeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, waitLimit)
}

// boundedErr says that a call ran out of its waitLimit, when it did.
func boundedErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("the browser did not answer within %v: %w", waitLimit, err)
	}
	return err
}

// text is the text of the first element the CSS selector matches, once
// it is visible.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	waitVisible(t, ctx, chromedp.CSS(sel), sel)
	return run(t, ctx, chromedp.Text(chromedp.CSS(sel)))
}

// waitVisible waits for what sel selects to be visible, for at most
// waitLimit, and fails the test naming what (as written) it waited for.
func waitVisible[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(sel)); err != nil {
		t.Fatalf("waiting for %s to be visible: %v", what, err)
	}
}

// waitLimit bounds every wait for the browser: far beyond what a loaded
// machine needs, it turns a lost event into a failure that says what was
// awaited instead of a hang until the package's timeout.
const waitLimit = 2 * time.Minute

// until waits for a JavaScript predicate to hold, polling it, and returns
// its value; it fails the test naming the predicate after waitLimit.
func until[T any](t *testing.T, ctx context.Context, predicate string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](predicate, chromedp.WithPollingTimeout(waitLimit), chromedp.WithPollingInterval(10*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for %s: %v", predicate, err)
	}
	return v
}

// screenshot writes the tab's viewport as docs/console-<name>.png (or into
// a temporary directory).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	png := run(t, ctx, chromedp.CaptureScreenshot())
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}
